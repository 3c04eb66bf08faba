// The LLM configuration file (TOML): an ensemble of models with weights, per-role temperatures and
// prices, and per-provider endpoints. Documented in docs/llm-config.md.
#pragma once

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kforge/evolve/llm.h"

namespace kforge::evolve {

struct ModelConfig {
  std::string spec;   // "openai:gpt-4.1", or "NAME:model" for a [providers.NAME] table
  double weight = 1;  // share of requests in the ensemble
  // By role: translate, optimize, crossover, repair, ideas (one number in the file sets all five).
  std::map<std::string, double> temperature;
  int max_tokens = 8192;
  std::string reasoning_effort;  // OpenAI-compatible APIs; "" not sent
  int thinking_budget = 0;       // Anthropic extended thinking; 0 off
  bool thinking_adaptive =
      false;  // Anthropic `thinking = "adaptive"` (the models that take only that)
  double price_input_per_mtok = 0;   // dollars per million input tokens
  double price_output_per_mtok = 0;  // dollars per million output tokens
  // Input tokens read from / written to the provider's prompt cache. load_llm_config fills what
  // the file leaves out as the provider prices it: Anthropic 0.1x and 1.25x input (its 5-minute
  // cache); OpenAI-compatible reads at the input price (no discount assumed) and writes at 1.25x
  // (only OpenAI's GPT-5.6 family and routers such as OpenRouter report writes, and charge so).
  double price_cached_input_per_mtok = 0;
  double price_cache_write_per_mtok = 0;

  // The provider's name: what `spec` has before its first ':' ("openai", "vllm", ...).
  std::string provider() const { return spec.substr(0, spec.find(':')); }
  // The role's temperature; none when the file gives none (no temperature is sent).
  std::optional<double> temperature_for(const std::string& role) const;
  // tokens_in counts every input token, cache_read and cache_write ones included: (in - read -
  // write) x input + read x cached_input + write x cache_write + out x output, per million. Counts
  // are clamped to what can be (negative ones to 0, cached ones to tokens_in).
  double cost_usd(int64_t tokens_in, int64_t tokens_out, int64_t cache_read = 0,
                  int64_t cache_write = 0) const;
};

// One model named without a config file (--model): its spec, every other field the default.
inline ModelConfig model_config(std::string spec) {
  ModelConfig m;
  m.spec = std::move(spec);
  return m;
}

struct ProviderConfig {
  // `api = "openai" | "anthropic"`; default: the table's name when it is one.
  Provider api = Provider::OpenAI;
  std::string base_url;  // required for a table of another name
  // From api_key (the file) or the variable api_key_env names; default variable OPENAI_API_KEY /
  // ANTHROPIC_API_KEY for the tables named openai / anthropic, none for other names (a local
  // server or a router must not be sent another provider's key).
  std::string api_key;
  int concurrency = 4;
  // Set when the file gives them (validated: seconds in (0, kMaxTimeoutSeconds]).
  std::optional<std::chrono::milliseconds> timeout;  // per attempt
  std::optional<std::chrono::milliseconds> connect_timeout;
  std::optional<int64_t> max_reply_bytes;
  // Request shape (WireOptions) where the file sets it.
  std::optional<std::string> token_limit_field;  // "max_completion_tokens" or "max_tokens"
  std::optional<bool> stream, prompt_cache;
  int64_t tokens_per_minute = 0;  // 0: no limit; else 1 to kMaxTokensPerMinute
};

inline constexpr int64_t kMaxTokensPerMinute = 1'000'000'000;

struct LlmConfig {
  std::vector<ModelConfig> models;
  std::map<std::string, ProviderConfig> providers;  // "openai", "anthropic", or any name with `api`

  // The model's endpoint: its provider table's API, base URL, key and request shape, with the
  // model's reasoning_effort and thinking_budget. openai / anthropic without a table (or without
  // its base_url) come from endpoint_from_spec (the environment); throws InputError as it does.
  Endpoint endpoint(const ModelConfig& m) const;
  // `base` with what the model's provider table sets (timeout, connect_timeout, max_reply_bytes).
  RetryPolicy policy(const ModelConfig& m, RetryPolicy base = {}) const;
  // A model drawn by weight.
  const ModelConfig& pick(std::mt19937_64& rng) const;
};

// Throws InputError naming the file, line and field.
LlmConfig load_llm_config(const std::string& path);

}  // namespace kforge::evolve
