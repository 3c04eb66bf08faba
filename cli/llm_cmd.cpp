// `kforge llm ping [--model PROVIDER:MODEL]`: one tiny request, with latency and tokens.
#include <iomanip>
#include <iostream>

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
  ping->add_option(
      "--config", *config,
      "LLM config file (TOML, docs/llm-config.md; default $KFORGE_LLM_CONFIG): ping every model");
  ping->callback([&exit_code, model, timeout_s, timeout_opt, config] {
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
    exit_code = kExitOk;
    for (const auto& [e, m, p] : targets) {
      if (e.api_key.empty() && e.provider == evolve::Provider::Anthropic)
        throw InputError("ANTHROPIC_API_KEY", std::nullopt, "",
                         "not set; the Anthropic API needs a key");
      evolve::LlmClient client(e, p);
      std::cout << "model     " << m.spec << " at " << printable(redact_secrets(e.base_url))
                << (e.api_key.empty() ? " (no key)" : " (key set)") << "\n";
      try {
        evolve::ChatResponse r = client.chat({"Answer with one word.", "Say pong.", 0.0, 16});
        // The reply is redacted as a whole (parse_reply did) and again here before it is cut.
        std::string reply = redact_secrets(r.text);
        std::cout << "reply     " << printable(reply.substr(0, 200)) << "\nlatency   " << std::fixed
                  << std::setprecision(0) << r.latency_ms << " ms (" << r.attempts
                  << " attempt(s))\ntokens    " << r.tokens_in << " in, " << r.tokens_out
                  << " out\n"
                  << "cost      $" << std::setprecision(6) << m.cost_usd(r.tokens_in, r.tokens_out)
                  << "\n";
      } catch (const evolve::LlmError& err) {
        std::cout << "failed    " << printable(redact_secrets(err.what())) << "\n";
        if (err.tokens_in > 0 || err.tokens_out > 0)  // a failed reply is paid for too
          std::cout << "tokens    " << err.tokens_in << " in, " << err.tokens_out
                    << " out\ncost      $" << std::fixed << std::setprecision(6)
                    << m.cost_usd(err.tokens_in, err.tokens_out) << "\n";
        exit_code = kExitFindings;
      }
    }
  });
}

}  // namespace kforge::cli
