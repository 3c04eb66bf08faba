// kforge against OpenAI's reasoning models (o-series, gpt-5 family) and OpenAI-compatible servers
// (issue 35), through the loopback stand-in of openai_stand_in.h, which answers and refuses as the
// provider does: `kforge llm ping` and the search loop work without flags; every field kforge sends
// is one the API reference lists for that kind of model; a refused field is left out after one
// 400, once; streaming, prompt caching (cached tokens counted and priced), Retry-After, cut,
// endless and trickling streams.
//
// OpenAiStandIn.* check the stand-in itself (it must refuse what OpenAI refuses, or the tests
// below prove nothing); the other suites check kforge against it.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/evolve/config.h"
#include "kforge/evolve/llm.h"
#include "kforge/evolve/proposer.h"
#include "kforge/evolve/run.h"
#include "llm_test_util.h"
#include "loop_rig.h"
#include "openai_stand_in.h"
#include "test_util.h"

namespace {

using namespace kforge;
using namespace kforge::evolve;
using namespace std::chrono_literals;
using kforge::test::OpenAiStandIn;
using Fault = OpenAiStandIn::Fault;
using Server = OpenAiStandIn::Server;
using nlohmann::json;

// ---- Helpers ----

RetryPolicy quick(int attempts = 3) {
  return kforge::test::quick_policy(attempts);
}

using kforge::test::Sleeps;

ChatRequest ask(const std::string& user, std::optional<double> temperature = std::nullopt,
                int max_tokens = 4096) {
  ChatRequest r;
  r.system = "You write fast CUDA kernels.";
  r.context = "The task: ReLU over a float32 vector.";
  r.user = user;
  r.temperature = temperature;
  r.max_tokens = max_tokens;
  return r;
}

// A request whose system text and context (the parts every request of a task shares) pass the
// 1024 tokens OpenAI caches from.
ChatRequest long_ask(const std::string& user) {
  ChatRequest r = ask(user);
  for (int i = 0; i < 60; ++i)
    r.system += " Rule " + std::to_string(i) + ": keep loads coalesced and stores vectorized.";
  for (int i = 0; i < 60; ++i)
    r.context += "\nLine " + std::to_string(i) + " of the task's reference and its shapes.";
  return r;
}

// Every request kforge sent: the key as Bearer auth, JSON, only fields the API reference lists for
// chat completions, and for a reasoning model none it refuses (temperature only at its default).
void expect_reference_fields(const OpenAiStandIn& stand_in, Server server) {
  for (const OpenAiStandIn::Exchange& x : stand_in.exchanges()) {
    SCOPED_TRACE("call " + std::to_string(x.call) + ": " + x.body.substr(0, 300));
    if (server != Server::MaxTokensOnly) {
      EXPECT_EQ(x.header("Authorization"),
                std::string("Bearer ") + kforge::test::kOpenAiStandInKey);
    }
    EXPECT_EQ(x.path, "/v1/chat/completions");
    ASSERT_TRUE(x.json.is_object()) << "not a JSON object";
    EXPECT_EQ(kforge::test::fields_outside_openai_reference(x.json), std::vector<std::string>{});
    if (server == Server::Reasoning) {
      for (const std::string& f : kforge::test::openai_reasoning_refused_fields())
        EXPECT_FALSE(x.json.contains(f)) << f << " sent to a reasoning model";
      if (x.json.contains("temperature")) {
        EXPECT_EQ(x.json["temperature"], 1.0)
            << "a reasoning model takes only its default temperature";
      }
    }
    if (x.json.contains("stream_options")) {
      EXPECT_EQ(x.json.value("stream", false), true) << "stream_options without stream";
    }
  }
}

// ---- The stand-in refuses and answers as OpenAI does ----

// A raw POST to the stand-in, as any client would send it.
httplib::Result post(const OpenAiStandIn& s, const json& body, bool auth = true) {
  httplib::Client c(s.base_url().substr(0, s.base_url().size() - 3));
  httplib::Headers h;
  if (auth) h.emplace("Authorization", std::string("Bearer ") + kforge::test::kOpenAiStandInKey);
  return c.Post("/v1/chat/completions", h, body.dump(), "application/json");
}

json body_of(const std::string& model = "o4-mini") {
  return {{"model", model}, {"messages", {{{"role", "user"}, {"content", "Say pong."}}}}};
}

TEST(OpenAiStandIn, RefusesWhatAReasoningModelRefusesInOpenAisWords) {
  OpenAiStandIn s;
  auto refused = [&](json body, const std::string& param, const std::string& code,
                     const std::string& message) {
    auto res = post(s, body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << body.dump();
    json e = json::parse(res->body)["error"];
    EXPECT_EQ(e["type"], "invalid_request_error");
    EXPECT_EQ(e["param"], param.empty() ? json(nullptr) : json(param));
    EXPECT_EQ(e["code"], code.empty() ? json(nullptr) : json(code));
    EXPECT_EQ(e["message"], message);
  };
  json b = body_of();
  b["max_tokens"] = 100;
  refused(b, "max_tokens", "unsupported_parameter",
          "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
          "'max_completion_tokens' "
          "instead.");
  b = body_of();
  b["temperature"] = 0.7;
  refused(b, "temperature", "unsupported_value",
          "Unsupported value: 'temperature' does not support 0.7 with this model. Only the default "
          "(1) value is "
          "supported.");
  b = body_of();
  b["top_p"] = 0.9;
  refused(b, "top_p", "unsupported_parameter",
          "Unsupported parameter: 'top_p' is not supported with this model.");
  b = body_of();
  b["top_k"] = 40;
  refused(b, "top_k", "unknown_parameter", "Unknown parameter: 'top_k'.");
  b = body_of();
  b["stream_options"] = {{"include_usage", true}};
  refused(b, "stream_options", "",
          "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
  b = body_of();
  b["reasoning_effort"] = "minimal";
  refused(b, "reasoning_effort", "unsupported_value",
          "Unsupported value: 'reasoning_effort' does not support 'minimal' with this model. "
          "Supported values "
          "are: 'low', 'medium', and 'high'.");
  // What it takes: the default temperature, max_completion_tokens, reasoning_effort.
  b = body_of();
  b["temperature"] = 1;
  b["max_completion_tokens"] = 1000;
  b["reasoning_effort"] = "high";
  auto ok = post(s, b);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto anonymous = post(s, body_of(), false);
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  EXPECT_EQ(s.count(400), 6);
}

TEST(OpenAiStandIn, OldVllmRefusesMaxCompletionTokensAsExtraInput) {
  OpenAiStandIn::Options o;
  o.server = Server::MaxTokensOnly;
  OpenAiStandIn s(o);
  json b = body_of();
  b["max_completion_tokens"] = 64;
  auto res = post(s, b);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(
      json::parse(res->body),
      json::parse(
          R"({"object": "error", "message": "[{'type': 'extra_forbidden', 'loc': ('body', )"
          R"('max_completion_tokens'), 'msg': 'Extra inputs are not permitted', 'input': 64}]",)"
          R"( "type": "BadRequestError", "param": null, "code": 400})"));
  b.erase("max_completion_tokens");
  b["max_tokens"] = 64;
  EXPECT_EQ(post(s, b)->status, 200);
}

TEST(OpenAiStandIn, StreamsChunksAsOpenAiDoes) {
  OpenAiStandIn::Options o;
  o.answer = [](const json&) {
    return std::string("Olá — ✓ a kernel:\n```cuda\n__global__ void k() {}\n```");
  };
  OpenAiStandIn s(o);
  json b = body_of();
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  auto res = post(s, b);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream; charset=utf-8");
  std::vector<json> chunks;
  std::istringstream in(res->body);
  bool done = false;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    ASSERT_EQ(line.rfind("data: ", 0), 0u) << line;
    ASSERT_FALSE(done) << "an event after [DONE]";
    if (line == "data: [DONE]") {
      done = true;
      continue;
    }
    chunks.push_back(json::parse(line.substr(6)));
  }
  ASSERT_TRUE(done);
  ASSERT_GE(chunks.size(), 5u);
  std::string text;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const json& c = chunks[i];
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], chunks[0]["id"]);
    if (i + 1 == chunks.size()) {  // the usage chunk
      EXPECT_EQ(c["choices"], json::array());
      EXPECT_EQ(c["usage"]["completion_tokens_details"]["reasoning_tokens"], 64);
      continue;
    }
    EXPECT_TRUE(c["usage"].is_null());
    const json& choice = c["choices"][0];
    if (i == 0) {
      EXPECT_EQ(choice["delta"]["role"], "assistant");
    }
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    EXPECT_EQ(choice["finish_reason"], i + 2 == chunks.size() ? json("stop") : json(nullptr));
  }
  EXPECT_EQ(text, o.answer(b));
}

TEST(OpenAiStandIn, PromptCacheServesTheLongestPrefixIn128TokenSteps) {
  OpenAiStandIn s;
  std::string shared(6000, 's');  // 1500 tokens
  auto with_user = [&](const std::string& user) {
    json b = body_of();
    b["messages"] = {{{"role", "system"}, {"content", shared}},
                     {{"role", "user"}, {"content", user}}};
    return b;
  };
  auto cached = [&](const json& b) {
    auto res = post(s, b);
    return json::parse(res->body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  };
  EXPECT_EQ(cached(with_user("first")), 0);
  // The prefix both share: "system\n" + 6000 characters + "\nuser\n": 6013 characters, 1503 tokens.
  EXPECT_EQ(cached(with_user("second")), 1408);
  EXPECT_EQ(cached(body_of()), 0);  // short prompts are never cached
}

// ---- kforge llm ping ----

TEST(OpenAiStandInCli, PingAReasoningModelWithoutFlags) {
  OpenAiStandIn s;
  auto [code, out] =
      kforge::test::run_command("env -u KFORGE_LLM_CONFIG -u KFORGE_MODEL " + s.env() + " " +
                                KFORGE_BINARY + " llm ping --model openai:o4-mini");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("pong"), std::string::npos) << out;
  EXPECT_EQ(s.count(400), 0) << "the ping sent something a reasoning model refuses";
  EXPECT_EQ(out.find(kforge::test::kOpenAiStandInKey), std::string::npos) << "the key leaked";
  expect_reference_fields(s, Server::Reasoning);
}

// ---- LlmClient: what it sends ----

TEST(OpenAiStandInClient, DefaultRequestsCarryOnlyWhatTheReferenceListsForReasoningModels) {
  OpenAiStandIn s;
  LlmClient streamed(s.endpoint(), quick());
  ChatResponse r = streamed.chat(ask("Say pong."));
  EXPECT_EQ(r.text, "pong");
  Endpoint plain = s.endpoint();
  plain.wire.stream = false;
  plain.wire.reasoning_effort = "high";
  EXPECT_EQ(LlmClient(plain, quick()).chat(ask("Say pong.")).text, "pong");
  EXPECT_EQ(s.count(400), 0);
  expect_reference_fields(s, Server::Reasoning);
  std::vector<OpenAiStandIn::Exchange> xs = s.exchanges();
  ASSERT_EQ(xs.size(), 2u);
  const json& first = xs[0].json;
  EXPECT_EQ(first["model"], "o4-mini");
  EXPECT_EQ(first["max_completion_tokens"], 4096);
  EXPECT_FALSE(first.contains("max_tokens"));
  EXPECT_FALSE(first.contains("temperature")) << "the request had none";
  EXPECT_FALSE(first.contains("reasoning_effort"));
  EXPECT_EQ(first["stream"], true);
  EXPECT_EQ(first["stream_options"], json({{"include_usage", true}}));
  ASSERT_EQ(first["messages"].size(), 2u);
  EXPECT_EQ(first["messages"][0],
            json({{"role", "system"}, {"content", "You write fast CUDA kernels."}}));
  EXPECT_EQ(
      first["messages"][1],
      json({{"role", "user"}, {"content", "The task: ReLU over a float32 vector.\n\nSay pong."}}));
  const json& second = xs[1].json;
  EXPECT_FALSE(second.contains("stream_options"));
  EXPECT_NE(second.value("stream", false), true);
  EXPECT_EQ(second["reasoning_effort"], "high");
}

TEST(OpenAiStandInClient, TemperatureRefusedOnceIsLeftOutFromThenOn) {
  OpenAiStandIn s;
  LlmClient client(s.endpoint(), quick());
  std::vector<std::string> notices;
  client.on_notice([&](const std::string& n) { notices.push_back(n); });
  ChatResponse r = client.chat(ask("Say pong.", 0.7));
  EXPECT_EQ(r.text, "pong");
  ASSERT_EQ(s.calls(), 2);
  EXPECT_EQ(s.exchanges()[0].status, 400);
  EXPECT_EQ(s.exchanges()[0].json["temperature"], 0.7);
  EXPECT_FALSE(s.exchanges()[1].json.contains("temperature"));
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("temperature"), std::string::npos) << notices[0];
  EXPECT_FALSE(client.wire().temperature);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(client.chat(ask("Say pong " + std::to_string(i) + ".", 0.7)).text, "pong");
  EXPECT_EQ(s.calls(), 7);
  EXPECT_EQ(s.count(400), 1) << "one 400 in all: the refusal is remembered";
  EXPECT_EQ(notices.size(), 1u) << "the notice is said once";
  std::vector<OpenAiStandIn::Exchange> xs = s.exchanges();
  for (size_t i = 1; i < xs.size(); ++i)
    EXPECT_FALSE(xs[i].json.contains("temperature")) << "call " << xs[i].call;
}

TEST(OpenAiStandInClient, ServerThatKnowsOnlyMaxTokensGetsMaxTokensFromThenOn) {
  OpenAiStandIn::Options o;
  o.server = Server::MaxTokensOnly;
  OpenAiStandIn s(o);
  LlmClient client(s.endpoint("Qwen/Qwen3-Coder"), quick());
  std::vector<std::string> notices;
  client.on_notice([&](const std::string& n) { notices.push_back(n); });
  EXPECT_EQ(client.chat(ask("Say pong.")).text, "pong");
  EXPECT_EQ(client.wire().token_limit_field, "max_tokens");
  EXPECT_EQ(client.chat(ask("Say pong again.")).text, "pong");
  std::vector<OpenAiStandIn::Exchange> xs = s.exchanges();
  ASSERT_EQ(xs.size(), 3u);
  EXPECT_EQ(xs[0].status, 400);
  EXPECT_TRUE(xs[0].json.contains("max_completion_tokens"));
  for (size_t i = 1; i < xs.size(); ++i) {
    EXPECT_EQ(xs[i].status, 200);
    EXPECT_EQ(xs[i].json["max_tokens"], 4096);
    EXPECT_FALSE(xs[i].json.contains("max_completion_tokens"));
  }
  EXPECT_EQ(notices.size(), 1u);
  expect_reference_fields(s, Server::MaxTokensOnly);
}

TEST(OpenAiStandInClient, NonReasoningModelThatRefusesReasoningEffortGetsNoneFromThenOn) {
  OpenAiStandIn::Options o;
  o.server = Server::Chat;
  o.reported_model = "gpt-4.1-2025-04-14";
  OpenAiStandIn s(o);
  Endpoint e = s.endpoint("gpt-4.1");
  e.wire.reasoning_effort = "high";
  LlmClient client(e, quick());
  client.on_notice([](const std::string&) {});
  EXPECT_EQ(client.chat(ask("Say pong.", 0.2)).text, "pong");
  EXPECT_EQ(client.chat(ask("Say pong again.", 0.2)).text, "pong");
  EXPECT_EQ(s.count(400), 1);
  EXPECT_EQ(client.wire().reasoning_effort, "");
  EXPECT_EQ(s.exchanges().back().json["temperature"], 0.2)
      << "a non-reasoning model keeps its temperature";
  expect_reference_fields(s, Server::Chat);
}

// ---- Streaming ----

TEST(OpenAiStandInClient, StreamedAnswerIsJoinedWithItsUsageFromTheLastChunk) {
  const std::string answer =
      "Olá — ✓ here it is:\n```cuda\n__global__ void relu(float* x) {}\n```\n";
  OpenAiStandIn::Options o;
  o.answer = [&](const json&) { return answer; };
  o.event_delay = 2ms;
  OpenAiStandIn s(o);
  LlmClient client(s.endpoint(), quick());
  ChatResponse first = client.chat(long_ask("Write relu."));
  ChatResponse second = client.chat(long_ask("Write a faster relu."));
  std::vector<OpenAiStandIn::Exchange> xs = s.exchanges();
  ASSERT_EQ(xs.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const ChatResponse& r = i == 0 ? first : second;
    const json& usage = xs[i].usage;
    SCOPED_TRACE(usage.dump());
    EXPECT_TRUE(xs[i].stream);
    EXPECT_GE(xs[i].events, 10) << "the answer came in many deltas";
    EXPECT_EQ(r.text, answer);
    EXPECT_EQ(r.finish_reason, "stop");
    EXPECT_EQ(r.model, "o4-mini-2025-04-16");
    EXPECT_EQ(r.attempts, 1);
    EXPECT_EQ(r.tokens_in, usage["prompt_tokens"]);
    EXPECT_EQ(r.tokens_out, usage["completion_tokens"]) << "reasoning tokens are output tokens";
    EXPECT_GT(r.tokens_out, OpenAiStandIn::tokens_of(answer))
        << "the 64 reasoning tokens are counted";
    EXPECT_EQ(r.tokens_cache_read, usage["prompt_tokens_details"]["cached_tokens"]);
    EXPECT_EQ(r.tokens_cache_write, 0);
  }
  EXPECT_EQ(first.tokens_cache_read, 0);
  EXPECT_GE(second.tokens_cache_read, 1024)
      << "the shared system text and context were read from the cache";
  EXPECT_LT(second.tokens_cache_read, second.tokens_in);
}

TEST(OpenAiStandInClient, ReasoningThatSpendsTheWholeLimitIsOnePaidCutOffCall) {
  OpenAiStandIn s;  // 64 reasoning tokens before any answer text
  LlmClient client(s.endpoint(), quick());
  try {
    client.chat(ask("Say pong.", std::nullopt, 32));
    FAIL() << "an answer with no text was accepted";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::CutOff) << e.what();
    EXPECT_EQ(e.finish_reason, "length");
    EXPECT_EQ(e.tokens_out, 32);
    EXPECT_TRUE(e.paid());
  }
  EXPECT_EQ(s.calls(), 1) << "a paid reply is not asked again";
}

TEST(OpenAiStandInClient, StreamCutMidAnswerIsAskedAgainAndArrivesWhole) {
  const std::string answer =
      "```cuda\n__global__ void relu(float* x, long n) { /* a long answer */ }\n```";
  OpenAiStandIn::Options o;
  o.answer = [&](const json&) { return answer; };
  o.fault = [](int call) { return call == 1 ? Fault::CutStream : Fault::None; };
  o.cut_after_events = 4;
  OpenAiStandIn s(o);
  Sleeps sleeps;
  LlmClient client(s.endpoint(), quick(), sleeps.fn());
  ChatResponse r = client.chat(ask("Write relu."));
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(r.text, answer);
  EXPECT_EQ(r.tokens_out, s.exchanges()[1].usage["completion_tokens"]);
  EXPECT_EQ(s.exchanges()[0].events, 4) << "the first stream was cut after 4 events";
  EXPECT_EQ(sleeps.waits.size(), 1u);
}

TEST(OpenAiStandInClient, EndlessStreamStopsAtMaxReplyBytesPromptly) {
  OpenAiStandIn::Options o;
  o.fault = [](int) { return Fault::EndlessStream; };
  OpenAiStandIn s(o);
  RetryPolicy p = quick(2);
  p.total_timeout = 30000ms;
  p.max_reply_bytes = 1 << 20;
  LlmClient client(s.endpoint(), p, [](auto) {});
  auto t0 = std::chrono::steady_clock::now();
  try {
    client.chat(ask("Write relu."));
    FAIL() << "an endless stream was accepted";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::BadResponse) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_reply_bytes"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_EQ(s.calls(), 2) << "a bad reply that reported no usage is asked again";
  for (const OpenAiStandIn::Exchange& x : s.exchanges())
    EXPECT_LT(x.bytes, 64 << 20) << "read on past the cap";
}

TEST(OpenAiStandInClient, TricklingStreamStopsAtTheTimeout) {
  OpenAiStandIn::Options o;
  o.fault = [](int) { return Fault::TrickleStream; };
  o.trickle_interval = 50ms;
  OpenAiStandIn s(o);
  RetryPolicy p = quick(2);
  p.total_timeout = 600ms;
  LlmClient client(s.endpoint(), p, [](auto) {});
  auto t0 = std::chrono::steady_clock::now();
  try {
    client.chat(ask("Write relu."));
    FAIL() << "a trickling stream was accepted";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::Timeout) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s)
      << "total_timeout holds for a stream that never ends";
  EXPECT_EQ(s.calls(), 2);
  for (const OpenAiStandIn::Exchange& x : s.exchanges())
    EXPECT_GE(x.events, 3) << "the stream did trickle";
}

// ---- Prompt caching, priced ----

TEST(OpenAiStandInClient, CachedInputTokensArePricedAtTheCachedInputPrice) {
  OpenAiStandIn s;
  LlmClient client(s.endpoint(), quick());
  client.chat(long_ask("Write relu."));
  ChatResponse r = client.chat(long_ask("Write a faster relu."));
  ASSERT_GE(r.tokens_cache_read, 1024);
  ModelConfig m;
  m.spec = "openai:o4-mini";
  m.price_input_per_mtok = 2.0;
  m.price_cached_input_per_mtok = 0.5;
  m.price_output_per_mtok = 8.0;
  double expected =
      (static_cast<double>(r.tokens_in - r.tokens_cache_read) * 2.0 +
       static_cast<double>(r.tokens_cache_read) * 0.5 + static_cast<double>(r.tokens_out) * 8.0) /
      1e6;
  EXPECT_NEAR(m.cost_usd(r.tokens_in, r.tokens_out, r.tokens_cache_read, r.tokens_cache_write),
              expected, 1e-12);
  EXPECT_LT(m.cost_usd(r.tokens_in, r.tokens_out, r.tokens_cache_read, r.tokens_cache_write),
            m.cost_usd(r.tokens_in, r.tokens_out))
      << "cached tokens cost less than fresh ones";
}

// ---- Rate limits and overload ----

TEST(OpenAiStandInClient, RetryAfterOf429And503IsWhatTheClientWaits) {
  OpenAiStandIn::Options o;
  o.fault = [](int call) {
    return call == 1 ? Fault::RateLimited : call == 2 ? Fault::Unavailable : Fault::None;
  };
  o.rate_limit_retry_after = "3";
  o.unavailable_retry_after = "2";
  OpenAiStandIn s(o);
  Sleeps sleeps;
  LlmClient client(s.endpoint(), quick(4), sleeps.fn());
  ChatResponse r = client.chat(ask("Say pong."));
  EXPECT_EQ(r.text, "pong");
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(sleeps.waits, (std::vector<std::chrono::milliseconds>{3000ms, 2000ms}));
  EXPECT_EQ(s.count(429), 1);
  EXPECT_EQ(s.count(503), 1);
}

// ---- kforge evolve against a reasoning model ----

// The smoke/relu seed with a line of its own, so that every answer is new code that compiles.
std::string relu_answer(int n) {
  std::string seed =
      read_file((kforge::test::source_dir() / "tasks/smoke/seeds/relu.md").string()).value();
  return seed.insert(seed.find("```cuda\n") + 8, "// o4-mini answer " + std::to_string(n) + "\n");
}

TEST(OpenAiStandInLoop, EvolveAgainstAReasoningModelWithoutFlags) {
  std::atomic<int> answered{0};
  OpenAiStandIn::Options o;
  o.answer = [&](const json&) { return relu_answer(++answered); };
  OpenAiStandIn s(o);
  kforge::test::Rig rig;
  // The LLM config a user writes for o4-mini: the model, its prices, the endpoint. Nothing about
  // how to talk to a reasoning model.
  std::string path = (rig.dir.path() / "llm.toml").string();
  std::ofstream(path)
      << "[[models]]\nmodel = \"openai:o4-mini\"\nprice = { input = 2.0, output = 8.0 }\n"
      << "[providers.openai]\nbase_url = \"" << s.base_url() << "\"\napi_key = \""
      << kforge::test::kOpenAiStandInKey << "\"\n";
  LlmConfig cfg = load_llm_config(path);
  ASSERT_EQ(cfg.models.size(), 1u);
  cfg.models[0].price_cached_input_per_mtok =
      0.5;  // o4-mini's cached input is a quarter of its input
  auto cache = std::make_shared<ResponseCache>((rig.dir.path() / "llm-cache").string());
  std::vector<Voice> voices;
  for (const ModelConfig& m : cfg.models)
    voices.push_back({m, std::make_shared<const LlmClient>(cfg.endpoint(m), cfg.policy(m), nullptr,
                                                           nullptr, cache)});
  LlmProposer llm(voices, (kforge::test::source_dir() / "prompts").string(), "a test GPU");
  RunConfig c;
  c.tasks = {"smoke/relu"};
  c.generations = 2;
  c.children = 0;  // the model's children alone
  c.llm_children = 2;
  c.judge_top = 1;
  c.islands = 1;
  c.tuner.exhaustive_max = 8;
  c.operators = {1, 0, 0};
  auto task = std::make_shared<const tasks::Task>(tasks::load_task(
      tasks::resolve_tasks("smoke/relu", (kforge::test::source_dir() / "tasks").string()).at(0)));
  RunSummary r = run_evolution(c, {task}, *rig.evaluator, std::nullopt, {}, &llm);

  EXPECT_EQ(s.count(400), 0) << "the loop sent something a reasoning model refuses";
  expect_reference_fields(s, Server::Reasoning);
  for (const OpenAiStandIn::Exchange& x : s.exchanges()) EXPECT_TRUE(x.stream) << "call " << x.call;
  const int n = answered.load();
  EXPECT_EQ(n, 4) << "two model children in each of two generations";
  EXPECT_EQ(r.llm.calls, n);
  EXPECT_EQ(r.llm.failed_calls, 0);
  // Every answer became a candidate of the model that compiled and reached the GPU.
  EXPECT_EQ(rig.count("SELECT count(*) FROM candidates WHERE model = 'openai:o4-mini'"), n);
  EXPECT_EQ(rig.count("SELECT count(*) FROM candidates c JOIN compiles x ON x.candidate_id = c.id"
                      " WHERE c.model = 'openai:o4-mini' AND x.ok = 1 AND x.stage = 'passed'"
                      " AND c.source LIKE '%// o4-mini answer %'"),
            n);
  // The run's tokens and dollars are what the server reported, cached input at its price.
  OpenAiStandIn::Totals t = s.totals();
  EXPECT_EQ(t.replies, n);
  EXPECT_EQ(r.llm.tokens_in, t.prompt);
  EXPECT_EQ(r.llm.tokens_out, t.completion);
  EXPECT_GT(t.cached, 0)
      << "the loop's requests share their system text and context: the cache serves them";
  double dollars = 0;
  for (const OpenAiStandIn::Exchange& x : s.exchanges())
    if (x.usage.is_object())
      dollars += cfg.models[0].cost_usd(x.usage["prompt_tokens"], x.usage["completion_tokens"],
                                        x.usage["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_NEAR(r.llm.cost_usd, dollars, 1e-9);
}

}  // namespace
