// What the LLM client sends and how it reads streams, without a server: request bodies per
// provider and WireOptions, the refused field of real 400 bodies, server-sent events assembled
// (whole, cut, with error events, CRLF lines), and the tokens-per-minute limit on a test clock.
// The client against loopback servers in each provider's format: test_llm_providers.cpp (OpenAI
// and compatible servers) and test_llm_anthropic.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kforge/common/secrets.h"
#include "kforge/evolve/llm.h"

namespace {

using namespace kforge::evolve;
using nlohmann::json;

Endpoint endpoint(Provider p) {
  Endpoint e;
  e.provider = p;
  e.model = p == Provider::OpenAI ? "o4-mini" : "claude-sonnet-4-5";
  return e;
}

ChatRequest request(std::optional<double> temperature = std::nullopt) {
  ChatRequest r;
  r.system = "You are an expert CUDA engineer.";
  r.context = "## The operation: relu";
  r.user = "Write the kernel.";
  r.temperature = temperature;
  r.max_tokens = 4000;
  return r;
}

std::set<std::string> keys(const json& j) {
  std::set<std::string> out;
  for (const auto& [k, v] : j.items()) out.insert(k);
  return out;
}

TEST(LlmWire, OpenAiBodyByDefaultSuitsReasoningModels) {
  json body = chat_body(endpoint(Provider::OpenAI), request(), false);
  EXPECT_EQ(keys(body), (std::set<std::string>{"model", "messages", "max_completion_tokens"}));
  EXPECT_EQ(body["max_completion_tokens"], 4000);
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][0]["role"], "system");
  // The context first, then the request's own part: the prefix a provider caches.
  EXPECT_EQ(body["messages"][1]["content"], "## The operation: relu\n\nWrite the kernel.");
}

TEST(LlmWire, OpenAiBodyCarriesWhatIsConfigured) {
  Endpoint e = endpoint(Provider::OpenAI);
  e.wire.token_limit_field = "max_tokens";
  e.wire.reasoning_effort = "high";
  json body = chat_body(e, request(0.7), true);
  EXPECT_EQ(keys(body), (std::set<std::string>{"model", "messages", "max_tokens", "temperature",
                                               "reasoning_effort", "stream", "stream_options"}));
  EXPECT_EQ(body["temperature"], 0.7);
  EXPECT_EQ(body["stream_options"], json({{"include_usage", true}}));
  e.wire.temperature = false, e.wire.stream_usage = false;
  body = chat_body(e, request(0.7), true);
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_FALSE(body.contains("stream_options"));
  EXPECT_EQ(body["stream"], true);
}

TEST(LlmWire, AnthropicBodyMarksTheStablePartsCacheable) {
  json body = chat_body(endpoint(Provider::Anthropic), request(0.5), true);
  EXPECT_EQ(keys(body), (std::set<std::string>{"model", "max_tokens", "messages", "system",
                                               "temperature", "stream"}));
  json ephemeral = {{"type", "ephemeral"}};
  ASSERT_EQ(body["system"].size(), 1u);
  EXPECT_EQ(body["system"][0]["cache_control"], ephemeral);
  json content = body["messages"][0]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["text"], "## The operation: relu");
  EXPECT_EQ(content[0]["cache_control"], ephemeral);
  EXPECT_EQ(content[1], json({{"type", "text"}, {"text", "Write the kernel."}}));
  // No context: the request's part alone, unmarked.
  ChatRequest bare = request();
  bare.context.clear();
  EXPECT_EQ(chat_body(endpoint(Provider::Anthropic), bare, false)["messages"][0]["content"].size(),
            1u);
  Endpoint off = endpoint(Provider::Anthropic);
  off.wire.cache_prompt = false;
  EXPECT_EQ(chat_body(off, request(), false).dump().find("cache_control"), std::string::npos);
}

TEST(LlmWire, AnthropicThinkingSendsNoTemperatureAndRoomForTheAnswer) {
  Endpoint e = endpoint(Provider::Anthropic);
  e.wire.thinking_budget = 2048;
  json body = chat_body(e, request(0.7), false);
  EXPECT_EQ(body["thinking"], json({{"type", "enabled"}, {"budget_tokens", 2048}}));
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_EQ(body["max_tokens"], 4000);
  ChatRequest small = request();
  small.max_tokens = 1024;  // the ping's: less than the budget
  EXPECT_EQ(chat_body(e, small, false)["max_tokens"], 2048 + 1024);
}

TEST(LlmWire, AnthropicAdaptiveThinkingForTheModelsThatTakeOnlyIt) {
  Endpoint e = endpoint(Provider::Anthropic);
  e.wire.thinking_adaptive = true;
  json body = chat_body(e, request(0.7), false);
  EXPECT_EQ(body["thinking"], json({{"type", "adaptive"}}));
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_TRUE(adapt_to_refusal(Provider::Anthropic, e.wire, "thinking"));
  EXPECT_FALSE(chat_body(e, request(), false).contains("thinking"));
}

TEST(LlmWire, SecretsNeverReachABody) {
  kforge::remember_secret("sk-proj-abcdefghijklmnopqrstuvwxyz0123456789");  // a key the config read
  ChatRequest r = request();
  r.context = "key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789 leaked";
  EXPECT_EQ(chat_body(endpoint(Provider::OpenAI), r, false).dump().find("sk-proj-abcdefghij"),
            std::string::npos);
  EXPECT_EQ(chat_body(endpoint(Provider::Anthropic), r, false).dump().find("sk-proj-abcdefghij"),
            std::string::npos);
}

// ---- 400s as the providers word them ----

TEST(LlmWire, RefusedFieldOfOpenAiReasoningModels) {
  Endpoint e = endpoint(Provider::OpenAI);
  e.wire.token_limit_field = "max_tokens";
  json sent = chat_body(e, request(0.7), false);
  EXPECT_EQ(
      refused_field(
          sent,
          R"({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. )"
          R"(Use 'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens", )"
          R"("code": "unsupported_parameter"}})"),
      "max_tokens");
  EXPECT_EQ(
      refused_field(
          sent,
          R"({"error": {"message": "Unsupported value: 'temperature' does not support 0.7 with this )"
          R"(model. Only the default (1) value is supported.", "type": "invalid_request_error", )"
          R"("param": "temperature", "code": "unsupported_value"}})"),
      "temperature");
}

TEST(LlmWire, RefusedFieldOfOtherServers) {
  json sent = chat_body(endpoint(Provider::OpenAI), request(), true);
  // No "param": the field is found in the message (vLLM's flat error, llama.cpp's nested one).
  EXPECT_EQ(
      refused_field(
          sent,
          R"({"object": "error", "message": "[{'type': 'extra_forbidden', 'loc': ('body', )"
          R"('stream_options'), 'msg': 'Extra inputs are not permitted'}]", "type": "BadRequestError", )"
          R"("param": null, "code": 400})"),
      "stream_options");
  EXPECT_EQ(
      refused_field(
          sent, R"({"error": {"code": 400, "message": "Unrecognized request argument supplied: )"
                R"(max_completion_tokens", "type": "invalid_request_error"}})"),
      "max_completion_tokens");
  Endpoint thinking = endpoint(Provider::Anthropic);
  thinking.wire.thinking_budget = 2048;
  json anthropic = chat_body(thinking, request(), false);
  anthropic["temperature"] = 0.5;  // as if sent: the message names temperature first
  EXPECT_EQ(
      refused_field(anthropic,
                    R"({"type": "error", "error": {"type": "invalid_request_error", "message": )"
                    R"("`temperature` may only be set to 1 when thinking is enabled."}})"),
      "temperature");
}

TEST(LlmWire, ABadRequestThatRefusesNothingIsFinal) {
  json sent = chat_body(endpoint(Provider::OpenAI), request(0.7), false);
  // Too long a prompt, an unknown model, not JSON: nothing to leave out.
  EXPECT_EQ(
      refused_field(
          sent,
          R"({"error": {"message": "This model's maximum context length is 128000 tokens. However, )"
          R"(you requested 140000 tokens.", "type": "invalid_request_error", "param": "messages", )"
          R"("code": "context_length_exceeded"}})"),
      "");
  EXPECT_EQ(
      refused_field(
          sent,
          R"({"error": {"message": "The model 'o9' does not exist or is unknown", "param": "model"}})"),
      "");
  EXPECT_EQ(refused_field(sent, "<html>Bad Request</html>"), "");
  json anthropic = chat_body(endpoint(Provider::Anthropic), request(), false);
  EXPECT_EQ(
      refused_field(anthropic,
                    R"({"type": "error", "error": {"type": "invalid_request_error", "message": )"
                    R"("max_tokens: 200000 > 64000, which is the maximum allowed"}})"),
      "");
}

TEST(LlmWire, AdaptationsAreOneWay) {
  WireOptions w;
  EXPECT_TRUE(adapt_to_refusal(Provider::OpenAI, w, "max_completion_tokens"));
  EXPECT_EQ(w.token_limit_field, "max_tokens");
  EXPECT_FALSE(adapt_to_refusal(Provider::OpenAI, w, "max_completion_tokens"));  // sent no more
  EXPECT_TRUE(adapt_to_refusal(Provider::OpenAI, w, "temperature"));
  EXPECT_FALSE(w.temperature);
  EXPECT_FALSE(adapt_to_refusal(Provider::OpenAI, w, "temperature"));
  EXPECT_FALSE(adapt_to_refusal(Provider::Anthropic, w, "max_tokens"));  // required there
  EXPECT_FALSE(adapt_to_refusal(Provider::OpenAI, w, "messages"));
  w.thinking_budget = 4096;
  EXPECT_TRUE(adapt_to_refusal(Provider::Anthropic, w, "thinking"));
  EXPECT_EQ(w.thinking_budget, 0);
}

// ---- Streams ----

TEST(LlmWire, OpenAiStreamAssembled) {
  std::string events =
      "data: "
      "{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"o4-mini\",\"choices\":[{"
      "\"index\":0,\"delta\":"
      "{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
      ": a comment line\n\n"
      "data: "
      "{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"o4-mini\",\"choices\":[{"
      "\"index\":0,\"delta\":"
      "{\"content\":\"Hello, \"},\"finish_reason\":null}]}\r\n\r\n"
      "data: "
      "{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"o4-mini\",\"choices\":[{"
      "\"index\":0,\"delta\":"
      "{\"content\":\"world\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: "
      "{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"o4-mini\",\"choices\":[],"
      "\"usage\":{\"prompt_tokens\":"
      "2000,\"completion_tokens\":300,\"prompt_tokens_details\":{\"cached_tokens\":1792},"
      "\"completion_tokens_details\":"
      "{\"reasoning_tokens\":250}}}\n\n"
      "data: [DONE]\n\n";
  EXPECT_TRUE(is_event_stream("text/event-stream; charset=utf-8", events));
  ChatResponse r = parse_reply(Provider::OpenAI, assemble_stream(Provider::OpenAI, events));
  EXPECT_EQ(r.text, "Hello, world");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.model, "o4-mini");
  EXPECT_EQ(r.tokens_in, 2000);
  EXPECT_EQ(r.tokens_cache_read, 1792);
  EXPECT_EQ(r.tokens_out, 300);
}

TEST(LlmWire, OpenAiStreamCutIsANetworkFailure) {
  std::string events =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"__global__ void "
      "k(\"},\"finish_reason\":null}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"float* x\"";  // cut inside an
                                                                               // event
  try {
    assemble_stream(Provider::OpenAI, events);
    FAIL() << "a cut stream was taken";
  } catch (const LlmError& e) {
    // The cut event is not JSON: either way the call is retried (Network or an unpaid bad reply).
    EXPECT_TRUE(e.kind() == LlmError::Kind::Network || e.kind() == LlmError::Kind::BadResponse)
        << e.what();
    EXPECT_FALSE(e.paid());
  }
  std::string whole_events_only =
      "data: "
      "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"},\"finish_reason\":null}]}\n\n";
  try {
    assemble_stream(Provider::OpenAI, whole_events_only);
    FAIL() << "a stream without its end was taken";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::Network);
    EXPECT_NE(std::string(e.what()).find("ended before its end"), std::string::npos) << e.what();
  }
}

TEST(LlmWire, AnthropicStreamAssembledWithThinkingAndCacheUsage) {
  std::string events =
      "event: message_start\ndata: "
      "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":"
      "\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"usage\":"
      "{\"input_tokens\":50,"
      "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":3000,\"output_tokens\":1}}}"
      "\n\n"
      "event: content_block_start\ndata: "
      "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\","
      "\"thinking\":\"\"}}\n\n"
      "event: ping\ndata: {\"type\": \"ping\"}\n\n"
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\","
      "\"thinking\":\"Tile it.\"}}\n\n"
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\","
      "\"signature\":\"EqQB\"}}\n\n"
      "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
      "event: content_block_start\ndata: "
      "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\","
      "\"text\":\"\"}}\n\n"
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\","
      "\"text\":\"The kernel\"}}\n\n"
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\","
      "\"text\":\" below.\"}}\n\n"
      "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
      "event: message_delta\ndata: "
      "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},"
      "\"usage\":{\"output_tokens\":420}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  ChatResponse r = parse_reply(Provider::Anthropic, assemble_stream(Provider::Anthropic, events));
  EXPECT_EQ(r.text, "The kernel below.");
  EXPECT_EQ(r.reasoning, "Tile it.");
  EXPECT_EQ(r.finish_reason, "end_turn");
  EXPECT_EQ(r.tokens_in, 3050);  // input_tokens counts only what follows the cached prefix
  EXPECT_EQ(r.tokens_cache_read, 3000);
  EXPECT_EQ(r.tokens_out, 420);
}

TEST(LlmWire, AnthropicErrorEventIsRetriedAsOverloaded) {
  std::string events =
      "event: message_start\ndata: "
      "{\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":900,"
      "\"output_tokens\":1}}}\n\n"
      "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", "
      "\"message\": \"Overloaded\"}}\n\n";
  try {
    assemble_stream(Provider::Anthropic, events);
    FAIL() << "an error event was taken";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::Http);
    EXPECT_EQ(e.http_status(), 529);
    EXPECT_EQ(e.tokens_in, 900);  // what was reported counts
  }
}

TEST(LlmWire, APlainJsonReplyToAStreamedRequestIsReadAsIs) {
  EXPECT_FALSE(is_event_stream("application/json", R"({"choices": []})"));
  EXPECT_TRUE(is_event_stream("", "\n\ndata: {}\n\n"));
  EXPECT_TRUE(is_event_stream("", "event: message_start\n"));
}

// ---- The tokens-per-minute limit ----

TEST(LlmWire, TokenRateWaitsForTheWindowAndSettlesToTheReportedUsage) {
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  std::vector<std::chrono::milliseconds> waits;
  TokenRate rate(
      10000, [&] { return now; },
      [&](std::chrono::milliseconds d) {
        waits.push_back(d);
        now += d;
      });
  int64_t a = rate.acquire(6000);
  now += std::chrono::seconds(10);
  int64_t b = rate.acquire(3000);  // 9000 in the window: fits
  EXPECT_TRUE(waits.empty());
  now += std::chrono::seconds(10);
  rate.acquire(2000);  // 11000 would pass the limit: waits for the first to leave the window
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_NEAR(waits[0].count(), 40001, 1);
  // The estimate replaced by what the reply reported: room again at once.
  rate.settle(b, 500);
  waits.clear();
  rate.acquire(7000);  // 500 + 2000 + 7000
  EXPECT_TRUE(waits.empty());
  (void)a;
  // A request larger than the limit goes alone once the window is empty.
  TokenRate small(
      100, [&] { return now; }, [&](std::chrono::milliseconds d) { now += d; });
  small.acquire(5000);
  auto before = now;
  small.acquire(5000);
  EXPECT_GE(now - before, std::chrono::seconds(60));
}

}  // namespace
