// kforge's client against a loopback stand-in for Anthropic's Messages API in its real format
// (anthropic_stand_in.h): every field kforge sends is one the API reference lists, extended
// thinking (a budget, no temperature), prompt caching (system and context marked, writes then
// reads, priced), streaming (deltas joined, usage from message_start and message_delta, cut streams
// and error events retried, the reply cap and the timeout hold), a reply cut at max_tokens while
// thinking, and an LLM config file end to end (issue 35).
#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "anthropic_stand_in.h"
#include "kforge/evolve/config.h"
#include "kforge/evolve/llm.h"
#include "llm_test_util.h"
#include "test_util.h"

namespace {

using namespace kforge::evolve;
using namespace std::chrono_literals;
using kforge::test::anthropic_tokens;
using kforge::test::AnthropicFault;
using kforge::test::AnthropicRecord;
using kforge::test::AnthropicStandIn;
using nlohmann::json;

RetryPolicy quick(int attempts = 4) {
  return kforge::test::quick_policy(attempts);
}

using kforge::test::Sleeps;

// Plain text of exactly `chars` characters (no secret-like runs in it).
std::string prose(const std::string& topic, size_t chars) {
  std::string s;
  for (int i = 0; s.size() < chars; ++i)
    s += topic + " line " + std::to_string(i) + " of the prompt. ";
  s.resize(chars);
  return s;
}

ChatRequest request(std::string system, std::string context, std::string user,
                    std::optional<double> temperature = std::nullopt, int max_tokens = 8192) {
  ChatRequest r;
  r.system = std::move(system);
  r.context = std::move(context);
  r.user = std::move(user);
  r.temperature = temperature;
  r.max_tokens = max_tokens;
  return r;
}

// The prompt's parts kforge keeps apart: long enough to cache (1024 tokens or more).
const std::string kSystem = prose("You write fast CUDA kernels.", 5000);  // 1250 tokens
const std::string kContext =
    prose("Answer format, the GPU (H100, sm_90), the task relu.", 6000);  // 1500 tokens
const int64_t kSystemTokens = 1250, kContextTokens = 1500;

// The fields of `body` the Messages API reference does not list for a request (nested ones
// included), as paths: none when kforge sends only what the API takes.
std::vector<std::string> unlisted_fields(const json& body) {
  std::vector<std::string> out;
  auto check = [&](const json& object, const std::set<std::string>& listed,
                   const std::string& path) {
    if (!object.is_object()) {
      out.push_back(path + " (not an object)");
      return;
    }
    for (const auto& [key, value] : object.items())
      if (!listed.count(key)) out.push_back(path + key);
  };
  auto check_block = [&](const json& block, const std::string& path) {
    check(block, kforge::test::anthropic_text_block_fields(), path + ".");
    if (block.is_object() && block.contains("cache_control"))
      check(block["cache_control"], kforge::test::anthropic_cache_control_fields(),
            path + ".cache_control.");
  };
  check(body, kforge::test::anthropic_request_fields(), "");
  if (body.contains("system") && body["system"].is_array())
    for (size_t i = 0; i < body["system"].size(); ++i)
      check_block(body["system"][i], "system." + std::to_string(i));
  if (body.contains("messages") && body["messages"].is_array())
    for (size_t i = 0; i < body["messages"].size(); ++i) {
      const json& m = body["messages"][i];
      std::string path = "messages." + std::to_string(i);
      check(m, kforge::test::anthropic_message_fields(), path + ".");
      if (m.is_object() && m.contains("content") && m["content"].is_array())
        for (size_t j = 0; j < m["content"].size(); ++j)
          check_block(m["content"][j], path + ".content." + std::to_string(j));
    }
  if (body.contains("thinking"))
    check(body["thinking"], kforge::test::anthropic_thinking_enabled_fields(), "thinking.");
  return out;
}

const json kEphemeral = {{"type", "ephemeral"}};

// ---- The stand-in answers as the API does ----

std::map<std::string, std::string> api_headers(const std::string& key) {
  return {{"x-api-key", key},
          {"anthropic-version", "2023-06-01"},
          {"content-type", "application/json"}};
}

json minimal_body() {
  return {{"model", "claude-sonnet-4-5"},
          {"max_tokens", 4096},
          {"messages", {{{"role", "user"}, {"content", "Write relu."}}}}};
}

TEST(AnthropicStandIn, RefusesWhatTheApiRefusesInItsWords) {
  const std::string key = "sk-ant-standin-SECRET-0123456789";
  auto refusal = [&](const json& body,
                     std::map<std::string, std::string> headers = {}) -> std::string {
    if (headers.empty()) headers = api_headers(key);
    auto e = kforge::test::validate_anthropic_request(headers, body.dump(), key);
    return e ? std::to_string(e->status) + " " + e->type + ": " + e->message : "";
  };
  EXPECT_EQ(refusal(minimal_body()), "");
  EXPECT_EQ(refusal(minimal_body(), {{"anthropic-version", "2023-06-01"}}),
            "401 authentication_error: x-api-key header is required");
  EXPECT_EQ(
      refusal(minimal_body(), {{"x-api-key", "sk-wrong"}, {"anthropic-version", "2023-06-01"}}),
      "401 authentication_error: invalid x-api-key");
  EXPECT_EQ(refusal(minimal_body(), {{"x-api-key", key}}),
            "400 invalid_request_error: anthropic-version: header is required");

  json body = minimal_body();
  body["response_format"] = {{"type", "json_object"}};
  EXPECT_EQ(refusal(body),
            "400 invalid_request_error: response_format: Extra inputs are not permitted");
  body = minimal_body();
  body.erase("max_tokens");
  EXPECT_EQ(refusal(body), "400 invalid_request_error: max_tokens: Field required");

  // Extended thinking: a budget of at least 1024 and below max_tokens; no temperature but 1, no
  // top_k.
  body = minimal_body();
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 512}};
  EXPECT_EQ(refusal(body),
            "400 invalid_request_error: thinking.enabled.budget_tokens: Input should be greater "
            "than or equal to 1024");
  body["thinking"]["budget_tokens"] = 4096;
  EXPECT_NE(refusal(body).find("`max_tokens` must be greater than `thinking.budget_tokens`"),
            std::string::npos);
  body["thinking"]["budget_tokens"] = 2048;
  EXPECT_EQ(refusal(body), "");
  body["temperature"] = 1.0;
  EXPECT_EQ(refusal(body), "");
  body["temperature"] = 0.7;
  EXPECT_NE(refusal(body).find("`temperature` may only be set to 1 when thinking is enabled"),
            std::string::npos);
  body.erase("temperature");
  body["top_k"] = 40;
  EXPECT_NE(refusal(body).find("`top_k` must be unset when thinking is enabled"),
            std::string::npos);

  // cache_control: on content blocks, at most 4 of them.
  body = minimal_body();
  json blocks = json::array();
  for (int i = 0; i < 5; ++i)
    blocks.push_back(
        {{"type", "text"}, {"text", "part " + std::to_string(i)}, {"cache_control", kEphemeral}});
  body["system"] = blocks;
  EXPECT_EQ(refusal(body),
            "400 invalid_request_error: A maximum of 4 blocks with cache_control may be provided. "
            "Found 5.");
  body = minimal_body();
  body["messages"][0]["cache_control"] = kEphemeral;
  EXPECT_EQ(refusal(body),
            "400 invalid_request_error: messages.0.cache_control: Extra inputs are not permitted");
  body = minimal_body();
  body["system"] = {{{"type", "text"},
                     {"text", "sys"},
                     {"cache_control", {{"type", "ephemeral"}, {"scope", "global"}}}}};
  EXPECT_EQ(refusal(body),
            "400 invalid_request_error: system.0.cache_control.ephemeral.scope: Extra inputs are "
            "not permitted");
  body["system"] = {{{"type", "text"}, {"text", ""}}};
  EXPECT_EQ(refusal(body),
            "400 invalid_request_error: system: text content blocks must be non-empty");
}

TEST(AnthropicStandIn, AnswersInTheApisShapesOverHttp) {
  AnthropicStandIn api;
  httplib::Client http(api.base_url());
  httplib::Headers headers = {{"x-api-key", api.options().api_key},
                              {"anthropic-version", "2023-06-01"}};
  auto res = http.Post("/v1/messages", headers, minimal_body().dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  json message = json::parse(res->body);
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["stop_reason"], "end_turn");
  EXPECT_EQ(message["content"][0]["type"], "text");
  for (const char* field :
       {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"})
    EXPECT_TRUE(message["usage"][field].is_number_integer()) << field;

  json thinking = minimal_body();
  thinking["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
  thinking["stream"] = true;
  res = http.Post("/v1/messages", headers, thinking.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream; charset=utf-8");
  std::vector<std::string> events;
  for (size_t at = res->body.find("event: "); at != std::string::npos;
       at = res->body.find("event: ", at + 1))
    events.push_back(res->body.substr(at + 7, res->body.find('\n', at) - at - 7));
  ASSERT_GE(events.size(), 8u);
  EXPECT_EQ(events.front(), "message_start");
  EXPECT_EQ(events[1], "content_block_start");
  EXPECT_EQ(events[2], "ping");
  EXPECT_EQ(events[events.size() - 2], "message_delta");
  EXPECT_EQ(events.back(), "message_stop");
  EXPECT_NE(res->body.find(R"({"content_block":{"signature":"","thinking":"","type":"thinking"})"),
            std::string::npos)
      << res->body;
  EXPECT_NE(res->body.find(R"("type":"thinking_delta")"), std::string::npos);
  EXPECT_NE(res->body.find(R"("type":"signature_delta")"), std::string::npos);
  EXPECT_NE(res->body.find(R"("type":"text_delta")"), std::string::npos);

  res = http.Post("/v1/messages", httplib::Headers{{"anthropic-version", "2023-06-01"}},
                  minimal_body().dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  json error = json::parse(res->body);
  EXPECT_EQ(error["type"], "error");
  EXPECT_EQ(error["error"]["type"], "authentication_error");
  EXPECT_TRUE(error["request_id"].is_string());
}

TEST(AnthropicStandIn, CachesPrefixesAsDocumented) {
  auto body = [](const std::string& system, const std::string& context, const std::string& user) {
    json content =
        json::array({{{"type", "text"}, {"text", context}, {"cache_control", kEphemeral}},
                     {{"type", "text"}, {"text", user}}});
    return json{{"model", "claude-sonnet-4-5"},
                {"max_tokens", 1024},
                {"system", {{{"type", "text"}, {"text", system}, {"cache_control", kEphemeral}}}},
                {"messages", {{{"role", "user"}, {"content", content}}}}};
  };
  kforge::test::AnthropicPromptCache cache(1024);
  const std::string user = prose("Write relu.", 100);  // 25 tokens
  auto u = cache.account(body(kSystem, kContext, user));
  EXPECT_EQ(u.cache_creation_input_tokens, kSystemTokens + kContextTokens)
      << "written up to the last breakpoint";
  EXPECT_EQ(u.cache_read_input_tokens, 0);
  EXPECT_EQ(u.input_tokens, 25) << "input_tokens: what follows the last breakpoint";
  u = cache.account(body(kSystem, kContext, prose("Now make it faster.", 200)));
  EXPECT_EQ(u.cache_read_input_tokens, kSystemTokens + kContextTokens);
  EXPECT_EQ(u.cache_creation_input_tokens, 0);
  EXPECT_EQ(u.input_tokens, 50);
  u = cache.account(body(kSystem, prose("Another task.", 6000),
                         user));  // the system prefix hits, the new context is written
  EXPECT_EQ(u.cache_read_input_tokens, kSystemTokens);
  EXPECT_EQ(u.cache_creation_input_tokens, kContextTokens);
  // Prefixes under the minimum are not cached; a short system text is cached with the context after
  // it.
  u = cache.account(body(prose("short", 400), prose("short context", 2000), user));
  EXPECT_EQ(u.cache_creation_input_tokens + u.cache_read_input_tokens, 0);
  EXPECT_EQ(u.input_tokens, 100 + 500 + 25);
  u = cache.account(body(prose("short", 400), kContext, user));
  EXPECT_EQ(u.cache_creation_input_tokens, 100 + kContextTokens);
}

// ---- Every field kforge sends is one the reference lists ----

TEST(AnthropicWire, EveryFieldKforgeSendsIsInTheReference) {
  AnthropicStandIn api;
  for (bool stream : {false, true})
    for (int budget : {0, 2048})
      for (bool cache : {false, true})
        for (std::optional<double> temperature :
             {std::optional<double>(), std::optional<double>(0.4)})
          for (const std::string& context : {std::string(), kContext}) {
            Endpoint e = api.endpoint();
            e.wire.stream = stream;
            e.wire.thinking_budget = budget;
            e.wire.cache_prompt = cache;
            LlmClient client(e, quick(1), [](auto) {});
            std::string label = "stream " + std::to_string(stream) + ", thinking " +
                                std::to_string(budget) + ", cache " + std::to_string(cache) +
                                ", temperature " + (temperature ? "0.4" : "none") + ", context " +
                                (context.empty() ? "empty" : "set");
            EXPECT_NO_THROW(client.chat(request(kSystem, context, "Write relu.", temperature)))
                << label;
            AnthropicRecord sent = api.last_request();
            EXPECT_EQ(sent.status, 200) << label << ": the API would refuse it: " << sent.error;
            EXPECT_EQ(unlisted_fields(sent.json), std::vector<std::string>{})
                << label << ": " << sent.body.substr(0, 300);
            EXPECT_EQ(sent.path, "/v1/messages");
            EXPECT_EQ(sent.headers["x-api-key"], api.options().api_key);
            EXPECT_EQ(sent.headers["anthropic-version"], "2023-06-01");
            EXPECT_EQ(sent.headers["content-type"], "application/json");
            EXPECT_EQ(sent.json.value("stream", false), stream) << label;
          }
}

TEST(AnthropicWire, WithThinkingTheBudgetIsSentAndNoTemperature) {
  AnthropicStandIn api;
  Endpoint e = api.endpoint();
  e.wire.thinking_budget = 2048;
  LlmClient client(e, quick(1), [](auto) {});
  client.chat(request(kSystem, kContext, "Write relu.", 0.7, 8192));
  AnthropicRecord sent = api.last_request();
  EXPECT_EQ(sent.status, 200) << sent.error;
  EXPECT_EQ(sent.json["thinking"], json({{"type", "enabled"}, {"budget_tokens", 2048}}));
  EXPECT_EQ(sent.json["max_tokens"], 8192);
  EXPECT_FALSE(sent.json.contains("temperature"))
      << "the API refuses a temperature other than 1 with thinking on";
  EXPECT_FALSE(sent.json.contains("top_k"));
  EXPECT_FALSE(sent.json.contains("top_p"));
}

TEST(AnthropicWire, WithoutThinkingTheRequestsTemperatureIsSent) {
  AnthropicStandIn api;
  LlmClient client(api.endpoint(), quick(1), [](auto) {});
  client.chat(request(kSystem, kContext, "Write relu.", 0.3));
  EXPECT_EQ(api.last_request().json["temperature"], 0.3);
  EXPECT_FALSE(api.last_request().json.contains("thinking"));
  client.chat(request(kSystem, kContext, "Write relu."));
  EXPECT_FALSE(api.last_request().json.contains("temperature"))
      << "a request without a temperature sends none";
}

TEST(AnthropicWire, SystemAndContextAreMarkedCacheableAndTheUserPartIsNot) {
  AnthropicStandIn api;
  LlmClient client(api.endpoint(), quick(1), [](auto) {});
  client.chat(request(kSystem, kContext, "Write relu."));
  json body = api.last_request().json;
  EXPECT_EQ(body["system"],
            json::array({{{"type", "text"}, {"text", kSystem}, {"cache_control", kEphemeral}}}));
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_EQ(body["messages"][0]["content"],
            json::array({{{"type", "text"}, {"text", kContext}, {"cache_control", kEphemeral}},
                         {{"type", "text"}, {"text", "Write relu."}}}));

  client.chat(request(kSystem, "", "Write relu."));
  EXPECT_EQ(api.last_request().json["messages"][0]["content"],
            json::array({{{"type", "text"}, {"text", "Write relu."}}}))
      << "an empty context sends the user block alone";

  Endpoint e = api.endpoint();
  e.wire.cache_prompt = false;
  LlmClient plain(e, quick(1), [](auto) {});
  plain.chat(request(kSystem, kContext, "Write relu."));
  EXPECT_EQ(api.last_request().body.find("cache_control"), std::string::npos)
      << "prompt caching off: nothing marked";
}

// ---- Extended thinking ----

TEST(AnthropicThinking, TheAnswerIsTheTextBlockAndTheReasoningTheThinking) {
  for (bool stream : {false, true}) {
    AnthropicStandIn api;
    Endpoint e = api.endpoint();
    e.wire.thinking_budget = 2048;
    e.wire.stream = stream;
    LlmClient client(e, quick(), [](auto) {});
    ChatResponse r = client.chat(request(kSystem, kContext, "Write relu.", 0.7));
    EXPECT_EQ(r.text, api.options().answer.text) << "stream " << stream;
    EXPECT_EQ(r.reasoning, api.options().answer.thinking) << "stream " << stream;
    EXPECT_EQ(r.finish_reason, "end_turn");
    EXPECT_EQ(r.model, "claude-sonnet-4-5");
    EXPECT_EQ(r.attempts, 1);
    EXPECT_EQ(r.tokens_out, api.last_request().usage.output_tokens)
        << "thinking tokens are output tokens";
    EXPECT_EQ(api.last_request().streamed, stream);
  }
}

TEST(AnthropicThinking, AReplyCutAtMaxTokensWhileThinkingIsACutOffCarryingItsUsage) {
  for (bool stream : {false, true}) {
    AnthropicStandIn::Options o;
    o.fault = [](int) { return AnthropicFault::MaxTokensWhileThinking; };
    AnthropicStandIn api(o);
    Endpoint e = api.endpoint();
    e.wire.thinking_budget = 4096;
    e.wire.stream = stream;
    LlmClient client(e, quick(), [](auto) {});
    try {
      client.chat(request(kSystem, kContext, "Write relu.", std::nullopt, 8192));
      ADD_FAILURE() << "a reply without a text block was taken (stream " << stream << ")";
    } catch (const LlmError& err) {
      AnthropicRecord sent = api.last_request();
      EXPECT_EQ(err.kind(), LlmError::Kind::CutOff) << err.what();
      EXPECT_EQ(err.finish_reason, "max_tokens");
      EXPECT_EQ(err.tokens_in, sent.usage.total_input());
      EXPECT_EQ(err.tokens_out, 8192);
      EXPECT_EQ(err.tokens_cache_write, kSystemTokens + kContextTokens);
      EXPECT_TRUE(err.paid());
    }
    EXPECT_EQ(api.calls(), 1) << "a paid reply is not asked again by the client (stream " << stream
                              << ")";
  }
}

// ---- Prompt caching ----

TEST(AnthropicCaching, TheFirstRequestWritesTheCacheTheNextReadsItPricedAsTheProviderPrices) {
  ModelConfig m;  // claude-sonnet-4-5's prices, dollars per million tokens
  m.spec = "anthropic:claude-sonnet-4-5";
  m.price_input_per_mtok = 3.0, m.price_output_per_mtok = 15.0;
  m.price_cached_input_per_mtok = 0.3, m.price_cache_write_per_mtok = 3.75;
  for (bool stream : {false, true}) {
    AnthropicStandIn api;
    Endpoint e = api.endpoint();
    e.wire.stream = stream;
    LlmClient client(e, quick(), [](auto) {});

    ChatResponse first = client.chat(request(kSystem, kContext, "Write relu."));
    AnthropicRecord sent = api.last_request();
    EXPECT_EQ(first.tokens_cache_write, kSystemTokens + kContextTokens) << "stream " << stream;
    EXPECT_EQ(first.tokens_cache_read, 0);
    EXPECT_EQ(first.tokens_in, sent.usage.total_input()) << "tokens_in counts every input token";
    EXPECT_EQ(first.tokens_in, kSystemTokens + kContextTokens + anthropic_tokens("Write relu."));
    double uncached = static_cast<double>(first.tokens_in - first.tokens_cache_write);
    EXPECT_NEAR(m.cost_usd(first.tokens_in, first.tokens_out, first.tokens_cache_read,
                           first.tokens_cache_write),
                (uncached * 3.0 + first.tokens_cache_write * 3.75 + first.tokens_out * 15.0) / 1e6,
                1e-12);

    const std::string user = "Make the kernel faster: vectorize the loads.";
    ChatResponse second = client.chat(request(kSystem, kContext, user));
    EXPECT_EQ(second.tokens_cache_read, kSystemTokens + kContextTokens) << "stream " << stream;
    EXPECT_EQ(second.tokens_cache_write, 0);
    EXPECT_EQ(second.tokens_in, kSystemTokens + kContextTokens + anthropic_tokens(user));
    uncached = static_cast<double>(second.tokens_in - second.tokens_cache_read);
    EXPECT_NEAR(m.cost_usd(second.tokens_in, second.tokens_out, second.tokens_cache_read,
                           second.tokens_cache_write),
                (uncached * 3.0 + second.tokens_cache_read * 0.3 + second.tokens_out * 15.0) / 1e6,
                1e-12);
    EXPECT_GT(static_cast<double>(second.tokens_cache_read) / second.tokens_in, 0.98)
        << "the share read from the cache";

    // Another task: the system text is read, its context written.
    const std::string other = prose("Answer format, the GPU (H100, sm_90), the task gelu.", 6000);
    ChatResponse third = client.chat(request(kSystem, other, "Write gelu."));
    EXPECT_EQ(third.tokens_cache_read, kSystemTokens);
    EXPECT_EQ(third.tokens_cache_write, kContextTokens);
  }
}

TEST(AnthropicCaching, WithCachingOffNothingIsWrittenOrRead) {
  AnthropicStandIn api;
  Endpoint e = api.endpoint();
  e.wire.cache_prompt = false;
  LlmClient client(e, quick(), [](auto) {});
  for (int i = 0; i < 2; ++i) {
    ChatResponse r = client.chat(request(kSystem, kContext, "Write relu."));
    EXPECT_EQ(r.tokens_cache_read + r.tokens_cache_write, 0) << i;
    EXPECT_EQ(r.tokens_in, kSystemTokens + kContextTokens + anthropic_tokens("Write relu.")) << i;
  }
}

// ---- Streaming ----

TEST(AnthropicStreaming, UsageComesFromMessageStartAndMessageDelta) {
  for (bool repeats : {true, false}) {
    AnthropicStandIn::Options o;
    o.delta_repeats_input_usage =
        repeats;  // recent streams repeat the input counts in message_delta; older ones did not
    o.ping_every = 2;
    o.delta_chars = 5;
    AnthropicStandIn api(o);
    Endpoint e = api.endpoint();
    e.wire.thinking_budget = 2048;
    LlmClient client(e, quick(), [](auto) {});
    ChatResponse r = client.chat(request(kSystem, kContext, "Write relu."));
    AnthropicRecord sent = api.last_request();
    ASSERT_TRUE(sent.streamed);
    EXPECT_EQ(r.text, o.answer.text) << "joined from its text_delta events";
    EXPECT_EQ(r.reasoning, o.answer.thinking) << "joined from its thinking_delta events";
    EXPECT_EQ(r.tokens_in, sent.usage.total_input())
        << "input counts from message_start, not doubled by message_delta";
    EXPECT_EQ(r.tokens_cache_write, kSystemTokens + kContextTokens);
    EXPECT_EQ(r.tokens_out, sent.usage.output_tokens)
        << "message_delta's cumulative output_tokens, not added to message_start's";
  }
}

TEST(AnthropicStreaming, AStreamCutMidAnswerIsRetriedAndTheAnswerIsWhole) {
  AnthropicStandIn::Options o;
  o.fault = [](int call) {
    return call == 1 ? AnthropicFault::CutMidStream : AnthropicFault::None;
  };
  o.fault_after_events = 6;  // message_start, content_block_start, ping, three thinking deltas
  AnthropicStandIn api(o);
  Endpoint e = api.endpoint();
  e.wire.thinking_budget = 2048;
  Sleeps sleeps;
  LlmClient client(e, quick(), sleeps.fn());
  ChatResponse r = client.chat(request(kSystem, kContext, "Write relu."));
  EXPECT_FALSE(api.request(0).completed);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(api.calls(), 2);
  EXPECT_EQ(sleeps.waits.size(), 1u);
  EXPECT_EQ(r.text, o.answer.text);
  EXPECT_EQ(r.reasoning, o.answer.thinking) << "nothing of the cut attempt's deltas is kept";
  EXPECT_GE(r.tokens_in, api.request(1).usage.total_input());
}

// llm.h: a call's counts are "what the endpoint reported for every reply of this call (a retried
// bad reply's too)". A cut stream reported its input usage in message_start before the cut.
TEST(AnthropicStreaming, ACutStreamsReportedUsageCountsLikeAnyRetriedReply) {
  for (AnthropicFault cut : {AnthropicFault::CutMidStream, AnthropicFault::EndsEarly,
                             AnthropicFault::OverloadedEventMidStream}) {
    AnthropicStandIn::Options o;
    o.fault = [cut](int call) { return call == 1 ? cut : AnthropicFault::None; };
    AnthropicStandIn api(o);
    LlmClient client(api.endpoint(), quick(), [](auto) {});
    ChatResponse r = client.chat(request(kSystem, kContext, "Write relu."));
    std::string what = cut == AnthropicFault::CutMidStream ? "connection closed mid-stream"
                       : cut == AnthropicFault::EndsEarly  ? "stream ended before message_stop"
                                                           : "overloaded_error event";
    ASSERT_EQ(r.attempts, 2) << what;
    EXPECT_EQ(r.tokens_in, api.request(0).usage.total_input() + api.request(1).usage.total_input())
        << what;
    EXPECT_EQ(r.tokens_cache_write, kSystemTokens + kContextTokens)
        << what << ": written by the first attempt";
    EXPECT_EQ(r.tokens_cache_read, kSystemTokens + kContextTokens)
        << what << ": read by the second";
  }
}

TEST(AnthropicStreaming, AnOverloadedErrorEventMidStreamIsRetried) {
  AnthropicStandIn::Options o;
  o.fault = [](int call) {
    return call == 1 ? AnthropicFault::OverloadedEventMidStream : AnthropicFault::None;
  };
  AnthropicStandIn api(o);
  Sleeps sleeps;
  LlmClient client(api.endpoint(), quick(), sleeps.fn());
  ChatResponse r = client.chat(request(kSystem, kContext, "Write relu."));
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(api.calls(), 2);
  EXPECT_EQ(sleeps.waits.size(), 1u);
  EXPECT_EQ(r.text, o.answer.text);
}

TEST(AnthropicStreaming, RateLimitsAndOverloadsAreRetriedAfterTheirRetryAfter) {
  for (bool stream : {false, true}) {
    AnthropicStandIn::Options o;
    o.retry_after_s = 2;
    o.fault = [](int call) {
      return call == 1   ? AnthropicFault::RateLimited
             : call == 2 ? AnthropicFault::Overloaded
                         : AnthropicFault::None;
    };
    AnthropicStandIn api(o);
    Endpoint e = api.endpoint();
    e.wire.stream = stream;
    Sleeps sleeps;
    LlmClient client(e, quick(), sleeps.fn());
    ChatResponse r = client.chat(request(kSystem, kContext, "Write relu."));
    EXPECT_EQ(r.attempts, 3);
    EXPECT_EQ(sleeps.waits, (std::vector<std::chrono::milliseconds>{2000ms, 2000ms}))
        << "stream " << stream;
    EXPECT_EQ(api.request(0).status, 429);
    EXPECT_EQ(api.request(1).status, 529);
  }
}

TEST(AnthropicStreaming, TheReplyCapHoldsWhileStreaming) {
  AnthropicStandIn::Options o;
  o.answer.text = prose("__global__ void k() {}", 64);
  o.answer.text_repeat = 1 << 20;  // 64 MiB of answer text, about twice that in events
  o.delta_chars = 64;
  AnthropicStandIn api(o);
  RetryPolicy p = quick(2);
  p.max_reply_bytes = 1 << 20;
  LlmClient client(api.endpoint(), p, [](auto) {});
  try {
    client.chat(request(kSystem, kContext, "Write relu."));
    ADD_FAILURE() << "a stream past max_reply_bytes was taken";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::BadResponse) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_reply_bytes"), std::string::npos) << e.what();
  }
  for (const AnthropicRecord& sent : api.requests()) {
    EXPECT_FALSE(sent.completed);
    EXPECT_LT(sent.bytes_sent, int64_t{32} << 20) << "the client read on past its cap";
  }
}

TEST(AnthropicStreaming, TheTotalTimeoutHoldsWhileStreaming) {
  AnthropicStandIn::Options o;
  o.event_delay = 100ms;  // a slow stream: events keep coming, each well within any idle timeout
  o.answer.text_repeat = 20;
  AnthropicStandIn api(o);
  RetryPolicy p = quick(2);
  p.total_timeout = 700ms;
  LlmClient client(api.endpoint(), p, [](auto) {});
  auto t0 = std::chrono::steady_clock::now();
  try {
    client.chat(request(kSystem, kContext, "Write relu."));
    ADD_FAILURE() << "a stream longer than total_timeout was waited for";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::Timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2 * 700ms + 1500ms);
  for (const AnthropicRecord& sent : api.requests()) EXPECT_FALSE(sent.completed);
}

// ---- An LLM config file, end to end ----

std::string config_file(const kforge::test::TempDir& dir, const AnthropicStandIn& api,
                        const std::string& provider_keys, const std::string& model_keys) {
  return dir
      .write("llm.toml",
             "[providers.anthropic]\nbase_url = \"" + api.base_url() + "\"\napi_key = \"" +
                 api.options().api_key + "\"\n" + provider_keys +
                 "\n[[models]]\nmodel = \"anthropic:claude-sonnet-4-5\"\nmax_tokens = 8192\n" +
                 model_keys)
      .string();
}

TEST(AnthropicConfig, ThinkingAndCachingAsTheConfigFileSays) {
  AnthropicStandIn api;
  kforge::test::TempDir dir;
  // (no temperature: the loader refuses one beside thinking_budget, as the API would)
  LlmConfig cfg = load_llm_config(
      config_file(dir, api, "prompt_cache = true\nstream = true\n",
                  "thinking_budget = 2048\nprice = { input = 3.0, output = 15.0 }\n"));
  ASSERT_EQ(cfg.models.size(), 1u);
  const ModelConfig& m = cfg.models[0];
  EXPECT_DOUBLE_EQ(m.price_cached_input_per_mtok, 0.3)
      << "Anthropic prices cache reads at 0.1x the input";
  EXPECT_DOUBLE_EQ(m.price_cache_write_per_mtok, 3.75) << "and 5-minute cache writes at 1.25x";
  Endpoint e = cfg.endpoint(m);
  EXPECT_EQ(e.provider, Provider::Anthropic);
  EXPECT_EQ(e.wire.thinking_budget, 2048);
  EXPECT_TRUE(e.wire.cache_prompt);
  LlmClient client(e, cfg.policy(m, quick()), [](auto) {});

  ChatResponse first = client.chat(
      request(kSystem, kContext, "Write relu.", m.temperature_for("optimize"), m.max_tokens));
  AnthropicRecord sent = api.last_request();
  EXPECT_EQ(sent.status, 200) << sent.error;
  EXPECT_TRUE(sent.streamed);
  EXPECT_EQ(sent.json["thinking"]["budget_tokens"], 2048);
  EXPECT_FALSE(sent.json.contains("temperature"));
  EXPECT_EQ(sent.json["system"][0]["cache_control"], kEphemeral);
  EXPECT_EQ(sent.json["messages"][0]["content"][0]["cache_control"], kEphemeral);
  EXPECT_EQ(first.reasoning, api.options().answer.thinking);
  EXPECT_EQ(first.tokens_cache_write, kSystemTokens + kContextTokens);

  ChatResponse second = client.chat(
      request(kSystem, kContext, "Make it faster.", m.temperature_for("optimize"), m.max_tokens));
  EXPECT_EQ(second.tokens_cache_read, kSystemTokens + kContextTokens);
  double uncached = static_cast<double>(second.tokens_in - second.tokens_cache_read);
  EXPECT_NEAR(m.cost_usd(second.tokens_in, second.tokens_out, second.tokens_cache_read,
                         second.tokens_cache_write),
              (uncached * 3.0 + second.tokens_cache_read * 0.3 + second.tokens_out * 15.0) / 1e6,
              1e-12);
}

TEST(AnthropicConfig, NoThinkingNoCachingNoStreamingAsTheConfigFileSays) {
  AnthropicStandIn api;
  kforge::test::TempDir dir;
  LlmConfig cfg = load_llm_config(
      config_file(dir, api, "prompt_cache = false\nstream = false\n",
                  "price = { input = 3.0, output = 15.0, cached_input = 0.5, cache_write = 4.0 }\n"
                  "temperature = { optimize = 0.7 }\n"));
  const ModelConfig& m = cfg.models[0];
  EXPECT_DOUBLE_EQ(m.price_cached_input_per_mtok, 0.5) << "prices the file gives win";
  EXPECT_DOUBLE_EQ(m.price_cache_write_per_mtok, 4.0);
  LlmClient client(cfg.endpoint(m), cfg.policy(m, quick()), [](auto) {});
  ChatResponse r = client.chat(
      request(kSystem, kContext, "Write relu.", m.temperature_for("optimize"), m.max_tokens));
  AnthropicRecord sent = api.last_request();
  EXPECT_EQ(sent.status, 200) << sent.error;
  EXPECT_FALSE(sent.streamed);
  EXPECT_FALSE(sent.json.contains("thinking"));
  EXPECT_EQ(sent.json["temperature"], 0.7);
  EXPECT_EQ(sent.body.find("cache_control"), std::string::npos);
  EXPECT_EQ(r.tokens_cache_read + r.tokens_cache_write, 0);
  EXPECT_EQ(r.reasoning, "");
}

}  // namespace
