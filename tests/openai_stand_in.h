// A loopback stand-in for OpenAI's chat completions (POST /v1/chat/completions) as it answers in
// 2026, for the tests of kforge against reasoning models (o-series, gpt-5 family), non-reasoning
// models and OpenAI-compatible servers: a real HTTP server (cpp-httplib) on 127.0.0.1 at a random
// port that checks every request the way the provider does, answers in the provider's formats
// (a chat.completion object, or server-sent chat.completion.chunk events), reports usage with
// cached and reasoning tokens, plays faults on chosen calls, and records every request.
//
// Where the formats come from (read 2026-08 with the search tool):
// - The request fields, the reply, chunk, usage and error objects: OpenAI's OpenAPI description,
//   github.com/openai/openai-openapi openapi.json (2026-08-21): CreateChatCompletionRequest,
//   CreateChatCompletionResponse, CreateChatCompletionStreamResponse, CompletionUsage, Error.
// - The exact bytes of a reasoning model's replies, streamed and not (field order, "usage": null
//   in every chunk with include_usage, the usage chunk with "choices": [], "obfuscation",
//   "text/event-stream; charset=utf-8", 64 and 128 reasoning tokens for a one-line answer): the
//   o4-mini recordings of github.com/charmbracelet/fantasy,
//   providertests/testdata/TestOpenAICommon/openai-o4-mini/simple{,_streaming}.yaml.
// - The 400s, as users quoted them in GitHub issues: max_tokens on a reasoning model
//   (griptape-ai/ComfyUI-Griptape#312, ITSpecialist111/ai_automation_suggester#38), temperature
//   other than 1 (gabrii/Cursor-Azure-GPT-5#33, OpenHands#4131), any temperature on o3-mini
//   (simonw/llm#731), top_p (aandrew-me/tgpt#333, lobehub#7747), presence_penalty
//   (nextai-translator#1781), an unknown field (cursor#2786: "Unknown parameter: ...",
//   code unknown_parameter), stream_options without stream (BerriAI/litellm#5803), and vLLM before
//   0.6.4, which knows no max_completion_tokens (vllm#10078, voideditor/void#128: pydantic's
//   extra_forbidden).
// - Prompt caching (OpenAI's prompt-caching guide as quoted by docs.apiyi.com and portkey.ai):
//   automatic for prompts of 1024 tokens or more; a hit covers the longest prefix seen before,
//   in 128-token steps (1024, 1152, 1280, ...); cached_tokens is 0 below 1024.
// Tokens are estimated as characters / 4 (OpenAI's rule of thumb; the stand-in has no tokenizer).
#pragma once

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kforge/evolve/llm.h"

namespace kforge::test {

inline constexpr const char* kOpenAiStandInKey = "sk-proj-standin-0123456789abcdefABCDEF";

// The body fields OpenAI's API reference lists for POST /v1/chat/completions
// (CreateChatCompletionRequest and the CreateModelResponseProperties it includes, openapi.json of
// 2026-08-21).
inline const std::set<std::string>& openai_chat_fields() {
  static const std::set<std::string> fields = {"audio",
                                               "frequency_penalty",
                                               "function_call",
                                               "functions",
                                               "logit_bias",
                                               "logprobs",
                                               "max_completion_tokens",
                                               "max_tokens",
                                               "messages",
                                               "metadata",
                                               "modalities",
                                               "model",
                                               "moderation",
                                               "n",
                                               "parallel_tool_calls",
                                               "prediction",
                                               "presence_penalty",
                                               "prompt_cache_key",
                                               "prompt_cache_options",
                                               "prompt_cache_retention",
                                               "reasoning_effort",
                                               "response_format",
                                               "safety_identifier",
                                               "seed",
                                               "service_tier",
                                               "stop",
                                               "store",
                                               "stream",
                                               "stream_options",
                                               "temperature",
                                               "tool_choice",
                                               "tools",
                                               "top_logprobs",
                                               "top_p",
                                               "user",
                                               "verbosity",
                                               "web_search_options"};
  return fields;
}

// Listed fields a reasoning model refuses whatever their value ("Unsupported parameter"): the
// reference says max_tokens "is not compatible with o-series models"; the sampling and logprob
// fields are refused as the issues above quote. temperature is refused unless it is 1 (the
// default).
inline const std::set<std::string>& openai_reasoning_refused_fields() {
  static const std::set<std::string> fields = {"max_tokens",        "top_p",    "presence_penalty",
                                               "frequency_penalty", "logprobs", "top_logprobs",
                                               "logit_bias"};
  return fields;
}

// The fields of `body` the reference does not list for chat completions.
inline std::vector<std::string> fields_outside_openai_reference(const nlohmann::json& body) {
  std::vector<std::string> out;
  if (!body.is_object()) return out;
  for (const auto& [key, value] : body.items())
    if (!openai_chat_fields().count(key)) out.push_back(key);
  return out;
}

class OpenAiStandIn {
 public:
  enum class Server {
    Reasoning,  // OpenAI serving a reasoning model (o4-mini, o3, gpt-5): the restrictions above
    Chat,       // OpenAI serving a non-reasoning model (gpt-4.1): no reasoning_effort, no reasoning
                // tokens
    MaxTokensOnly  // an OpenAI-compatible server from before max_completion_tokens (vLLM < 0.6.4):
                   // any field it does not know is pydantic's 400 "extra_forbidden"
  };
  // What a call gets instead of its answer.
  enum class Fault {
    None,
    RateLimited,    // 429 with Retry-After (rate_limit_retry_after)
    Unavailable,    // 503 with Retry-After (unavailable_retry_after)
    CutStream,      // a streamed answer whose connection closes after cut_after_events events: no
                    // [DONE]
    EndlessStream,  // content deltas as fast as the client reads, never a finish (capped at 256
                    // MiB)
    TrickleStream   // a content delta every trickle_interval, forever
  };

  struct Options {
    Server server = Server::Reasoning;
    std::string reported_model = "o4-mini-2025-04-16";  // the "model" of every reply
    std::string api_key = kOpenAiStandInKey;            // required as "Authorization: Bearer KEY"
    // The answer to a request (its parsed body); without one, "pong".
    std::function<std::string(const nlohmann::json& body)> answer;
    // Reasoning tokens a reasoning model spends before it answers (counted in completion_tokens
    // and in the token limit; o4-mini spent 64 on "Say hi in Portuguese").
    int64_t reasoning_tokens = 64;
    // The reasoning_effort values the model takes (o-series: low, medium, high; gpt-5 adds
    // minimal).
    std::vector<std::string> reasoning_efforts = {"low", "medium", "high"};
    // o3-mini's behaviour: any temperature is an unsupported parameter (else only 1 is accepted).
    bool temperature_refused = false;
    size_t delta_chars = 8;  // answer characters per content event (about two tokens)
    std::chrono::milliseconds event_delay{0};   // between two events of a stream
    std::function<Fault(int call)> fault;       // per call (1-based); none by default
    std::string rate_limit_retry_after = "1";   // the Retry-After header of a 429
    std::string unavailable_retry_after = "1";  // and of a 503
    int cut_after_events = 3;  // CutStream: events sent before the connection closes
    std::chrono::milliseconds trickle_interval{50};
  };

  // One request and what the stand-in answered.
  struct Exchange {
    int call = 0;
    std::string path;
    httplib::Headers headers;
    std::string body;
    nlohmann::json json;  // the body parsed; null when it is not JSON
    int status = 200;
    nlohmann::json error;  // the error object of a refused call, else null
    nlohmann::json usage;  // the usage the reply reported (a stream's last chunk), else null
    bool stream = false;
    Fault fault = Fault::None;
    std::string text;   // the answer text sent (before any fault cut it)
    int events = 0;     // server-sent events written, [DONE] included
    int64_t bytes = 0;  // body bytes written
    std::string header(const std::string& name) const {
      auto it = headers.find(name);
      return it == headers.end() ? "" : it->second;
    }
  };

  OpenAiStandIn() : OpenAiStandIn(Options()) {}
  explicit OpenAiStandIn(Options options) : options_(std::move(options)) {
    // A client that hangs up mid-stream must not kill the test binary (the Debian build of
    // cpp-httplib writes without MSG_NOSIGNAL). Restored when the stand-in goes.
    old_sigpipe_ = std::signal(SIGPIPE, SIG_IGN);
    server_.Post(".*",
                 [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~OpenAiStandIn() {
    stopping_ = true;  // endless and trickling streams end
    server_.stop();
    thread_.join();
    std::signal(SIGPIPE, old_sigpipe_);
  }
  OpenAiStandIn(const OpenAiStandIn&) = delete;
  OpenAiStandIn& operator=(const OpenAiStandIn&) = delete;

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  // The endpoint kforge would make of "openai:MODEL" with OPENAI_BASE_URL and OPENAI_API_KEY set
  // to this stand-in: default WireOptions.
  evolve::Endpoint endpoint(const std::string& model = "o4-mini") const {
    evolve::Endpoint e;
    e.provider = evolve::Provider::OpenAI;
    e.base_url = base_url();
    e.model = model;
    e.api_key = options_.api_key;
    return e;
  }
  // Shell assignments pointing `kforge` at the stand-in.
  std::string env() const {
    return "OPENAI_BASE_URL=" + base_url() + " OPENAI_API_KEY=" + options_.api_key;
  }

  std::vector<Exchange> exchanges() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {exchanges_.begin(), exchanges_.end()};
  }
  int calls() const { return static_cast<int>(exchanges().size()); }
  // How many calls were answered with `status`.
  int count(int status) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(std::count_if(exchanges_.begin(), exchanges_.end(),
                                          [&](const Exchange& x) { return x.status == status; }));
  }
  // The usage summed over every reply that reported one.
  struct Totals {
    int64_t prompt = 0, completion = 0, cached = 0, reasoning = 0, replies = 0;
  };
  Totals totals() const {
    Totals t;
    for (const Exchange& x : exchanges()) {
      if (!x.usage.is_object()) continue;
      ++t.replies;
      t.prompt += x.usage.value("prompt_tokens", int64_t{0});
      t.completion += x.usage.value("completion_tokens", int64_t{0});
      if (x.usage.contains("prompt_tokens_details") && x.usage["prompt_tokens_details"].is_object())
        t.cached += x.usage["prompt_tokens_details"].value("cached_tokens", int64_t{0});
      if (x.usage.contains("completion_tokens_details") &&
          x.usage["completion_tokens_details"].is_object())
        t.reasoning += x.usage["completion_tokens_details"].value("reasoning_tokens", int64_t{0});
    }
    return t;
  }

  // The stand-in's token estimate of a text: characters / 4.
  static int64_t tokens_of(const std::string& text) {
    return static_cast<int64_t>(text.size() / 4);
  }
  // The prompt text a request's usage is counted from: each message's role and text.
  static std::string prompt_text(const nlohmann::json& body) {
    std::string out;
    for (const nlohmann::json& m : body["messages"]) {
      out += m.value("role", "") + "\n";
      const nlohmann::json& c = m["content"];
      if (c.is_string()) out += c.get<std::string>();
      if (c.is_array())
        for (const nlohmann::json& part : c)
          if (part.is_object() && part.contains("text") && part["text"].is_string())
            out += part["text"].get<std::string>();
      out += "\n";
    }
    return out;
  }
  // What OpenAI's automatic prompt cache serves of a prompt of `prompt_tokens` whose longest
  // prefix seen before is `prefix_tokens` long: nothing below 1024, else 128-token steps.
  static int64_t cache_hit(int64_t prompt_tokens, int64_t prefix_tokens) {
    if (prompt_tokens < 1024 || prefix_tokens < 1024) return 0;
    return prefix_tokens / 128 * 128;
  }

 private:
  using ojson = nlohmann::ordered_json;

  static ojson error_object(const std::string& message, const std::string& type, const ojson& param,
                            const ojson& code) {
    return ojson{
        {"error", {{"message", message}, {"type", type}, {"param", param}, {"code", code}}}};
  }
  static std::string quoted(const std::string& s) { return "'" + s + "'"; }

  // The 400 OpenAI (or the compatible server) gives `body`, or null when it takes it.
  ojson refusal(const nlohmann::json& body) const {
    const Server server = options_.server;
    if (server == Server::MaxTokensOnly) {
      // vLLM's pydantic model: extra="forbid" on the fields it predates.
      static const std::set<std::string> unknown = {"max_completion_tokens",
                                                    "reasoning_effort",
                                                    "verbosity",
                                                    "prompt_cache_key",
                                                    "prompt_cache_options",
                                                    "prompt_cache_retention",
                                                    "safety_identifier",
                                                    "moderation",
                                                    "web_search_options",
                                                    "prediction",
                                                    "modalities",
                                                    "audio",
                                                    "store",
                                                    "metadata",
                                                    "service_tier"};
      for (const auto& [key, value] : body.items())
        if (unknown.count(key) || !openai_chat_fields().count(key))
          return ojson{{"object", "error"},
                       {"message", "[{'type': 'extra_forbidden', 'loc': ('body', '" + key +
                                       "'), 'msg': 'Extra inputs are not permitted', 'input': " +
                                       value.dump() + "}]"},
                       {"type", "BadRequestError"},
                       {"param", nullptr},
                       {"code", 400}};
    }
    for (const char* required : {"model", "messages"})
      if (!body.contains(required))
        return error_object("Missing required parameter: " + quoted(required) + ".",
                            "invalid_request_error", required, "missing_required_parameter");
    for (const auto& [key, value] : body.items())
      if (!openai_chat_fields().count(key))
        return error_object("Unknown parameter: " + quoted(key) + ".", "invalid_request_error", key,
                            "unknown_parameter");
    if (server == Server::Reasoning) {
      if (body.contains("max_tokens"))
        return error_object(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' "
            "instead.",
            "invalid_request_error", "max_tokens", "unsupported_parameter");
      if (body.contains("temperature")) {
        if (options_.temperature_refused)
          return error_object(
              "Unsupported parameter: 'temperature' is not supported with this model.",
              "invalid_request_error", "temperature", "unsupported_parameter");
        if (!body["temperature"].is_number() || body["temperature"].get<double>() != 1.0)
          return error_object("Unsupported value: 'temperature' does not support " +
                                  body["temperature"].dump() +
                                  " with this model. Only the default (1) value is supported.",
                              "invalid_request_error", "temperature", "unsupported_value");
      }
      for (const auto& [key, value] : body.items())
        if (openai_reasoning_refused_fields().count(key))
          return error_object(
              "Unsupported parameter: " + quoted(key) + " is not supported with this model.",
              "invalid_request_error", key, "unsupported_parameter");
      if (body.contains("reasoning_effort")) {
        const nlohmann::json& effort = body["reasoning_effort"];
        const std::vector<std::string>& efforts = options_.reasoning_efforts;
        if (!effort.is_string() ||
            std::find(efforts.begin(), efforts.end(), effort.get<std::string>()) == efforts.end()) {
          std::string supported;
          size_t i = 0;
          for (const std::string& e : efforts)
            supported += (i++ ? (i == efforts.size() ? ", and " : ", ") : "") + quoted(e);
          return error_object(
              "Unsupported value: 'reasoning_effort' does not support " +
                  (effort.is_string() ? quoted(effort.get<std::string>()) : effort.dump()) +
                  " with this model. Supported values are: " + supported + ".",
              "invalid_request_error", "reasoning_effort", "unsupported_value");
        }
      }
    }
    if (server == Server::Chat && body.contains("reasoning_effort"))
      return error_object(
          "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
          "invalid_request_error", "reasoning_effort", "unsupported_parameter");
    if (body.contains("stream_options") && !(body.contains("stream") && body["stream"] == true))
      return error_object(
          "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
          "invalid_request_error", "stream_options", nullptr);
    for (const char* limit : {"max_completion_tokens", "max_tokens"})
      if (body.contains(limit) &&
          (!body[limit].is_number_integer() || body[limit].get<int64_t>() < 1))
        return error_object(std::string("Invalid '") + limit +
                                "': integer below minimum value. Expected a value >= 1, but got " +
                                body[limit].dump() + " instead.",
                            "invalid_request_error", limit, "integer_below_min_value");
    if (!body["messages"].is_array() || body["messages"].empty())
      return error_object(
          "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an "
          "empty array instead.",
          "invalid_request_error", "messages", "empty_array");
    static const std::set<std::string> roles = {"system",    "developer", "user",
                                                "assistant", "tool",      "function"};
    for (size_t i = 0; i < body["messages"].size(); ++i) {
      const nlohmann::json& m = body["messages"][i];
      std::string at = "messages[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          !roles.count(m["role"].get<std::string>()))
        return error_object(
            "Invalid value: " + (m.is_object() && m.contains("role") ? m["role"].dump() : "null") +
                ". Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and "
                "'developer'.",
            "invalid_request_error", at + ".role", "invalid_value");
      if (!m.contains("content"))
        return error_object("Missing required parameter: '" + at + ".content'.",
                            "invalid_request_error", at + ".content", "missing_required_parameter");
    }
    return nullptr;
  }

  // A text cut to at most `bytes` bytes, never inside a UTF-8 sequence.
  static std::string utf8_prefix(const std::string& text, size_t bytes) {
    if (bytes >= text.size()) return text;
    while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
    return text.substr(0, bytes);
  }

  static std::string obfuscation(int n) {
    static const char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string s;
    for (int i = 0; i < 4 + n % 9; ++i) s += kChars[(n * 7 + i * 13) % 62];
    return s;
  }

  void reply_error(httplib::Response& res, Exchange& x, int status, const ojson& error) {
    x.status = status;
    x.error = nlohmann::json::parse(error.dump());
    res.status = status;
    res.set_content(error.dump(2) + "\n", "application/json");
  }

  void handle(const httplib::Request& req, httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mutex_);
    size_t index = exchanges_.size();
    exchanges_.emplace_back();
    Exchange& x = exchanges_.back();  // stays valid: a deque
    x.call = static_cast<int>(index) + 1;
    x.path = req.path;
    x.headers = req.headers;
    x.body = req.body;
    x.json = nlohmann::json::parse(req.body, nullptr, false);
    if (x.json.is_discarded()) x.json = nullptr;
    res.set_header("x-request-id", "req_standin" + std::to_string(x.call));
    res.set_header("openai-processing-ms", "42");
    bool vllm = options_.server == Server::MaxTokensOnly;
    if (req.path != "/v1/chat/completions")
      return reply_error(res, x, 404,
                         error_object("Invalid URL (POST " + req.path + ")",
                                      "invalid_request_error", nullptr, nullptr));
    // vLLM started without --api-key checks no key.
    if (!vllm && req.get_header_value("Authorization") != "Bearer " + options_.api_key)
      return reply_error(
          res, x, 401,
          error_object(
              req.get_header_value("Authorization").empty()
                  ? "You didn't provide an API key. You need to provide your API key in an "
                    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
                  : "Incorrect API key provided. You can find your API key at "
                    "https://platform.openai.com/account/api-keys.",
              "invalid_request_error", nullptr,
              req.get_header_value("Authorization").empty() ? ojson(nullptr)
                                                            : ojson("invalid_api_key")));
    x.fault = options_.fault ? options_.fault(x.call) : Fault::None;
    if (x.fault == Fault::RateLimited) {
      res.set_header("Retry-After", options_.rate_limit_retry_after);
      return reply_error(
          res, x, 429,
          error_object(
              "Rate limit reached for " + options_.reported_model +
                  " in organization org-standin on tokens per min (TPM): Limit 30000, Used "
                  "28039, Requested 3906. Please try again in " +
                  options_.rate_limit_retry_after +
                  "s. Visit https://platform.openai.com/account/rate-limits to learn more.",
              "tokens", nullptr, "rate_limit_exceeded"));
    }
    if (x.fault == Fault::Unavailable) {
      res.set_header("Retry-After", options_.unavailable_retry_after);
      return reply_error(res, x, 503,
                         error_object("The server is overloaded or not ready yet.", "server_error",
                                      nullptr, nullptr));
    }
    if (!x.json.is_object())
      return reply_error(
          res, x, 400,
          error_object(
              "We could not parse the JSON body of your request. (HINT: This likely means "
              "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
              "payload, but what was sent was not valid JSON.)",
              "invalid_request_error", nullptr, nullptr));
    if (ojson refused = refusal(x.json); !refused.is_null())
      return reply_error(res, x, 400, refused);

    // The answer, cut where the token limit ends it (a reasoning model thinks first).
    const nlohmann::json& body = x.json;
    std::string prompt = prompt_text(body);
    int64_t prompt_tokens = tokens_of(prompt), prefix = 0;
    for (const std::string& seen : prompts_) {
      auto diff = std::mismatch(prompt.begin(), prompt.end(), seen.begin(), seen.end());
      prefix = std::max<int64_t>(prefix, diff.first - prompt.begin());
    }
    prompts_.push_back(prompt);
    int64_t cached = cache_hit(prompt_tokens, prefix / 4);
    std::string text;
    lock.unlock();  // the answer function may take its time
    text = options_.answer ? options_.answer(body) : "pong";
    lock.lock();
    int64_t reasoning = options_.server == Server::Reasoning ? options_.reasoning_tokens : 0;
    int64_t limit = body.contains("max_completion_tokens")
                        ? body["max_completion_tokens"].get<int64_t>()
                    : body.contains("max_tokens") ? body["max_tokens"].get<int64_t>()
                                                  : INT64_MAX;
    std::string finish = "stop";
    if (reasoning >= limit) {
      reasoning = limit, text.clear(), finish = "length";
    } else if (std::max<int64_t>(1, tokens_of(text)) > limit - reasoning) {
      text = utf8_prefix(text, static_cast<size_t>((limit - reasoning) * 4)), finish = "length";
    }
    int64_t completion = reasoning + (text.empty() ? 0 : std::max<int64_t>(1, tokens_of(text)));
    ojson usage;
    if (vllm) {
      usage = {{"prompt_tokens", prompt_tokens},
               {"total_tokens", prompt_tokens + completion},
               {"completion_tokens", completion}};
    } else {
      usage = {{"prompt_tokens", prompt_tokens},
               {"completion_tokens", completion},
               {"total_tokens", prompt_tokens + completion},
               {"prompt_tokens_details", {{"cached_tokens", cached}, {"audio_tokens", 0}}},
               {"completion_tokens_details",
                {{"reasoning_tokens", reasoning},
                 {"audio_tokens", 0},
                 {"accepted_prediction_tokens", 0},
                 {"rejected_prediction_tokens", 0}}}};
    }
    x.text = text;
    std::string id = (vllm ? "chat-standin" : "chatcmpl-StandIn") + std::to_string(x.call);
    const int64_t created = 1773345313 + x.call;
    x.stream = body.contains("stream") && body["stream"] == true;
    if (!x.stream) {
      if (x.fault != Fault::None) {
        // A fault of a stream on a call that is not streamed: the connection closes mid-body.
        x.status = 200;
        res.set_chunked_content_provider("application/json", [this, index](
                                                                 size_t, httplib::DataSink& sink) {
          std::string half = "{\n  \"id\": \"chatcmpl-cut\",\n  \"object\": \"chat.completion\",\n";
          sink.write(half.data(), half.size());
          record(index, 0, static_cast<int64_t>(half.size()));
          return false;
        });
        return;
      }
      ojson message =
          vllm ? ojson{{"role", "assistant"}, {"content", text}, {"tool_calls", ojson::array()}}
               : ojson{{"role", "assistant"},
                       {"content", text},
                       {"refusal", nullptr},
                       {"annotations", ojson::array()}};
      ojson choice = {{"index", 0}, {"message", message}};
      if (vllm) choice["logprobs"] = nullptr;
      choice["finish_reason"] = finish;
      if (vllm) choice["stop_reason"] = nullptr;
      ojson reply = {{"id", id},
                     {"object", "chat.completion"},
                     {"created", created},
                     {"model", options_.reported_model},
                     {"choices", ojson::array({choice})},
                     {"usage", usage}};
      if (vllm) {
        reply["prompt_logprobs"] = nullptr;
      } else {
        reply["service_tier"] = "default";
        reply["system_fingerprint"] = nullptr;
      }
      x.usage = nlohmann::json::parse(usage.dump());
      std::string out = reply.dump(2) + "\n";
      x.bytes = static_cast<int64_t>(out.size());
      res.set_content(out, "application/json");
      return;
    }

    // Streamed: the chunks OpenAI sends, one event each.
    bool include_usage = body.contains("stream_options") && body["stream_options"].is_object() &&
                         body["stream_options"].value("include_usage", false);
    int n = 0;
    auto chunk = [&](ojson delta, const ojson& finish_reason) {
      ojson c = {{"id", id},
                 {"object", "chat.completion.chunk"},
                 {"created", created},
                 {"model", options_.reported_model}};
      if (!vllm) c["service_tier"] = "default", c["system_fingerprint"] = nullptr;
      ojson ch = {{"index", 0}, {"delta", std::move(delta)}};
      if (vllm) ch["logprobs"] = nullptr;
      ch["finish_reason"] = finish_reason;
      c["choices"] = ojson::array({ch});
      if (include_usage && !vllm) c["usage"] = nullptr;
      if (!vllm) c["obfuscation"] = obfuscation(++n);
      return "data: " + c.dump() + "\n\n";
    };
    auto first = chunk(vllm ? ojson{{"role", "assistant"}, {"content", ""}}
                            : ojson{{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}},
                       nullptr);
    auto events = std::make_shared<std::vector<std::string>>();
    events->push_back(first);
    const size_t step = std::max<size_t>(1, options_.delta_chars);
    for (size_t at = 0; at < text.size();) {
      std::string piece = utf8_prefix(text.substr(at), step);
      if (piece.empty()) piece = text.substr(at, step);  // one sequence longer than a step
      at += piece.size();
      events->push_back(chunk(ojson{{"content", piece}}, nullptr));
    }
    events->push_back(chunk(ojson::object(), finish));
    if (include_usage) {
      ojson last = {{"id", id},
                    {"object", "chat.completion.chunk"},
                    {"created", created},
                    {"model", options_.reported_model}};
      if (!vllm) last["service_tier"] = "default", last["system_fingerprint"] = nullptr;
      last["choices"] = ojson::array();
      last["usage"] = usage;
      if (!vllm) last["obfuscation"] = obfuscation(++n);
      events->push_back("data: " + last.dump() + "\n\n");
      x.usage = nlohmann::json::parse(usage.dump());
    }
    events->push_back("data: [DONE]\n\n");
    if (x.fault != Fault::None) x.usage = nullptr;  // the usage chunk never comes

    const Fault fault = x.fault;
    const std::string filler = chunk(ojson{{"content", std::string(1000, 'x')}}, nullptr);
    const std::string drip = chunk(ojson{{"content", "."}}, nullptr);
    auto sent = std::make_shared<size_t>(0);
    res.set_chunked_content_provider(
        "text/event-stream; charset=utf-8",
        [this, index, events, sent, fault, filler, drip](size_t, httplib::DataSink& sink) {
          if (stopping_) return false;
          if (*sent > 0 && options_.event_delay.count() > 0)
            std::this_thread::sleep_for(options_.event_delay);
          const std::string* event = nullptr;
          if (fault == Fault::CutStream && *sent >= static_cast<size_t>(options_.cut_after_events))
            return false;
          if (fault == Fault::EndlessStream && *sent >= 1) {
            if (bytes_of(index) >= (int64_t{256} << 20)) return false;  // the stand-in's own bound
            event = &filler;
          } else if (fault == Fault::TrickleStream && *sent >= 1) {
            for (auto waited = std::chrono::milliseconds(0);
                 waited < options_.trickle_interval && !stopping_;
                 waited += std::chrono::milliseconds(5))
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
            if (stopping_) return false;
            event = &drip;
          } else if (*sent < events->size()) {
            event = &(*events)[*sent];
          }
          if (!event) {
            sink.done();
            return true;
          }
          if (!sink.write(event->data(), event->size())) return false;
          ++*sent;
          record(index, 1, static_cast<int64_t>(event->size()));
          return true;
        });
  }

  void record(size_t index, int events, int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    exchanges_[index].events += events;
    exchanges_[index].bytes += bytes;
  }
  int64_t bytes_of(size_t index) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return exchanges_[index].bytes;
  }

  Options options_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  void (*old_sigpipe_)(int) = SIG_DFL;
  mutable std::mutex mutex_;
  std::deque<Exchange> exchanges_;    // a deque: an Exchange& stays valid while others are added
  std::vector<std::string> prompts_;  // of the answered requests: the prompt cache
};

}  // namespace kforge::test
