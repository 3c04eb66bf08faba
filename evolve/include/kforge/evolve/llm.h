// LLM endpoints over libcurl: OpenAI-compatible chat completions (OpenAI, vLLM, SGLang, Ollama,
// llama.cpp) and the Anthropic Messages API. Timeouts, retries with exponential backoff and jitter
// on 429, 5xx and network errors (Retry-After honoured), tolerant parsing, token accounting.
// API keys live only in Endpoint and in the request's headers: never in errors, logs or results.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/error.h"

namespace kforge::evolve {

enum class Provider { OpenAI, Anthropic };

struct Endpoint {
  Provider provider = Provider::OpenAI;
  std::string base_url;  // e.g. https://api.openai.com/v1, http://localhost:8000/v1, https://api.anthropic.com
  std::string model;
  std::string api_key;   // secret: never printed
  std::string anthropic_version = "2023-06-01";
};

// "openai:gpt-4.1" or "anthropic:claude-sonnet-4-5": provider, model, and the base URL and key from
// the environment (OPENAI_BASE_URL / OPENAI_API_KEY, ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY).
Endpoint endpoint_from_spec(const std::string& spec);

struct ChatRequest {
  std::string system;
  std::string user;
  double temperature = 1.0;
  int max_tokens = 8192;
};

struct ChatResponse {
  std::string text;       // the answer (text blocks joined)
  std::string reasoning;  // reasoning/thinking content when the endpoint returns it
  std::string model;      // as the endpoint reports it
  int64_t tokens_in = 0, tokens_out = 0;
  double latency_ms = 0;  // the successful attempt
  int attempts = 0;
};

struct RetryPolicy {
  int max_attempts = 5;
  std::chrono::milliseconds base_delay{500};
  std::chrono::milliseconds max_delay{60000};
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds total_timeout{300000};  // per attempt
};

class LlmError : public Error {
 public:
  enum class Kind { Http, Timeout, Network, BadResponse };
  LlmError(Kind kind, int http_status, const std::string& what) : Error(what), kind_(kind), status_(http_status) {}
  Kind kind() const { return kind_; }
  int http_status() const { return status_; }

 private:
  Kind kind_;
  int status_;
};

class LlmClient {
 public:
  // `sleep` is how the client waits between attempts (tests observe it); default: really sleep.
  explicit LlmClient(Endpoint endpoint, RetryPolicy policy = {},
                     std::function<void(std::chrono::milliseconds)> sleep = {});
  ChatResponse chat(const ChatRequest& request) const;  // throws LlmError after the last attempt
  const Endpoint& endpoint() const { return endpoint_; }

  // The delay before retry `attempt` (1-based): Retry-After when given, else exponential with jitter.
  std::chrono::milliseconds backoff(int attempt, std::optional<double> retry_after_s) const;

 private:
  Endpoint endpoint_;
  RetryPolicy policy_;
  std::function<void(std::chrono::milliseconds)> sleep_;
};

// Parses one provider's JSON reply (exposed for tests); throws LlmError(BadResponse).
ChatResponse parse_reply(Provider provider, const std::string& body);

// Replaces every occurrence of `secret` in `text` (defence in depth for messages built from replies).
std::string redact(std::string text, const std::string& secret);

}  // namespace kforge::evolve
