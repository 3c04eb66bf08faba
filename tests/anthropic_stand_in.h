// A loopback stand-in for Anthropic's Messages API (POST /v1/messages) in its real format: request
// validation, extended thinking, prompt caching, server-sent events, and the faults the tests of
// kforge's client need (test_llm_anthropic.cpp). A cpp-httplib server on 127.0.0.1, random port.
//
// Where the formats come from (looked up, not guessed):
//  - Request fields, block shapes, usage and event types: the Python SDK generated from Anthropic's
//    OpenAPI spec (anthropics/anthropic-sdk-python, src/anthropic/types/: message_create_params.py,
//    text_block_param.py, cache_control_ephemeral_param.py, thinking_config_enabled_param.py,
//    message.py, usage.py, message_delta_usage.py, raw_message_delta_event.py, signature_delta.py,
//    thinking_block.py, shared/error_response.py, shared/error_type.py).
//  - The event flow (message_start, content_block_start/delta/stop per block, message_delta,
//    message_stop, ping anywhere, an `error` event such as overloaded_error mid-stream):
//    Anthropic's streaming page (docs.anthropic.com .../messages-streaming); the empty thinking
//    block
//    `{"type":"thinking","thinking":"","signature":""}` that opens a streamed thinking block and
//    the signature_delta just before its content_block_stop: recorded API streams in public test
//    data.
//  - Prompt caching: the prefix is tools, system, messages in that order up to each cache_control
//    block; at most 4 breakpoints; a model-dependent minimum (1024 tokens for Sonnet 4.5 /
//    Opus 4.1, more for others); usage: total input = input_tokens + cache_creation_input_tokens +
//    cache_read_input_tokens (SDK usage.py), input_tokens being the tokens after the last
//    breakpoint; hits are looked up at block boundaries up to 20 blocks before a breakpoint.
//  - Error wording: API replies quoted in public issue threads (each message below is one of them,
//    unless its comment says otherwise).
// Tokens are estimated as characters / 4, rounded up, per text block (the real tokenizer differs;
// the tests only need counts that are stable and add up).
#pragma once

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kforge/evolve/llm.h"

namespace kforge::test {

// ---- The reference's lists ----

// The top-level fields of a Messages request (MessageCreateParams).
inline const std::set<std::string>& anthropic_request_fields() {
  static const std::set<std::string> fields = {
      "model",         "messages", "max_tokens",    "cache_control", "container",
      "inference_geo", "metadata", "output_config", "service_tier",  "stop_sequences",
      "stream",        "system",   "temperature",   "thinking",      "tool_choice",
      "tools",         "top_k",    "top_p"};
  return fields;
}
// A text block's fields (TextBlockParam), in `system` and in a message's content.
inline const std::set<std::string>& anthropic_text_block_fields() {
  static const std::set<std::string> fields = {"type", "text", "cache_control", "citations"};
  return fields;
}
// An input message's fields (MessageParam).
inline const std::set<std::string>& anthropic_message_fields() {
  static const std::set<std::string> fields = {"role", "content"};
  return fields;
}
// cache_control's fields (CacheControlEphemeralParam): type "ephemeral", ttl "5m" or "1h".
inline const std::set<std::string>& anthropic_cache_control_fields() {
  static const std::set<std::string> fields = {"type", "ttl"};
  return fields;
}
// thinking's fields when enabled (ThinkingConfigEnabledParam).
inline const std::set<std::string>& anthropic_thinking_enabled_fields() {
  static const std::set<std::string> fields = {"type", "budget_tokens", "display"};
  return fields;
}

// The stand-in's token estimate: characters / 4, rounded up.
inline int64_t anthropic_tokens(const std::string& text) {
  return (static_cast<int64_t>(text.size()) + 3) / 4;
}

// An error reply: {"type":"error","error":{"type":TYPE,"message":MESSAGE},"request_id":...}.
struct AnthropicError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
};

// ---- Request validation, as the API answers ----

namespace anthropic_detail {

using nlohmann::json;

inline AnthropicError invalid(std::string message) {
  return {400, "invalid_request_error", std::move(message)};
}

inline std::optional<AnthropicError> extra_field(const json& object,
                                                 const std::set<std::string>& allowed,
                                                 const std::string& path) {
  for (const auto& [key, value] : object.items())
    if (!allowed.count(key))
      return invalid((path.empty() ? "" : path + ".") + key + ": Extra inputs are not permitted");
  return std::nullopt;
}

inline bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

// A text block at `path` ("system.0", "messages.0.content.1"); `where` is "system" or "messages"
// (the prefix of the emptiness messages). Counts its cache_control in `breakpoints`.
inline std::optional<AnthropicError> check_text_block(const json& block, const std::string& path,
                                                      const std::string& where, int& breakpoints) {
  if (!block.is_object())
    return invalid(path + ": Input should be a valid dictionary");  // pydantic's wording
  if (!block.contains("type")) return invalid(path + ".type: Field required");
  // kforge sends text blocks only; the reference lists many other kinds, which the stand-in does
  // not model.
  if (block["type"] != "text") return invalid(path + ".type: the stand-in models text blocks only");
  // The block's fields as the API names them: a message's content is a union tagged by the
  // block's type ("messages.0.content.1.text.cache_control"); `system` holds text blocks only
  // ("system.0.cache_control").
  const std::string at = path + (where == "messages" ? ".text" : "");
  if (auto e = extra_field(block, anthropic_text_block_fields(), at)) return e;
  if (!block.contains("text") || !block["text"].is_string())
    return invalid(at + ".text: Field required");
  const std::string& text = block["text"].get_ref<const std::string&>();
  if (block.contains("cache_control") && !block["cache_control"].is_null()) {
    const json& cc = block["cache_control"];
    if (!cc.is_object() || cc.value("type", "") != "ephemeral")
      return invalid(at + ".cache_control.type: Input should be 'ephemeral'");
    if (auto e = extra_field(cc, anthropic_cache_control_fields(), at + ".cache_control.ephemeral"))
      return e;
    if (cc.contains("ttl") && cc["ttl"] != "5m" && cc["ttl"] != "1h")
      return invalid(at + ".cache_control.ephemeral.ttl: Input should be '5m' or '1h'");
    if (text.empty()) return invalid(at + ": cache_control cannot be set for empty text blocks");
    ++breakpoints;
  }
  if (text.empty()) return invalid(where + ": text content blocks must be non-empty");
  if (blank(text)) return invalid(where + ": text content blocks must contain non-whitespace text");
  return std::nullopt;
}

const char* const kThinkingDocs =
    "Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/"
    "extended-thinking#important-considerations-when-using-extended-thinking";

}  // namespace anthropic_detail

// What the API answers a request with these headers (names lower-case) and body: nullopt when it
// would serve it, else its error (the first found).
inline std::optional<AnthropicError> validate_anthropic_request(
    const std::map<std::string, std::string>& headers, const std::string& body_text,
    const std::string& api_key) {
  using namespace anthropic_detail;
  auto header = headers.find("x-api-key");
  if (header == headers.end())
    return AnthropicError{401, "authentication_error", "x-api-key header is required"};
  if (header->second != api_key)
    return AnthropicError{401, "authentication_error", "invalid x-api-key"};
  if (!headers.count("anthropic-version")) return invalid("anthropic-version: header is required");

  json body = json::parse(body_text, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return invalid("the request body is not a JSON object");  // (not the API's words)
  if (auto e = extra_field(body, anthropic_request_fields(), "")) return e;
  for (const char* required : {"max_tokens", "messages", "model"})
    if (!body.contains(required)) return invalid(std::string(required) + ": Field required");
  if (!body["model"].is_string()) return invalid("model: Input should be a valid string");
  if (!body["max_tokens"].is_number_integer())
    return invalid("max_tokens: Input should be a valid integer");
  const int64_t max_tokens = body["max_tokens"].get<int64_t>();
  if (max_tokens < 0) return invalid("max_tokens: Input should be greater than or equal to 0");
  if (body.contains("stream") && !body["stream"].is_boolean())
    return invalid("stream: Input should be a valid boolean");
  if (body.contains("temperature")) {
    const json& t = body["temperature"];
    if (!t.is_number()) return invalid("temperature: Input should be a valid number");
    if (t.get<double>() < 0)
      return invalid("temperature: Input should be greater than or equal to 0");
    if (t.get<double>() > 1) return invalid("temperature: Input should be less than or equal to 1");
  }

  int breakpoints = body.contains("cache_control") && !body["cache_control"].is_null() ? 1 : 0;
  if (body.contains("system")) {
    const json& system = body["system"];
    if (system.is_array()) {
      for (size_t i = 0; i < system.size(); ++i)
        if (auto e =
                check_text_block(system[i], "system." + std::to_string(i), "system", breakpoints))
          return e;
    } else if (!system.is_string()) {
      return invalid(
          "system: Input should be a valid string or a list of text blocks");  // (paraphrased)
    }
  }
  const json& messages = body["messages"];
  if (!messages.is_array()) return invalid("messages: Input should be a valid list");
  if (messages.empty()) return invalid("messages: at least one message is required");
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string path = "messages." + std::to_string(i);
    const json& m = messages[i];
    if (!m.is_object()) return invalid(path + ": Input should be a valid dictionary");
    if (auto e = extra_field(m, anthropic_message_fields(), path)) return e;
    if (!m.contains("role")) return invalid(path + ".role: Field required");
    if (m["role"] != "user" && m["role"] != "assistant")
      return invalid(path + ".role: Input should be 'user' or 'assistant'");
    if (!m.contains("content")) return invalid(path + ".content: Field required");
    const json& content = m["content"];
    if (content.is_string()) {
      if (content.get_ref<const std::string&>().empty())
        return invalid("messages: text content blocks must be non-empty");
    } else if (content.is_array()) {
      for (size_t j = 0; j < content.size(); ++j)
        if (auto e = check_text_block(content[j], path + ".content." + std::to_string(j),
                                      "messages", breakpoints))
          return e;
    } else {
      return invalid(
          path +
          ".content: Input should be a valid string or a list of content blocks");  // (paraphrased)
    }
  }
  if (messages[0]["role"] != "user")
    return invalid("messages: first message must use the \"user\" role");
  if (breakpoints > 4)
    return invalid("A maximum of 4 blocks with cache_control may be provided. Found " +
                   std::to_string(breakpoints) + ".");

  bool thinking = false;
  if (body.contains("thinking")) {
    const json& th = body["thinking"];
    if (!th.is_object() || !th.contains("type")) return invalid("thinking.type: Field required");
    if (th["type"] == "enabled") {
      if (auto e = extra_field(th, anthropic_thinking_enabled_fields(), "thinking.enabled"))
        return e;
      if (!th.contains("budget_tokens"))
        return invalid("thinking.enabled.budget_tokens: Field required");
      if (!th["budget_tokens"].is_number_integer())
        return invalid("thinking.enabled.budget_tokens: Input should be a valid integer");
      if (th["budget_tokens"].get<int64_t>() < 1024)
        return invalid(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024");
      if (max_tokens <= th["budget_tokens"].get<int64_t>())
        return invalid(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            "documentation at "
            "https://docs.claude.com/en/docs/build-with-claude/"
            "extended-thinking#max-tokens-and-context-window-size");
      thinking = true;
    } else if (th["type"] == "disabled") {
      if (auto e = extra_field(th, {"type"}, "thinking.disabled")) return e;
    } else if (th["type"] == "adaptive") {
      thinking = true;
    } else {
      return invalid(
          "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'");  // (paraphrased)
    }
  }
  if (thinking && body.contains("temperature") && body["temperature"].get<double>() != 1.0)
    return invalid(std::string("`temperature` may only be set to 1 when thinking is enabled. ") +
                   kThinkingDocs);
  if (thinking && body.contains("top_k"))
    return invalid(std::string("`top_k` must be unset when thinking is enabled. ") + kThinkingDocs);
  return std::nullopt;
}

// ---- Prompt caching ----

struct AnthropicUsage {
  int64_t input_tokens = 0;  // after the last cache breakpoint
  int64_t cache_creation_input_tokens = 0, cache_read_input_tokens = 0, output_tokens = 0;
  int64_t total_input() const {
    return input_tokens + cache_creation_input_tokens + cache_read_input_tokens;
  }
};

// The cache of one stand-in: prefixes (model, then tools, system, messages block by block) seen at
// a breakpoint of at least `min_tokens` tokens. Entries never expire (tests run well within the 5
// minutes of the default TTL). Not thread-safe: the stand-in locks.
class AnthropicPromptCache {
 public:
  explicit AnthropicPromptCache(int64_t min_tokens) : min_tokens_(min_tokens) {}

  // The input usage of a valid request, written to the cache as the API would.
  AnthropicUsage account(const nlohmann::json& body) {
    struct Block {
      size_t prefix_hash;
      int64_t prefix_tokens;
      bool breakpoint;
    };
    std::vector<Block> blocks;
    std::string prefix = body["model"].get<std::string>();
    int64_t tokens = 0;
    auto add = [&](const std::string& where, const std::string& text, bool breakpoint) {
      prefix += '\x1e' + where + '\x1f' + text;
      tokens += anthropic_tokens(text);
      blocks.push_back({std::hash<std::string>{}(prefix), tokens, breakpoint});
    };
    auto marked = [](const nlohmann::json& block) {
      return block.contains("cache_control") && !block["cache_control"].is_null();
    };
    if (body.contains("system")) {
      if (body["system"].is_string()) {
        add("system", body["system"].get<std::string>(), false);
      } else {
        for (const auto& b : body["system"]) add("system", b["text"].get<std::string>(), marked(b));
      }
    }
    for (const auto& m : body["messages"]) {
      std::string role = m["role"].get<std::string>();
      if (m["content"].is_string()) {
        add(role, m["content"].get<std::string>(), false);
      } else {
        for (const auto& b : m["content"]) add(role, b["text"].get<std::string>(), marked(b));
      }
    }
    // Top-level cache_control: a breakpoint on the last cacheable block.
    if (body.contains("cache_control") && !body["cache_control"].is_null() && !blocks.empty())
      blocks.back().breakpoint = true;

    AnthropicUsage usage;
    int64_t total = blocks.empty() ? 0 : blocks.back().prefix_tokens;
    // The longest prefix already cached, looked up at block boundaries up to 20 blocks before each
    // breakpoint.
    int64_t read = 0;
    for (size_t b = 0; b < blocks.size(); ++b) {
      if (!blocks[b].breakpoint) continue;
      for (size_t j = b + 1; j-- > 0 && b - j < 20;)
        if (entries_.count(blocks[j].prefix_hash)) read = std::max(read, blocks[j].prefix_tokens);
    }
    // Written: what the last breakpoint long enough to cache adds past what was read.
    int64_t written_to = 0;
    for (const Block& b : blocks)
      if (b.breakpoint && b.prefix_tokens >= min_tokens_) {
        written_to = std::max(written_to, b.prefix_tokens);
        entries_.insert(b.prefix_hash);
      }
    usage.cache_read_input_tokens = read;
    usage.cache_creation_input_tokens = std::max<int64_t>(0, written_to - read);
    usage.input_tokens = total - usage.cache_read_input_tokens - usage.cache_creation_input_tokens;
    return usage;
  }
  void clear() { entries_.clear(); }

 private:
  int64_t min_tokens_;
  std::set<size_t> entries_;
};

// ---- The server ----

// What the stand-in does with one request (the `fault` option picks one per call).
enum class AnthropicFault {
  None,
  RateLimited,               // 429 rate_limit_error, with retry-after
  Overloaded,                // 529 overloaded_error, with retry-after
  OverloadedEventMidStream,  // streamed: an `event: error` (overloaded_error) after a few events,
                             // no message_stop
  CutMidStream,  // the connection closed after a few events (no message_stop; unstreamed: half the
                 // body)
  EndsEarly,  // streamed: the body ends cleanly after a few events, without message_stop (a proxy's
              // cut)
  MaxTokensWhileThinking,  // the reply stops at max_tokens inside its thinking block: no text block
};

// What the stand-in's model answers.
struct AnthropicAnswer {
  std::string thinking = "The kernel is elementwise: one thread per element, a grid-stride loop.";
  std::string signature = "EqQBCkYIBRgCKkBstandinSignature0123456789abcdef==";
  std::string text = "```cuda\n__global__ void relu(const float* x, float* y, int n) {}\n```";
  int text_repeat = 1;  // the text is sent this many times (a huge answer without a huge string)
};

// One request as the stand-in received and answered it.
struct AnthropicRecord {
  int call = 0;  // 1-based
  std::string path;
  std::map<std::string, std::string> headers;  // names lower-case
  std::string body;
  nlohmann::json json;  // the parsed body; null when it was not JSON
  int status = 0;
  std::string error;  // the error message sent, "" when answered
  bool streamed = false;
  AnthropicUsage usage;    // what the reply reported
  int64_t bytes_sent = 0;  // of the reply body
  bool completed = false;  // the whole reply went out (a streamed one: through message_stop)
};

// How the stand-in behaves (AnthropicStandIn::Options).
struct AnthropicStandInOptions {
  std::string api_key = "sk-ant-standin-SECRET-0123456789";
  int64_t min_cacheable_tokens = 1024;  // Sonnet 4.5's, Opus 4.1's
  AnthropicAnswer answer;
  std::function<AnthropicFault(int call)> fault;  // default: none
  std::chrono::milliseconds event_delay{0};       // between streamed events
  size_t delta_chars = 16;                        // characters per thinking_delta / text_delta
  int ping_every =
      0;  // a ping after the first content_block_start, and every N deltas (0: only that one)
  int fault_after_events = 5;  // events sent before a mid-stream fault
  double retry_after_s = 1;    // the retry-after header of 429 and 529 replies; < 0: none
  // message_delta's usage repeats the input counts, cumulative (MessageDeltaUsage lists them as
  // optional; recent API streams send them, older ones only output_tokens).
  bool delta_repeats_input_usage = true;
};

class AnthropicStandIn {
 public:
  using Options = AnthropicStandInOptions;

  explicit AnthropicStandIn(Options options = {})
      : options_(std::move(options)),
        cache_(options_.min_cacheable_tokens),
        old_sigpipe_(std::signal(SIGPIPE, SIG_IGN)) {
    // SIGPIPE ignored while the server writes to clients that hung up (the Debian build of
    // cpp-httplib sends without MSG_NOSIGNAL); restored when the stand-in goes.
    server_.Post(".*",
                 [this](const httplib::Request& req, httplib::Response& res) { serve(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~AnthropicStandIn() {
    stopping_ = true;
    server_.stop();
    thread_.join();
    std::signal(SIGPIPE, old_sigpipe_);
  }
  AnthropicStandIn(const AnthropicStandIn&) = delete;
  AnthropicStandIn& operator=(const AnthropicStandIn&) = delete;

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const Options& options() const { return options_; }

  // kforge's endpoint for the stand-in: the Anthropic provider, its key, default wire options.
  evolve::Endpoint endpoint(const std::string& model = "claude-sonnet-4-5") const {
    evolve::Endpoint e;
    e.provider = evolve::Provider::Anthropic;
    e.base_url = base_url();
    e.model = model;
    e.api_key = options_.api_key;
    return e;
  }

  int calls() const { return calls_; }
  std::vector<AnthropicRecord> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<AnthropicRecord> out;
    for (const auto& r : records_) out.push_back(*r);
    return out;
  }
  AnthropicRecord request(size_t i) const { return requests().at(i); }
  AnthropicRecord last_request() const { return requests().back(); }
  void forget_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.clear();
  }

  static std::string sse(const std::string& event, const nlohmann::json& data) {
    return "event: " + event + "\ndata: " + data.dump() + "\n\n";
  }

 private:
  using json = nlohmann::json;

  // A reply ready to go out, as a Message and as its events.
  struct Reply {
    json message;  // content complete (the unstreamed body)
    std::vector<std::pair<std::string, json>> head,
        tail;  // message_start; message_delta and message_stop
    struct Block {
      json start;                                  // content_block_start's content_block
      std::string delta_type, delta_field, piece;  // "text_delta", "text", the text
      int repeat = 1;
      std::string signature;  // thinking: a signature_delta before the stop
    };
    std::vector<Block> blocks;
  };

  static json usage_json(const AnthropicUsage& u, int64_t output_tokens) {
    return {{"input_tokens", u.input_tokens},
            {"cache_creation_input_tokens", u.cache_creation_input_tokens},
            {"cache_read_input_tokens", u.cache_read_input_tokens},
            {"cache_creation",
             {{"ephemeral_5m_input_tokens", u.cache_creation_input_tokens},
              {"ephemeral_1h_input_tokens", 0}}},
            {"output_tokens", output_tokens},
            {"service_tier", "standard"}};
  }

  Reply plan(const json& body, int call, const AnthropicUsage& input, AnthropicFault fault,
             AnthropicUsage& usage) const {
    const AnthropicAnswer& a = options_.answer;
    bool thinking = body.contains("thinking") && body["thinking"].value("type", "") != "disabled";
    bool cut_in_thinking = fault == AnthropicFault::MaxTokensWhileThinking;
    usage = input;
    Reply r;
    json content = json::array();
    if (thinking || cut_in_thinking) {
      r.blocks.push_back({{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}},
                          "thinking_delta",
                          "thinking",
                          a.thinking,
                          1,
                          a.signature});
      content.push_back(
          {{"type", "thinking"}, {"thinking", a.thinking}, {"signature", a.signature}});
      usage.output_tokens += anthropic_tokens(a.thinking);
    }
    if (!cut_in_thinking) {
      r.blocks.push_back(
          {{{"type", "text"}, {"text", ""}}, "text_delta", "text", a.text, a.text_repeat, ""});
      std::string text;
      for (int i = 0; i < a.text_repeat; ++i) text += a.text;
      content.push_back({{"type", "text"}, {"text", text}});
      usage.output_tokens += anthropic_tokens(a.text) * a.text_repeat;
    }
    std::string stop_reason = "end_turn";
    if (cut_in_thinking) {
      stop_reason = "max_tokens";
      usage.output_tokens = body["max_tokens"].get<int64_t>();
    }
    r.message = {{"id", "msg_standin_" + std::to_string(call)},
                 {"type", "message"},
                 {"role", "assistant"},
                 {"model", body["model"]},
                 {"content", content},
                 {"stop_reason", stop_reason},
                 {"stop_sequence", nullptr},
                 {"usage", usage_json(usage, usage.output_tokens)}};
    json start = r.message;
    start["content"] = json::array();
    start["stop_reason"] = nullptr;
    start["usage"] = usage_json(
        usage,
        1);  // the API reports a small output count here; the final one comes in message_delta
    r.head.push_back({"message_start", {{"type", "message_start"}, {"message", start}}});
    json delta_usage = {{"output_tokens", usage.output_tokens}};
    if (options_.delta_repeats_input_usage) {
      delta_usage["input_tokens"] = usage.input_tokens;
      delta_usage["cache_creation_input_tokens"] = usage.cache_creation_input_tokens;
      delta_usage["cache_read_input_tokens"] = usage.cache_read_input_tokens;
    }
    r.tail.push_back({"message_delta",
                      {{"type", "message_delta"},
                       {"delta", {{"stop_reason", stop_reason}, {"stop_sequence", nullptr}}},
                       {"usage", delta_usage}}});
    r.tail.push_back({"message_stop", {{"type", "message_stop"}}});
    return r;
  }

  static std::string error_body(const AnthropicError& e, int call) {
    return json{{"type", "error"},
                {"error", {{"type", e.type}, {"message", e.message}}},
                {"request_id", "req_standin_" + std::to_string(call)}}
        .dump();
  }

  void serve(const httplib::Request& req, httplib::Response& res) {
    auto record = std::make_shared<AnthropicRecord>();
    record->call = ++calls_;
    record->path = req.path;
    for (const auto& [name, value] : req.headers) {
      std::string lower = name;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      record->headers[lower] = value;
    }
    record->body = req.body;
    record->json = json::parse(req.body, nullptr, false);
    if (record->json.is_discarded()) record->json = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      records_.push_back(record);
    }
    const int call = record->call;
    res.set_header("request-id", "req_standin_" + std::to_string(call));
    auto fail = [&](const AnthropicError& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      record->status = res.status = e.status;
      record->error = e.message;
      res.set_content(error_body(e, call), "application/json");
      record->bytes_sent = static_cast<int64_t>(res.body.size());
      record->completed = true;
    };
    if (req.path != "/v1/messages") return fail({404, "not_found_error", "Not Found"});
    if (auto e = validate_anthropic_request(record->headers, req.body, options_.api_key))
      return fail(*e);

    AnthropicFault fault = options_.fault ? options_.fault(call) : AnthropicFault::None;
    if (fault == AnthropicFault::RateLimited || fault == AnthropicFault::Overloaded) {
      if (options_.retry_after_s >= 0)
        res.set_header("retry-after", std::to_string(static_cast<int64_t>(options_.retry_after_s)));
      // (the 429 wording is the stand-in's; 529's "Overloaded" is the API's)
      return fail(fault == AnthropicFault::RateLimited
                      ? AnthropicError{429, "rate_limit_error",
                                       "This request would exceed the stand-in's rate limit."}
                      : AnthropicError{529, "overloaded_error", "Overloaded"});
    }
    const json& body = record->json;
    AnthropicUsage input, usage;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      input = cache_.account(body);
    }
    auto reply = std::make_shared<Reply>(plan(body, call, input, fault, usage));
    bool streamed = body.value("stream", false);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      record->status = 200;
      record->streamed = streamed;
      record->usage = usage;
    }
    if (!streamed) {
      if (fault == AnthropicFault::OverloadedEventMidStream)
        return fail({529, "overloaded_error", "Overloaded"});
      auto text = std::make_shared<std::string>(reply->message.dump());
      if (fault != AnthropicFault::CutMidStream) {
        res.set_content(*text, "application/json");
        std::lock_guard<std::mutex> lock(mutex_);
        record->bytes_sent = static_cast<int64_t>(text->size());
        record->completed = true;
        return;
      }
      // Half the body, then the connection closes (chunked: no terminating chunk).
      res.set_chunked_content_provider("application/json",
                                       [this, text, record](size_t, httplib::DataSink& sink) {
                                         size_t half = text->size() / 2;
                                         if (sink.write(text->data(), half))
                                           add_bytes(*record, static_cast<int64_t>(half));
                                         return false;
                                       });
      return;
    }
    res.set_chunked_content_provider("text/event-stream; charset=utf-8",
                                     [this, reply, record, fault](size_t, httplib::DataSink& sink) {
                                       return stream(*reply, *record, fault, sink);
                                     });
  }

  void add_bytes(AnthropicRecord& record, int64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    record.bytes_sent += n;
  }

  // Writes the reply's events; false closes the connection without the end of the chunked body.
  bool stream(const Reply& r, AnthropicRecord& record, AnthropicFault fault,
              httplib::DataSink& sink) {
    int sent = 0;
    bool mid_fault = fault == AnthropicFault::CutMidStream ||
                     fault == AnthropicFault::OverloadedEventMidStream ||
                     fault == AnthropicFault::EndsEarly;
    enum class Go { On, Stop, Cut };
    auto send = [&](const std::string& event, const json& data) -> Go {
      if (mid_fault && sent == options_.fault_after_events) {
        if (fault == AnthropicFault::CutMidStream) return Go::Cut;
        if (fault == AnthropicFault::EndsEarly) return Go::Stop;
        std::string error =
            sse("error", {{"type", "error"},
                          {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}});
        if (sink.write(error.data(), error.size()))
          add_bytes(record, static_cast<int64_t>(error.size()));
        return Go::Stop;
      }
      if (sent > 0 && options_.event_delay.count() > 0) {
        auto until = std::chrono::steady_clock::now() + options_.event_delay;
        while (std::chrono::steady_clock::now() < until) {
          if (stopping_) return Go::Cut;
          std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
              until - std::chrono::steady_clock::now(), std::chrono::milliseconds(10)));
        }
      }
      if (stopping_) return Go::Cut;
      std::string text = sse(event, data);
      if (!sink.write(text.data(), text.size())) return Go::Cut;  // the client hung up
      add_bytes(record, static_cast<int64_t>(text.size()));
      ++sent;
      return Go::On;
    };
    auto finish = [&](Go go) {
      if (go == Go::Cut) return false;
      sink.done();
      return true;
    };
    const json ping = {{"type", "ping"}};
    int deltas = 0;
    for (const auto& [event, data] : r.head)
      if (Go go = send(event, data); go != Go::On) return finish(go);
    for (size_t i = 0; i < r.blocks.size(); ++i) {
      const Reply::Block& b = r.blocks[i];
      int index = static_cast<int>(i);
      if (Go go =
              send("content_block_start",
                   {{"type", "content_block_start"}, {"index", index}, {"content_block", b.start}});
          go != Go::On)
        return finish(go);
      if (i == 0)
        if (Go go = send("ping", ping); go != Go::On) return finish(go);
      for (int rep = 0; rep < b.repeat; ++rep)
        for (size_t at = 0; at < b.piece.size(); at += options_.delta_chars) {
          json delta = {{"type", b.delta_type},
                        {b.delta_field, b.piece.substr(at, options_.delta_chars)}};
          if (Go go = send("content_block_delta",
                           {{"type", "content_block_delta"}, {"index", index}, {"delta", delta}});
              go != Go::On)
            return finish(go);
          if (options_.ping_every > 0 && ++deltas % options_.ping_every == 0)
            if (Go go = send("ping", ping); go != Go::On) return finish(go);
        }
      if (!b.signature.empty()) {
        json delta = {{"type", "signature_delta"}, {"signature", b.signature}};
        if (Go go = send("content_block_delta",
                         {{"type", "content_block_delta"}, {"index", index}, {"delta", delta}});
            go != Go::On)
          return finish(go);
      }
      if (Go go = send("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
          go != Go::On)
        return finish(go);
    }
    for (const auto& [event, data] : r.tail)
      if (Go go = send(event, data); go != Go::On) return finish(go);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      record.completed = true;
    }
    return finish(Go::Stop);
  }

  Options options_;
  AnthropicPromptCache cache_;
  void (*old_sigpipe_)(int);
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> calls_{0};
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<AnthropicRecord>> records_;
};

}  // namespace kforge::test
