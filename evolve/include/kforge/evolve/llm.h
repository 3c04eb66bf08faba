// LLM endpoints over libcurl: OpenAI-compatible chat completions (OpenAI, vLLM, SGLang, Ollama,
// llama.cpp, OpenRouter, Gemini) and the Anthropic Messages API, streamed (server-sent events) or
// not. Timeouts, retries with exponential backoff and jitter on 429, 5xx and network errors
// (Retry-After honoured), a tokens-per-minute limit, parameters an endpoint refuses learned from
// its 400s, prompt caching, tolerant parsing, token accounting (cached input tokens apart).
// API keys live only in Endpoint and in the request's headers: never in errors, logs or results.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/common/error.h"

namespace kforge::evolve {

enum class Provider { OpenAI, Anthropic };

// How the requests to one model are shaped (the LLM config's keys, docs/llm-config.md). What an
// endpoint refuses with a 400 naming the field is changed here for the rest of the run.
struct WireOptions {
  // OpenAI-compatible: the body field of the token limit. OpenAI's reasoning models (o-series,
  // gpt-5) take only "max_completion_tokens"; servers that know only "max_tokens" are configured
  // so.
  std::string token_limit_field = "max_completion_tokens";
  bool temperature = true;  // send the request's temperature when it has one
  std::string
      reasoning_effort;  // OpenAI-compatible: "minimal", "low", "medium", "high"; "": not sent
  // Anthropic extended thinking (with it on, no temperature is sent): `thinking_budget` tokens
  // ({"type": "enabled"}), or adaptive (the models that take only {"type": "adaptive"}); both
  // 0/false: off.
  int thinking_budget = 0;
  bool thinking_adaptive = false;
  bool stream = true;  // server-sent events; a server that answers in one JSON body is read as such
  bool stream_usage =
      true;  // OpenAI-compatible: stream_options.include_usage (usage in the last chunk)
  bool cache_prompt =
      true;  // Anthropic: cache_control on the system text and the request's context
};

struct Endpoint {
  Provider provider = Provider::OpenAI;
  std::string base_url;  // e.g. https://api.openai.com/v1, http://localhost:8000/v1,
                         // https://api.anthropic.com
  std::string model;
  std::string api_key;  // secret: never printed
  std::string anthropic_version = "2023-06-01";
  WireOptions wire;
};

// "openai:gpt-4.1" or "anthropic:claude-sonnet-4-5": provider, model, and the base URL and key from
// the environment (OPENAI_BASE_URL / OPENAI_API_KEY, ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY).
// Throws InputError naming the variable when its base URL is not http:// or https://.
Endpoint endpoint_from_spec(const std::string& spec);

// Whether `url` is an http:// or https:// URL (case-insensitive scheme) with a host: the only
// protocols the client speaks (file://, gopher://, ... would read local files or reach any port).
bool is_http_url(const std::string& url);

// A request's text comes in three parts, the stable ones first so a provider's prompt cache
// serves them again: `system` (the same for every request), `context` (the same for every request
// about one task: the answer format, the GPU, the task), `user` (this request's own part). The
// user message is the context, a blank line and `user`; Anthropic's request marks the system text
// and the context cacheable.
struct ChatRequest {
  std::string system;
  std::string user;
  std::optional<double>
      temperature;  // sent only when set (reasoning models refuse all but the default)
  int max_tokens = 8192;
  std::string context = {};
};

// The most tokens one reply may report in either direction: past every context window. A larger
// count is an endpoint's garbage (9.2e18 would overflow the sums): the reply is a bad one, charged
// this many tokens.
inline constexpr int64_t kMaxReplyTokens = 10'000'000;

struct ChatResponse {
  std::string text;           // the answer (text blocks joined), known secrets redacted
  std::string reasoning;      // reasoning/thinking content when the endpoint returns it, redacted
  std::string model;          // as the endpoint reports it
  std::string finish_reason;  // as reported: "stop", "length" (OpenAI), "end_turn", "max_tokens"
                              // (Anthropic), or ""
  // What the endpoint reported for every reply of this call (a retried bad reply's too), each
  // reply's counts within [0, kMaxReplyTokens]. tokens_in counts every input token, those read
  // from the provider's prompt cache (cache_read) and written to it (cache_write) included.
  int64_t tokens_in = 0, tokens_out = 0, tokens_cache_read = 0, tokens_cache_write = 0;
  double latency_ms = 0;  // the successful attempt
  int attempts = 0;
  bool cached = false;  // replayed from the response cache
};

struct RetryPolicy {
  int max_attempts = 5;
  std::chrono::milliseconds base_delay{500};
  std::chrono::milliseconds max_delay{60000};
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds total_timeout{300000};  // per attempt
  // A reply body past this many bytes is cut off and counts as a bad response (an endless body
  // would otherwise fill the memory).
  int64_t max_reply_bytes = int64_t{16} << 20;
};

// Limits of what a RetryPolicy may hold: libcurl reads a zero timeout as "wait forever".
inline constexpr double kMaxTimeoutSeconds = 3600;
inline constexpr int64_t kMinReplyBytes = 1024;
inline constexpr int64_t kMaxReplyBytes = int64_t{1} << 30;

// A timeout given in seconds, as the client takes it: finite, above 0 and at most
// kMaxTimeoutSeconds (0, negative, NaN, infinite or huge values would mean "wait forever").
// Throws InputError naming `file`, `line` and `field` (for a command-line option: the option as
// `file`, no line, an empty field).
std::chrono::milliseconds checked_timeout(double seconds, const std::string& file,
                                          std::optional<int> line, const std::string& field);
// The same for text typed on a command line: the whole text must be a number ("", "10s" fail).
std::chrono::milliseconds parse_timeout(const std::string& text, const std::string& option);
// Throws kforge::Error when a policy holds a timeout or reply cap out of range (a caller's bug:
// user input goes through checked_timeout first).
void validate_policy(const RetryPolicy& policy);

class LlmError : public Error {
 public:
  // Unanswered: no answer yet where one may come later (a batch folder); the run pauses and a
  // resumed run asks again, nothing recorded for the child. CutOff: the reply stopped at the token
  // limit (finish_reason "length", stop_reason "max_tokens") before any answer text, e.g. a
  // reasoning model that spent max_tokens thinking.
  enum class Kind { Http, Timeout, Network, BadResponse, Unanswered, CutOff };
  LlmError(Kind kind, int http_status, const std::string& what)
      : Error(what), kind_(kind), status_(http_status) {}
  Kind kind() const { return kind_; }
  int http_status() const { return status_; }

  // What the failed call's replies reported (they count against the budgets like an answer's).
  int64_t tokens_in = 0, tokens_out = 0, tokens_cache_read = 0, tokens_cache_write = 0;
  std::string finish_reason;  // the last reply's, "" when none came
  // Whether a reply that reported usage came: a paid failure, which the client does not ask again.
  bool paid() const { return tokens_in > 0 || tokens_out > 0 || kind_ == Kind::CutOff; }

 private:
  Kind kind_;
  int status_;
};

// An endpoint's tokens-per-minute limit, shared by its clients: a request waits until its estimate
// (prompt characters / 4 plus its max_tokens, as providers count it) fits the tokens sent in the
// last 60 s; a request larger than the limit goes alone. The estimate is replaced by the usage the
// reply reports.
class TokenRate {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  using Sleep = std::function<void(std::chrono::milliseconds)>;
  // `clock` and `sleep` default to the steady clock and really sleeping (tests pass their own).
  explicit TokenRate(int64_t per_minute, Clock clock = {}, Sleep sleep = {});
  // Waits until `tokens` fit; returns a ticket for settle().
  int64_t acquire(int64_t tokens);
  // The ticket's tokens as the reply reported them (0 for a request that never reached the model).
  void settle(int64_t ticket, int64_t tokens);
  int64_t per_minute() const { return per_minute_; }

 private:
  struct Sent {
    int64_t ticket;
    std::chrono::steady_clock::time_point at;
    int64_t tokens;
  };
  int64_t in_window(
      std::chrono::steady_clock::time_point now);  // drops what left the window; locked
  int64_t per_minute_;
  Clock clock_;
  Sleep sleep_;
  std::mutex mutex_;
  std::vector<Sent> sent_;
  int64_t next_ticket_ = 1;
};

// At most N requests in flight across every client sharing it (an endpoint's concurrency limit).
class ConcurrencyLimit {
 public:
  explicit ConcurrencyLimit(int n) : free_(n) {}
  void acquire();
  void release();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int free_;
};

// Replies stored on disk by the full request and a sample index, so a run replays exactly offline
// and repeated samples of one prompt stay distinct. Keys and auth headers are not part of the key
// or the file.
class ResponseCache {
 public:
  explicit ResponseCache(std::string dir);  // default folder: kforge::cache_dir()/llm
  std::string key(const Endpoint& e, const ChatRequest& r, int sample) const;
  std::optional<ChatResponse> get(const std::string& key) const;
  void put(const std::string& key, const ChatResponse& r) const;

 private:
  std::string dir_;
};

// Whatever answers a chat request: an endpoint over HTTP (LlmClient) or a folder exchanged with a
// batch API (BatchExchange, batch.h).
class ChatModel {
 public:
  virtual ~ChatModel() = default;
  // Thread-safe. `sample` distinguishes repeated samples of one request. Throws LlmError.
  virtual ChatResponse chat(const ChatRequest& request, int sample = 0) const = 0;
  virtual std::string model() const = 0;  // as recorded with each candidate
  // Requests waiting now and later fail at once (LlmError, Unanswered): the run is stopping.
  virtual void cancel() const {}
};

// The body `endpoint` is sent for `request` (its secrets redacted), shaped by endpoint.wire: the
// OpenAI chat-completions or Anthropic Messages request. `stream` adds what streaming needs (a
// batch line's body is never streamed).
nlohmann::json chat_body(const Endpoint& endpoint, ChatRequest request, bool stream);
// The OpenAI body for `model` with default options, not streamed (the OpenAI batch line's body).
nlohmann::json openai_chat_body(const std::string& model, ChatRequest request);

// What a 400 reply says the endpoint refuses among the fields `body` holds: the field's name (its
// "param", or a field quoted in a message that says it is unsupported, not permitted, or must take
// another value), or "" when it names none kforge can leave out. Exposed for tests.
std::string refused_field(const nlohmann::json& body, const std::string& reply_body);
// `wire` changed so the next body leaves `field` out (the token limit: the other field name);
// false when there is nothing to change (the field is required, or was changed already).
bool adapt_to_refusal(Provider provider, WireOptions& wire, const std::string& field);

// Retries: 429, 5xx, network errors, timeouts and bad replies that reported no usage are asked
// again, up to max_attempts; a reply that reported usage (a paid one: cut off at the token limit,
// no answer text, implausible usage) ends the call at once as an LlmError carrying that usage: the
// caller, who knows the budgets, decides whether to ask again. Only http and https are spoken
// (redirects too, though none are followed).
class LlmClient : public ChatModel {
 public:
  // `sleep` is how the client waits between attempts (tests observe it); default: really sleep.
  // Throws InputError when the endpoint's base_url is not http(s) (naming the settings it comes
  // from). `rate`: the endpoint's tokens-per-minute limit, shared with its other clients.
  explicit LlmClient(Endpoint endpoint, RetryPolicy policy = {},
                     std::function<void(std::chrono::milliseconds)> sleep = {},
                     std::shared_ptr<ConcurrencyLimit> limit = nullptr,
                     std::shared_ptr<ResponseCache> cache = nullptr,
                     std::shared_ptr<TokenRate> rate = nullptr);
  // Thread-safe. `sample` distinguishes repeated samples of one request in the cache.
  ChatResponse chat(const ChatRequest& request,
                    int sample = 0) const override;  // throws LlmError after the last attempt
  std::string model() const override { return endpoint_.model; }
  const Endpoint& endpoint() const { return endpoint_; }
  // The options the next request is shaped by: the endpoint's, less what it refused so far.
  WireOptions wire() const;
  // Where the client says, once per refused field, what it leaves out from now on (default: a
  // "kforge: ..." line on stderr). Set before the first chat().
  void on_notice(std::function<void(const std::string&)> notice) { notice_ = std::move(notice); }

  // The delay before retry `attempt` (1-based): Retry-After when given (capped at max_delay, an
  // infinite one too; a NaN or negative one is ignored), else exponential with jitter.
  std::chrono::milliseconds backoff(int attempt, std::optional<double> retry_after_s) const;

 private:
  ChatResponse chat_uncached(const ChatRequest& request) const;
  bool adapt(const nlohmann::json& sent, const std::string& reply_body) const;
  Endpoint endpoint_;
  RetryPolicy policy_;
  std::function<void(std::chrono::milliseconds)> sleep_;
  std::shared_ptr<ConcurrencyLimit> limit_;
  std::shared_ptr<ResponseCache> cache_;
  std::shared_ptr<TokenRate> rate_;
  std::function<void(const std::string&)> notice_;
  mutable std::mutex wire_mutex_;
  mutable WireOptions wire_;  // endpoint_.wire as adapted to the endpoint's refusals
};

// Parses one provider's JSON reply (exposed for tests; the batch folder's answers too): the text
// with known secrets redacted, the finish reason, usage bounded by kMaxReplyTokens. Throws
// LlmError (BadResponse, or CutOff for a reply stopped at the token limit with no answer text)
// carrying whatever usage the reply reported.
ChatResponse parse_reply(Provider provider, const std::string& body);

// A streamed reply (the server-sent events of OpenAI's chat completions or Anthropic's Messages)
// assembled into the body the same request would have had unstreamed, for parse_reply. Throws
// LlmError: Network when the stream ends before its end ("[DONE]", a finish reason, message_stop),
// Http for an error event (overloaded_error: 529), carrying the usage the events reported so far.
std::string assemble_stream(Provider provider, const std::string& events);
// Whether a reply body is server-sent events rather than one JSON document.
bool is_event_stream(const std::string& content_type, const std::string& body);

// `text` with `secret` and every other known secret (kforge/common/secrets.h) redacted, echoes
// and partial echoes included (defence in depth for messages built from replies).
std::string redact(std::string text, const std::string& secret);

}  // namespace kforge::evolve
