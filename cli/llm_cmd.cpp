// `kforge llm ping [--model PROVIDER:MODEL]`: one tiny request, with latency and tokens.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command_list.h"
#include "commands.h"
#include "kforge/common/secrets.h"
#include "kforge/common/strings.h"
#include "kforge/evolve/config.h"
#include "kforge/evolve/llm.h"

namespace kforge::cli {

void add_llm_command(CLI::App& app, int& exit_code) {
  auto* llm = app.add_subcommand("llm", command_description("llm"));
  llm->require_subcommand(1);
  auto model = std::make_shared<std::string>();
  auto timeout_s = std::make_shared<std::string>();
  auto* ping =
      llm->add_subcommand("ping", "Send one tiny request; show the reply, latency and tokens");
  ping->add_option(
      "--model", *model,
      "PROVIDER:MODEL (default: $KFORGE_MODEL), e.g. openai:gpt-4.1, anthropic:claude-sonnet-4-5");
  auto* timeout_opt = ping->add_option("--timeout", *timeout_s,
                                       "Seconds per attempt, above 0 and at most 3600 (default: "
                                       "the config's provider timeout, else 60)");
  auto config = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  ping->add_flag("--json", *as_json,
                 "One JSON object per model: reply or error, latency, attempts, tokens, cost");
  ping->add_option(
      "--config", *config,
      "LLM config file (TOML, docs/llm-config.md; default $KFORGE_LLM_CONFIG): ping every model");
  ping->callback([&exit_code, model, timeout_s, timeout_opt, config, as_json] {
    std::optional<std::chrono::milliseconds> timeout;  // checked before anything else happens
    if (timeout_opt->count()) timeout = evolve::parse_timeout(*timeout_s, "--timeout");
    std::string cfg_path = *config;
    if (cfg_path.empty())
      if (const char* c = std::getenv("KFORGE_LLM_CONFIG")) cfg_path = c;
    struct Target {
      evolve::Endpoint endpoint;
      evolve::ModelConfig model;
      evolve::RetryPolicy policy;
    };
    evolve::RetryPolicy ping_policy;
    ping_policy.max_attempts = 2;
    ping_policy.total_timeout = std::chrono::seconds(60);
    ping_policy.max_delay =
        std::chrono::seconds(5);  // a Retry-After of hours (or "inf") waits 5 s here
    std::vector<Target> targets;
    if (!model->empty() || cfg_path.empty()) {
      std::string spec = *model;
      if (spec.empty())
        if (const char* m = std::getenv("KFORGE_MODEL")) spec = m;
      if (spec.empty())
        throw InputError("--model", std::nullopt, "",
                         "no model configured: pass --model openai:MODEL or anthropic:MODEL, set "
                         "KFORGE_MODEL, or give --config; "
                         "OPENAI_BASE_URL/OPENAI_API_KEY or ANTHROPIC_API_KEY give the endpoint");
      evolve::ModelConfig m;
      m.spec = spec;
      targets.push_back({evolve::endpoint_from_spec(spec), m, ping_policy});
    } else {
      evolve::LlmConfig cfg = evolve::load_llm_config(cfg_path);
      for (const auto& m : cfg.models)
        targets.push_back({cfg.endpoint(m), m, cfg.policy(m, ping_policy)});
    }
    if (timeout)
      for (auto& t : targets) t.policy.total_timeout = *timeout;
    // "120 in, 45 out", or "120 in (100 from the prompt cache), 45 out".
    auto tokens = [](int64_t in, int64_t cache_read, int64_t out) {
      return std::to_string(in) + " in" +
             (cache_read > 0 ? " (" + std::to_string(cache_read) + " from the prompt cache)" : "") +
             ", " + std::to_string(out) + " out";
    };
    exit_code = kExitOk;
    nlohmann::json results = nlohmann::json::array();
    for (const auto& [e, m, p] : targets) {
      // Anthropic's own API needs a key; a server of another name that speaks its API (a local
      // one) may not.
      if (e.api_key.empty() && m.provider() == "anthropic")
        throw InputError("ANTHROPIC_API_KEY", std::nullopt, "",
                         "not set; the Anthropic API needs a key");
      evolve::LlmClient client(e, p);
      nlohmann::json result = {{"model", m.spec},
                               {"base_url", printable(redact_secrets(e.base_url))},
                               {"key_set", !e.api_key.empty()}};
      // With --json the lines below are not printed; `results` is, once every model answered.
      std::ostringstream discard;
      std::ostream& out = *as_json ? discard : std::cout;
      out << "model     " << m.spec << " at " << printable(redact_secrets(e.base_url))
          << (e.api_key.empty() ? " (no key)" : " (key set)") << "\n";
      evolve::ChatRequest ping;
      ping.system = "Answer with one word.";
      ping.user = "Say pong.";
      // No temperature: reasoning models (OpenAI's o-series and gpt-5, Anthropic's with thinking)
      // refuse any but their default. Room to think: a reasoning model spends tokens before it
      // answers, and a limit of 16 ended the ping in its thinking with no answer. A thinking
      // budget must stay below the limit (the config checked it is below max_tokens).
      ping.max_tokens =
          std::min(m.max_tokens, m.thinking_budget > 0 ? m.thinking_budget + 1024 : 1024);
      try {
        evolve::ChatResponse r = client.chat(ping);
        // The reply is redacted as a whole (parse_reply did) and again here before it is cut.
        std::string reply = redact_secrets(r.text);
        double cost =
            m.cost_usd(r.tokens_in, r.tokens_out, r.tokens_cache_read, r.tokens_cache_write);
        result.update({{"ok", true},
                       {"reply", printable(reply.substr(0, 200))},
                       {"latency_ms", r.latency_ms},
                       {"attempts", r.attempts},
                       {"tokens_in", r.tokens_in},
                       {"tokens_cache_read", r.tokens_cache_read},
                       {"tokens_out", r.tokens_out},
                       {"cost_usd", cost}});
        out << "reply     " << printable(reply.substr(0, 200)) << "\nlatency   " << std::fixed
            << std::setprecision(0) << r.latency_ms << " ms (" << r.attempts
            << " attempt(s))\ntokens    " << tokens(r.tokens_in, r.tokens_cache_read, r.tokens_out)
            << "\ncost      $" << std::setprecision(6) << cost << "\n";
      } catch (const evolve::LlmError& err) {
        double cost = m.cost_usd(err.tokens_in, err.tokens_out, err.tokens_cache_read,
                                 err.tokens_cache_write);
        result.update({{"ok", false},
                       {"error", printable(redact_secrets(err.what()))},
                       {"tokens_in", err.tokens_in},
                       {"tokens_cache_read", err.tokens_cache_read},
                       {"tokens_out", err.tokens_out},
                       {"cost_usd", cost}});
        out << "failed    " << printable(redact_secrets(err.what())) << "\n";
        if (err.tokens_in > 0 || err.tokens_out > 0)  // a failed reply is paid for too
          out << "tokens    " << tokens(err.tokens_in, err.tokens_cache_read, err.tokens_out)
              << "\ncost      $" << std::fixed << std::setprecision(6) << cost << "\n";
        exit_code = kExitFindings;
      }
      results.push_back(std::move(result));
    }
    if (*as_json) std::cout << results.dump(2) << "\n";
  });
}

}  // namespace kforge::cli
