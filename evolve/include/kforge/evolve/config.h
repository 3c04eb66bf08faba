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
  std::string spec;   // "openai:gpt-4.1"
  double weight = 1;  // share of requests in the ensemble
  std::map<std::string, double> temperature;  // by role: translate, optimize, crossover, repair
  int max_tokens = 8192;
  double price_input_per_mtok = 0;   // dollars per million input tokens
  double price_output_per_mtok = 0;  // dollars per million output tokens

  double temperature_for(const std::string& role) const;  // default 1.0
  double cost_usd(int64_t tokens_in, int64_t tokens_out) const;
};

struct ProviderConfig {
  std::string base_url;
  std::string api_key;  // from api_key_env (default OPENAI_API_KEY / ANTHROPIC_API_KEY) or api_key
  int concurrency = 4;
  // Set when the file gives them (validated: seconds in (0, kMaxTimeoutSeconds]).
  std::optional<std::chrono::milliseconds> timeout;          // per attempt
  std::optional<std::chrono::milliseconds> connect_timeout;
  std::optional<int64_t> max_reply_bytes;
};

struct LlmConfig {
  std::vector<ModelConfig> models;
  std::map<std::string, ProviderConfig> providers;  // "openai", "anthropic"

  Endpoint endpoint(const ModelConfig& m) const;
  // `base` with what the model's provider table sets (timeout, connect_timeout, max_reply_bytes).
  RetryPolicy policy(const ModelConfig& m, RetryPolicy base = {}) const;
  // A model drawn by weight.
  const ModelConfig& pick(std::mt19937_64& rng) const;
};

// Throws InputError naming the file, line and field.
LlmConfig load_llm_config(const std::string& path);

}  // namespace kforge::evolve

namespace kforge::evolve {

}  // namespace kforge::evolve
