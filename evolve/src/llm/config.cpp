#include "kforge/evolve/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "../config_values.h"
#include "kforge/common/secrets.h"

namespace kforge::evolve {
namespace {

const std::vector<std::string> kRoles = {"translate", "optimize", "crossover", "repair", "ideas"};
// OpenAI's reasoning_effort values (none and xhigh since GPT-5.1/5.2; servers take a subset).
const std::vector<std::string> kEfforts = {"none", "minimal", "low", "medium",
                                           "high", "xhigh",   "max"};

// Bounds of the file's values (docs/llm-config.md).
constexpr int kMaxConcurrency = 256;
constexpr int kMaxTokens = 1 << 20;
constexpr double kMaxWeight = 1e6;
constexpr double kMaxPricePerMtok = 1e6;  // dollars per million tokens
constexpr int kMinThinkingBudget = 1024;  // Anthropic's smallest budget_tokens
// Published multipliers of the input price: Anthropic's cache read and 5-minute cache write;
// OpenAI's GPT-5.6 family charges writes the same 1.25x.
constexpr double kCacheReadShare = 0.1, kCacheWriteShare = 1.25;

std::optional<int> line_of(const toml::node* n) {
  return toml_line(n);
}

// The tables whose name is their API (and whose endpoint the environment may give).
bool builtin(const std::string& name) {
  return name == "openai" || name == "anthropic";
}

Provider api_of(const std::string& name) {
  return name == "anthropic" ? Provider::Anthropic : Provider::OpenAI;
}

}  // namespace

std::optional<double> ModelConfig::temperature_for(const std::string& role) const {
  auto it = temperature.find(role);
  if (it == temperature.end()) return std::nullopt;
  return it->second;
}

double ModelConfig::cost_usd(int64_t tokens_in, int64_t tokens_out, int64_t cache_read,
                             int64_t cache_write) const {
  auto count = [](int64_t n) { return n > 0 ? static_cast<double>(n) : 0.0; };
  double input = count(tokens_in);
  double read = std::min(count(cache_read), input);
  double written = std::min(count(cache_write), input - read);
  return ((input - read - written) * price_input_per_mtok + read * price_cached_input_per_mtok +
          written * price_cache_write_per_mtok + count(tokens_out) * price_output_per_mtok) /
         1e6;
}

Endpoint LlmConfig::endpoint(const ModelConfig& m) const {
  auto it = providers.find(m.provider());
  const ProviderConfig* p = it == providers.end() ? nullptr : &it->second;
  Endpoint e;
  if (!p || p->base_url.empty()) {
    e = endpoint_from_spec(m.spec);  // openai / anthropic: base URL and key from the environment
  } else {
    e.model = m.spec.substr(m.spec.find(':') + 1);
    e.base_url = p->base_url;
  }
  if (p) {
    e.provider = p->api;
    e.api_key = p->api_key;
    if (p->token_limit_field) e.wire.token_limit_field = *p->token_limit_field;
    if (p->stream) e.wire.stream = *p->stream;
    if (p->prompt_cache) e.wire.cache_prompt = *p->prompt_cache;
  }
  e.wire.reasoning_effort = m.reasoning_effort;
  e.wire.thinking_budget = m.thinking_budget;
  e.wire.thinking_adaptive = m.thinking_adaptive;
  return e;
}

RetryPolicy LlmConfig::policy(const ModelConfig& m, RetryPolicy base) const {
  auto it = providers.find(m.provider());
  if (it == providers.end()) return base;
  if (it->second.timeout) base.total_timeout = *it->second.timeout;
  if (it->second.connect_timeout) base.connect_timeout = *it->second.connect_timeout;
  if (it->second.max_reply_bytes) base.max_reply_bytes = *it->second.max_reply_bytes;
  return base;
}

const ModelConfig& LlmConfig::pick(std::mt19937_64& rng) const {
  std::vector<double> w;
  for (const auto& m : models) w.push_back(m.weight);
  std::discrete_distribution<size_t> d(w.begin(), w.end());
  return models.at(d(rng));
}

LlmConfig load_llm_config(const std::string& path) {
  toml::table root = parse_config_file(path);
  auto at = [&](const toml::node& n, const std::string& field) {
    return ConfigPlace{path, line_of(&n), field};
  };
  auto fail = [&](const toml::node* n, const std::string& field, const std::string& problem) {
    throw InputError(path, line_of(n), field, problem);
  };
  for (auto&& [k, v] : root)
    if (k.str() != "models" && k.str() != "providers")
      fail(&v, std::string(k.str()), "unknown key (known: models, providers)");
  LlmConfig cfg;
  if (const toml::node* p = root.get("providers")) {
    if (!p->is_table()) fail(p, "providers", "must be a table of [providers.NAME] tables");
    for (auto&& [key, node] : *p->as_table()) {
      std::string name(key.str()), field = "providers." + name;
      const toml::table* t = node.as_table();
      if (!t) fail(&node, field, "must be a table");
      ProviderConfig pc;
      pc.api = api_of(name);
      std::string key_env = name == "openai"      ? "OPENAI_API_KEY"
                            : name == "anthropic" ? "ANTHROPIC_API_KEY"
                                                  : "";
      const toml::node *api = nullptr, *limit_field = nullptr, *prompt_cache = nullptr;
      for (auto&& [k, v] : *t) {
        std::string f = field + "." + std::string(k.str());
        if (k.str() == "api") {
          api = &v;
          std::string said = config_choice(v, {"openai", "anthropic"}, at(v, f));
          if (builtin(name) && said != name)
            fail(&v, f,
                 "must be \"" + name + "\" for the table named " + name +
                     " (name another table for another API)");
          pc.api = api_of(said);
        } else if (k.str() == "base_url") {
          if (!v.is_string()) fail(&v, f, "must be a string");
          pc.base_url = **v.as_string();
          if (!is_http_url(pc.base_url)) fail(&v, f, "must be an http:// or https:// URL");
        } else if (k.str() == "api_key_env") {
          if (!v.is_string()) fail(&v, f, "must be the name of an environment variable");
          key_env = **v.as_string();
        } else if (k.str() == "api_key") {
          if (!v.is_string()) fail(&v, f, "must be a string");
          pc.api_key = **v.as_string();
        } else if (k.str() == "concurrency") {
          pc.concurrency = config_integer(toml_int(v), 1, kMaxConcurrency, at(v, f));
        } else if (k.str() == "timeout" || k.str() == "connect_timeout") {
          if (!v.is_number()) fail(&v, f, "must be a number of seconds");
          auto ms = checked_timeout(v.value<double>().value(), path, line_of(&v), f);
          (k.str() == "timeout" ? pc.timeout : pc.connect_timeout) = ms;
        } else if (k.str() == "max_reply_bytes") {
          pc.max_reply_bytes =
              config_integer(toml_int(v), kMinReplyBytes, kMaxReplyBytes, at(v, f), "bytes");
        } else if (k.str() == "token_limit_field") {
          limit_field = &v;
          pc.token_limit_field =
              config_choice(v, {"max_completion_tokens", "max_tokens"}, at(v, f));
        } else if (k.str() == "stream") {
          pc.stream = config_bool(v, at(v, f));
        } else if (k.str() == "prompt_cache") {
          prompt_cache = &v;
          pc.prompt_cache = config_bool(v, at(v, f));
        } else if (k.str() == "tokens_per_minute") {
          pc.tokens_per_minute =
              config_integer(toml_int(v), int64_t{1}, kMaxTokensPerMinute, at(v, f), "tokens");
        } else {
          fail(&v, f,
               "unknown key (known: api, base_url, api_key_env, api_key, concurrency, timeout, "
               "connect_timeout, "
               "max_reply_bytes, token_limit_field, stream, prompt_cache, tokens_per_minute)");
        }
      }
      if (!builtin(name) && !api)
        fail(&node, field + ".api",
             "missing: the API the endpoint speaks, \"openai\" (vLLM, SGLang, Ollama, llama.cpp, "
             "OpenRouter, Gemini, "
             "...) or \"anthropic\"");
      if (!builtin(name) && pc.base_url.empty())
        fail(&node, field + ".base_url",
             "missing: the endpoint's URL, e.g. http://localhost:8000/v1");
      if (limit_field && pc.api != Provider::OpenAI)
        fail(limit_field, field + ".token_limit_field",
             "only for api = \"openai\" (the Anthropic API's field is max_tokens)");
      if (prompt_cache && pc.api != Provider::Anthropic)
        fail(prompt_cache, field + ".prompt_cache",
             "only for api = \"anthropic\" (OpenAI-compatible servers cache prompt prefixes by "
             "themselves)");
      if (pc.api_key.empty() && !key_env.empty())
        if (const char* k = std::getenv(key_env.c_str())) pc.api_key = k;
      remember_secret(pc.api_key);  // never in a log, the archive or a prompt
      while (!pc.base_url.empty() && pc.base_url.back() == '/') pc.base_url.pop_back();
      cfg.providers[name] = pc;
    }
  }
  const toml::node* models = root.get("models");
  if (!models) fail(&root, "models", "missing: list the models with [[models]]");
  const toml::array* arr = models->as_array();
  if (!arr || !arr->is_array_of_tables() || arr->empty())
    fail(models, "models", "must be one or more [[models]] tables");
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::table& t = *arr->get(i)->as_table();
    std::string field = "models[" + std::to_string(i) + "]";
    ModelConfig m;
    const toml::node *model = nullptr, *effort = nullptr, *budget = nullptr, *temperature = nullptr,
                     *adaptive = nullptr;
    bool cached_price = false, write_price = false;
    for (auto&& [k, v] : t) {
      std::string f = field + "." + std::string(k.str());
      if (k.str() == "model") {
        if (!v.is_string()) fail(&v, f, "must be a string like \"openai:gpt-5\"");
        m.spec = **v.as_string();
        model = &v;
      } else if (k.str() == "weight") {
        m.weight = config_number(
            toml_number(v), 0, kMaxWeight, true, at(v, f),
            "a positive number, at most " + std::to_string(static_cast<int>(kMaxWeight)));
      } else if (k.str() == "max_tokens") {
        m.max_tokens = config_integer(toml_int(v), 1, kMaxTokens, at(v, f));
      } else if (k.str() == "temperature") {
        temperature = &v;
        if (v.is_table()) {
          for (auto&& [role, tv] : *v.as_table()) {
            std::string rf = f + "." + std::string(role.str());
            if (std::find(kRoles.begin(), kRoles.end(), std::string(role.str())) == kRoles.end())
              fail(&tv, rf, "unknown role (translate, optimize, crossover, repair, ideas)");
            m.temperature[std::string(role.str())] =
                config_number(toml_number(tv), 0, 2, false, at(tv, rf), "a number in [0, 2]");
          }
        } else {
          double all = config_number(
              toml_number(v), 0, 2, false, at(v, f),
              "a number in [0, 2] (every role's), or a table by role like { translate = 0.7, "
              "repair = 0.2 }");
          for (const std::string& role : kRoles) m.temperature[role] = all;
        }
      } else if (k.str() == "reasoning_effort") {
        effort = &v;
        m.reasoning_effort = config_choice(v, kEfforts, at(v, f));
      } else if (k.str() == "thinking") {
        adaptive = &v;
        m.thinking_adaptive = config_choice(v, {"adaptive"}, at(v, f)) == "adaptive";
      } else if (k.str() == "thinking_budget") {
        budget = &v;
        m.thinking_budget = config_integer(toml_int(v), 1, kMaxTokens, at(v, f), "tokens");
        if (m.thinking_budget < kMinThinkingBudget)
          fail(&v, f,
               "must be at least " + std::to_string(kMinThinkingBudget) +
                   " (Anthropic's smallest budget)");
      } else if (k.str() == "price") {
        if (!v.is_table())
          fail(&v, f, "must be a table { input = dollars per million tokens, output = ... }");
        for (auto&& [pk, pv] : *v.as_table()) {
          std::string pf = f + "." + std::string(pk.str());
          double* slot = pk.str() == "input"          ? &m.price_input_per_mtok
                         : pk.str() == "output"       ? &m.price_output_per_mtok
                         : pk.str() == "cached_input" ? &m.price_cached_input_per_mtok
                         : pk.str() == "cache_write"  ? &m.price_cache_write_per_mtok
                                                      : nullptr;
          if (!slot) fail(&pv, pf, "unknown key (input, output, cached_input, cache_write)");
          *slot =
              config_number(toml_number(pv), 0, kMaxPricePerMtok, false, at(pv, pf),
                            "a non-negative number of dollars per million tokens, at most 1000000");
          cached_price = cached_price || pk.str() == "cached_input";
          write_price = write_price || pk.str() == "cache_write";
        }
      } else {
        fail(&v, f,
             "unknown key (known: model, weight, max_tokens, temperature, reasoning_effort, "
             "thinking, thinking_budget, price)");
      }
    }
    if (!model) fail(&t, field + ".model", "missing");

    // The provider: openai, anthropic, or a [providers.NAME] table.
    size_t colon = m.spec.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == m.spec.size())
      fail(model, field + ".model",
           "'" + m.spec +
               "' is not PROVIDER:MODEL (openai:gpt-5, anthropic:claude-sonnet-4-5, or NAME:model "
               "for a "
               "[providers.NAME] table)");
    std::string name = m.provider();
    auto provider = cfg.providers.find(name);
    if (provider == cfg.providers.end() && !builtin(name))
      fail(model, field + ".model",
           "unknown provider '" + name + "' (openai, anthropic, or a [providers." + name +
               "] table with api and base_url)");
    if (provider == cfg.providers.end() || provider->second.base_url.empty()) {
      try {
        (void)endpoint_from_spec(m.spec);  // the environment's base URL must be http(s)
      } catch (const InputError& e) {
        fail(model, field + ".model", (e.file() == "--model" ? "" : e.file() + " ") + e.problem());
      }
    }
    Provider api = provider == cfg.providers.end() ? api_of(name) : provider->second.api;

    // What the model's API takes.
    if (effort && api != Provider::OpenAI)
      fail(effort, field + ".reasoning_effort",
           "only for api = \"openai\" (an Anthropic model thinks with thinking_budget)");
    if (budget && api != Provider::Anthropic)
      fail(budget, field + ".thinking_budget",
           "only for api = \"anthropic\" (an OpenAI-compatible model reasons with "
           "reasoning_effort)");
    if (budget && m.thinking_budget >= m.max_tokens)
      fail(budget, field + ".thinking_budget",
           "must be below max_tokens (" + std::to_string(m.max_tokens) +
               "): Anthropic counts the thinking in max_tokens");
    if (budget && temperature)
      fail(temperature, field + ".temperature",
           "not with thinking_budget: Anthropic refuses a temperature with extended thinking");
    if (adaptive && api != Provider::Anthropic)
      fail(adaptive, field + ".thinking", "only for api = \"anthropic\"");
    if (adaptive && budget)
      fail(adaptive, field + ".thinking",
           "\"adaptive\" or thinking_budget, not both (adaptive thinking takes no budget)");
    if (adaptive && temperature)
      fail(temperature, field + ".temperature",
           "not with thinking: Anthropic refuses a temperature with thinking on");
    if (!cached_price)
      m.price_cached_input_per_mtok = api == Provider::Anthropic
                                          ? kCacheReadShare * m.price_input_per_mtok
                                          : m.price_input_per_mtok;
    if (!write_price) m.price_cache_write_per_mtok = kCacheWriteShare * m.price_input_per_mtok;
    cfg.models.push_back(m);
  }
  return cfg;
}

}  // namespace kforge::evolve
