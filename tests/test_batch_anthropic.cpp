// Issue 35: the batch exchange speaks Anthropic's Message Batches format too. An Anthropic
// endpoint's requests are Message Batches request items (custom_id, params: a Messages body); the
// folder's answers are read in either batch API's output format, whatever the endpoint, line by
// line: OpenAI's (custom_id, response, error) and Anthropic's results (custom_id, result:
// succeeded / errored / canceled / expired). scripts/batch-exchange.py renders and answers both.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_util.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/secrets.h"
#include "kforge/evolve/batch.h"
#include "test_util.h"

namespace {

using kforge::test::TempDir;
using nlohmann::json;
namespace ev = kforge::evolve;
using namespace std::chrono_literals;

const char* kAnthropicKey = "sk-ant-test-BATCH-0123456789";

ev::Endpoint anthropic_endpoint() {
  ev::Endpoint e;
  e.provider = ev::Provider::Anthropic;
  e.base_url = "https://api.anthropic.com";
  e.model = "claude-sonnet-4-5";
  e.api_key = kAnthropicKey;
  return e;
}

ev::ChatRequest request(const std::string& user) {
  ev::ChatRequest r;
  r.system = "You write CUDA kernels.";
  r.context = "The task: relu over 64 floats.";
  r.user = user;
  r.max_tokens = 1000;
  return r;
}

// requests.jsonl's lines, parsed.
std::vector<json> request_lines(const ev::BatchExchange& ex) {
  std::vector<json> out;
  std::ifstream in(ex.requests_file());
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// What chat() did: "text" of its answer, "LlmError <kind>|<status>|<what>" or "InputError
// <file>|<line>|<field>|<problem>".
std::string outcome(const std::function<ev::ChatResponse()>& chat) {
  try {
    return "text " + chat().text;
  } catch (const ev::LlmError& e) {
    return "LlmError " + std::to_string(static_cast<int>(e.kind())) + "|" +
           std::to_string(e.http_status()) + "|" + e.what();
  } catch (const kforge::InputError& e) {
    return "InputError " + e.file() + "|" + (e.line() ? std::to_string(*e.line()) : "-") + "|" +
           e.field() + "|" + e.problem();
  }
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A Messages API response, as a results line's succeeded message carries it.
json message(const std::string& text, json usage = {{"input_tokens", 10}, {"output_tokens", 5}}) {
  return {{"id", "msg_01"},
          {"type", "message"},
          {"role", "assistant"},
          {"model", "claude-sonnet-4-5-20250929"},
          {"content", {{{"type", "text"}, {"text", text}}}},
          {"stop_reason", "end_turn"},
          {"stop_sequence", nullptr},
          {"usage", usage}};
}
json succeeded(const std::string& id, const json& msg) {
  return {{"custom_id", id}, {"result", {{"type", "succeeded"}, {"message", msg}}}};
}
json errored(const std::string& id, const std::string& type, const std::string& message) {
  return {{"custom_id", id},
          {"result",
           {{"type", "errored"},
            {"error",
             {{"type", "error"},
              {"error", {{"type", type}, {"message", message}}},
              {"request_id", "req_1"}}}}}};
}
json ended(const std::string& id, const std::string& type) {
  return {{"custom_id", id}, {"result", {{"type", type}}}};
}
// An OpenAI Batch API output line.
json openai_answer(const std::string& id, const std::string& text) {
  json body = {{"model", "gpt-x"},
               {"choices",
                {{{"index", 0},
                  {"finish_reason", "stop"},
                  {"message", {{"role", "assistant"}, {"content", text}}}}}},
               {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 3}}}};
  return {{"id", "batch_req_1"},
          {"custom_id", id},
          {"response", {{"status_code", 200}, {"body", body}}},
          {"error", nullptr}};
}

void append(const std::filesystem::path& file, const json& line) {
  std::ofstream(file, std::ios::app) << line.dump() << "\n";
}

TEST(BatchAnthropic, RequestLinesAreMessageBatchesRequestItems) {
  kforge::remember_secret(kAnthropicKey);
  TempDir dir;
  ev::BatchExchange ex(dir.path(), anthropic_endpoint(), 0ms, 1ms);
  EXPECT_EQ(ex.model(), "anthropic:claude-sonnet-4-5");
  ev::ChatRequest r =
      request(std::string("make it fast ") + kAnthropicKey);  // a secret never reaches the file
  std::string id = ex.custom_id(r, 0);
  EXPECT_TRUE(std::regex_match(id, std::regex("kf-[0-9a-f]{24}")))
      << id;  // within ^[a-zA-Z0-9_-]{1,64}$
  EXPECT_NE(id, ex.custom_id(r, 1));
  EXPECT_TRUE(has(outcome([&] { return ex.chat(r, 0); }),
                  "LlmError " + std::to_string(static_cast<int>(ev::LlmError::Kind::Unanswered))));
  std::vector<json> lines = request_lines(ex);
  ASSERT_EQ(lines.size(), 1u);
  const json& line = lines[0];
  std::set<std::string> keys;
  for (const auto& [k, v] : line.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"custom_id", "params"})) << line.dump();
  EXPECT_EQ(line["custom_id"], id);
  const json& params = line["params"];
  EXPECT_EQ(params["model"], "claude-sonnet-4-5");
  EXPECT_EQ(params["max_tokens"], 1000);
  EXPECT_FALSE(params.contains("stream")) << "a batch request is never streamed";
  EXPECT_TRUE(params.contains("system"));
  ASSERT_TRUE(params["messages"].is_array() && !params["messages"].empty());
  EXPECT_EQ(params["messages"].back()["role"], "user");
  EXPECT_TRUE(has(params.dump(), "The task: relu over 64 floats.") &&
              has(params.dump(), "make it fast"));
  EXPECT_FALSE(params.contains("messages") && params["messages"][0]["role"] == "system")
      << "Anthropic's system is a field";
  std::string text = *kforge::read_file(ex.requests_file().string());
  EXPECT_FALSE(has(text, kAnthropicKey)) << "the API key reached the requests file";
}

TEST(BatchAnthropic, ResultsOfEachTypeGiveAnAnswerOrAFailedCall) {
  TempDir dir;
  ev::BatchExchange ex(dir.path(), anthropic_endpoint(), 0ms, 1ms);
  ev::ChatRequest ok = request("ok"), bad = request("bad"), stopped = request("stopped"),
                  late = request("late");
  for (const ev::ChatRequest* r : {&ok, &bad, &stopped, &late})
    outcome([&] { return ex.chat(*r, 0); });
  ASSERT_EQ(request_lines(ex).size(), 4u);
  std::filesystem::path results = dir.path() / "msgbatch_01-results.jsonl";
  append(results, succeeded(ex.custom_id(ok, 0), message("```cuda\n__global__ void k() {}\n```",
                                                         {{"input_tokens", 10},
                                                          {"output_tokens", 5},
                                                          {"cache_read_input_tokens", 100},
                                                          {"cache_creation_input_tokens", 20}})));
  append(results,
         errored(ex.custom_id(bad, 0), "invalid_request_error", "max_tokens: 1000000 > 64000"));
  append(results, ended(ex.custom_id(stopped, 0), "canceled"));
  append(results, ended(ex.custom_id(late, 0), "expired"));

  ev::ChatResponse got = ex.chat(ok, 0);
  EXPECT_TRUE(has(got.text, "__global__ void k"));
  EXPECT_EQ(got.model, "claude-sonnet-4-5-20250929");
  EXPECT_EQ(got.finish_reason, "end_turn");
  EXPECT_EQ(got.tokens_out, 5);
  EXPECT_EQ(got.tokens_cache_read, 100);
  EXPECT_EQ(got.tokens_cache_write, 20);
  EXPECT_EQ(got.tokens_in, 130)
      << "every input token, those read from and written to the cache included";
  EXPECT_EQ(got.attempts, 1);

  std::string http = "LlmError " + std::to_string(static_cast<int>(ev::LlmError::Kind::Http)) + "|";
  std::string e = outcome([&] { return ex.chat(bad, 0); });
  EXPECT_TRUE(has(e, http) && has(e, "errored") && has(e, "invalid_request_error") &&
              has(e, "max_tokens: 1000000 > 64000"))
      << e;
  e = outcome([&] { return ex.chat(stopped, 0); });
  EXPECT_TRUE(has(e, http) && has(e, "canceled")) << e;
  e = outcome([&] { return ex.chat(late, 0); });
  EXPECT_TRUE(has(e, http) && has(e, "expired")) << e;
  // Answered: asking again gives the same failure and writes nothing.
  EXPECT_EQ(outcome([&] { return ex.chat(late, 0); }), e);
  EXPECT_EQ(request_lines(ex).size(), 4u);
  EXPECT_EQ(ex.unanswered(), 0);
}

// The output format is read per line, whatever the endpoint: a folder answered by either API's
// batch (or a mix of both) is read.
TEST(BatchAnthropic, EitherOutputFormatAnswersEitherEndpoint) {
  TempDir dir;
  ev::BatchExchange anthropic(dir.path(), anthropic_endpoint(), 0ms, 1ms);
  ev::BatchExchange openai(dir.path(), "batch", 0ms, 1ms);
  ev::ChatRequest r = request("both");
  ASSERT_NE(anthropic.custom_id(r, 0), openai.custom_id(r, 0));
  append(dir.path() / "out.jsonl",
         openai_answer(anthropic.custom_id(r, 0), "from an OpenAI batch"));
  append(dir.path() / "out.jsonl",
         succeeded(openai.custom_id(r, 0), message("from a Message Batch")));
  ev::ChatResponse a = anthropic.chat(r, 0), o = openai.chat(r, 0);
  EXPECT_EQ(a.text, "from an OpenAI batch");
  EXPECT_EQ(a.tokens_in, 7);
  EXPECT_EQ(o.text, "from a Message Batch");
  EXPECT_EQ(o.tokens_in, 10);
  EXPECT_EQ(o.tokens_out, 5);
}

// The OpenAI format still round-trips, its body shaped as chat_body shapes it for OpenAI's
// reasoning models: max_completion_tokens, and a temperature only when the request has one.
TEST(BatchAnthropic, TheOpenAIFormatStillRoundTrips) {
  TempDir dir;
  ev::BatchExchange ex(dir.path(), "gpt-5", 0ms, 1ms);
  EXPECT_EQ(ex.model(), "gpt-5");
  ev::ChatRequest r = request("openai");
  ev::ChatRequest warm = r;
  warm.temperature = 0.7;
  outcome([&] { return ex.chat(r, 0); });
  outcome([&] { return ex.chat(warm, 0); });
  std::vector<json> lines = request_lines(ex);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["method"], "POST");
  EXPECT_EQ(lines[0]["url"], "/v1/chat/completions");
  const json& body = lines[0]["body"];
  EXPECT_EQ(body["model"], "gpt-5");
  EXPECT_EQ(body["max_completion_tokens"], 1000);
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_FALSE(body.contains("stream"));
  EXPECT_EQ(lines[1]["body"]["temperature"], 0.7);
  append(dir.path() / "out.jsonl", openai_answer(lines[0]["custom_id"], "answered"));
  EXPECT_EQ(ex.chat(r, 0).text, "answered");
}

TEST(BatchAnthropic, MalformedResultsNameFileLineAndField) {
  for (
      const auto& [make, field] :
      std::vector<std::pair<std::function<json(const std::string&)>, std::string>>{
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"result", "succeeded"}};
           },
           "result"},
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"result", {{"message", message("x")}}}};
           },
           "result.type"},
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"result", {{"type", "done"}}}};
           },
           "result.type"},
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"result", {{"type", 7}}}};
           },
           "result.type"},
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"result", {{"type", "succeeded"}}}};
           },
           "result.message"},
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"result", {{"type", "succeeded"}, {"message", "hi"}}}};
           },
           "result.message"},
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"result", {{"type", "errored"}}}};
           },
           "result.error"},
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"result", {{"type", "errored"}, {"error", "x"}}}};
           },
           "result.error"}}) {
    TempDir dir;
    ev::BatchExchange ex(dir.path(), anthropic_endpoint(), 0ms, 1ms);
    ev::ChatRequest r = request("x");
    std::string id = ex.custom_id(r, 0);
    std::string path =
        dir.write("results.jsonl", succeeded("kf-other", message("not this")).dump() + "\n" +
                                       make(id).dump() + "\n");
    std::string e = outcome([&] { return ex.chat(r, 0); });
    EXPECT_TRUE(has(e, "InputError " + path + "|2|" + field + "|"))
        << make(id).dump() << " -> " << e;
  }
  // Two different results for one request name both places; the same result twice is one.
  TempDir dir;
  ev::BatchExchange ex(dir.path(), anthropic_endpoint(), 0ms, 1ms);
  ev::ChatRequest r = request("twice");
  std::string id = ex.custom_id(r, 0);
  std::string a = dir.write("a.jsonl", succeeded(id, message("first")).dump() + "\n");
  std::string b = dir.write("b.jsonl", ended(id, "expired").dump() + "\n");
  std::string e = outcome([&] { return ex.chat(r, 0); });
  EXPECT_TRUE(has(e, "InputError " + b + "|1|custom_id|" + id +
                         " is answered differently here and in " + a + ":1"))
      << e;
  dir.write("b.jsonl", succeeded(id, message("first")).dump() + "\n");
  EXPECT_EQ(outcome([&] { return ex.chat(r, 0); }), "text first");
}

// Whatever a results file holds, reading it is an answer, a failed call (LlmError) or an
// InputError naming the file: never a JSON library exception (exit 4), a hang or a crash.
TEST(BatchAnthropic, FuzzedResultsAreAnswersFailedCallsOrNamedErrors) {
  TempDir dir;
  ev::BatchExchange ex(dir.path(), anthropic_endpoint(), 0ms, 1ms);
  ev::ChatRequest r = request("fuzz");
  std::string id = ex.custom_id(r, 0);
  json cached =
      message("```cuda\n__global__ void k() {}\n```", {{"input_tokens", 3},
                                                       {"output_tokens", 2},
                                                       {"cache_read_input_tokens", 9},
                                                       {"cache_creation_input_tokens", 4}});
  std::vector<std::string> seeds = {
      succeeded(id, cached).dump() + "\n",
      succeeded("kf-other", message("x")).dump() + "\n" +
          errored(id, "overloaded_error", "Overloaded").dump() + "\n",
      ended(id, "canceled").dump() + "\n" + ended(id, "expired").dump() + "\n",
      succeeded(id, message("", {{"input_tokens", 1}, {"output_tokens", -4}})).dump() + "\n",
      json{{"custom_id", id}, {"result", {{"type", "errored"}, {"error", {{"error", "flat"}}}}}}
              .dump() +
          "\n",
      json{{"custom_id", id},
           {"result", {{"type", "succeeded"}, {"message", {{"content", "text"}}}}}}
              .dump() +
          "\n"};
  std::string path = (dir.path() / "results.jsonl").string();
  std::string failures = kforge::test::fuzzing::fuzz(
      seeds, 1500, 20, 3535, [&](const std::string& text) -> std::string {
        std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
        try {
          ev::ChatResponse got = ex.chat(r, 0);
          if (got.tokens_in < 0 || got.tokens_out < 0 || got.tokens_cache_read < 0 ||
              got.tokens_cache_write < 0)
            return "negative token counts";
        } catch (const ev::LlmError&) {  // a failed or unanswered call
        } catch (const std::exception& e) {
          return kforge::test::fuzzing::named(e, path);
        }
        return "";
      });
  EXPECT_EQ(failures, "");
}

// A new exchange on the folder (a resumed run) reads what was written and writes nothing twice.
TEST(BatchAnthropic, AResumedExchangeDoesNotWriteARequestTwice) {
  TempDir dir;
  ev::ChatRequest r = request("resume");
  {
    ev::BatchExchange first(dir.path(), anthropic_endpoint(), 0ms, 1ms);
    outcome([&] { return first.chat(r, 0); });
    outcome([&] { return first.chat(r, 0); });
    EXPECT_EQ(request_lines(first).size(), 1u);
  }
  ev::BatchExchange again(dir.path(), anthropic_endpoint(), 0ms, 1ms);
  EXPECT_EQ(again.unanswered(), 1);
  std::string e = outcome([&] { return again.chat(r, 0); });
  EXPECT_TRUE(
      has(e, "LlmError " + std::to_string(static_cast<int>(ev::LlmError::Kind::Unanswered))))
      << e;
  EXPECT_EQ(request_lines(again).size(), 1u);
  append(dir.path() / "results.jsonl", succeeded(again.custom_id(r, 0), message("resumed")));
  EXPECT_EQ(again.unanswered(), 0);
  ev::BatchExchange third(dir.path(), anthropic_endpoint(), 0ms, 1ms);
  EXPECT_EQ(third.chat(r, 0).text, "resumed");
  EXPECT_EQ(request_lines(third).size(), 1u);
}

// --- scripts/batch-exchange.py
// --------------------------------------------------------------------

// The script's exit status and standard error (its standard output too, unless `out` is a file to
// write it to).
kforge::test::CliResult script(const std::string& args, const std::string& out = "") {
  std::string cmd = "timeout 60 python3 " +
                    (kforge::test::source_dir() / "scripts/batch-exchange.py").string() + " " +
                    args;
  return kforge::test::run_command(out.empty() ? cmd : "(" + cmd + " > " + out + ")");
}

// pending renders both formats, anthropic-body lists the unanswered Anthropic requests, collect
// answers each request in its own format, and the exchanges read those answers.
TEST(BatchAnthropic, ScriptPendingCollectAndAnthropicBodyRoundTrip) {
  TempDir dir;
  std::string folder = dir.path().string();
  ev::BatchExchange anthropic(dir.path(), anthropic_endpoint(), 0ms, 1ms);
  ev::BatchExchange openai(dir.path(), "gpt-5", 0ms, 1ms);
  ev::ChatRequest one = request("first request"), two = request("second request"),
                  three = request("third request");
  for (const ev::ChatRequest* r : {&one, &two}) outcome([&] { return anthropic.chat(*r, 0); });
  outcome([&] { return openai.chat(three, 0); });
  std::string id1 = anthropic.custom_id(one, 0), id2 = anthropic.custom_id(two, 0),
              id3 = openai.custom_id(three, 0);
  std::vector<json> lines = request_lines(anthropic);
  ASSERT_EQ(lines.size(), 3u);

  // The body to POST to /v1/messages/batches: the unanswered Anthropic requests, as written.
  TempDir io;
  std::string body_file = (io.path() / "batch.json").string();
  kforge::test::CliResult b = script("anthropic-body " + folder, body_file);
  ASSERT_EQ(b.code, 0) << b.out;
  json body = json::parse(*kforge::read_file(body_file));
  ASSERT_TRUE(body.is_object() && body.size() == 1 && body["requests"].is_array())
      << body.dump().substr(0, 400);
  ASSERT_EQ(body["requests"].size(), 2u);
  EXPECT_EQ(body["requests"][0], lines[0]);
  EXPECT_EQ(body["requests"][1], lines[1]);

  kforge::test::CliResult p = script("pending " + folder);
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_TRUE(has(p.out, "3 unanswered")) << p.out;
  std::string prompt = *kforge::read_file((dir.path() / "pending" / (id1 + ".md")).string());
  EXPECT_TRUE(has(prompt, "You write CUDA kernels.") &&
              has(prompt, "The task: relu over 64 floats.") && has(prompt, "first request"))
      << prompt;
  EXPECT_TRUE(has(prompt, "<!-- system -->") && has(prompt, "<!-- user -->")) << prompt;
  EXPECT_TRUE(
      has(*kforge::read_file((dir.path() / "pending" / (id3 + ".md")).string()), "third request"));

  dir.write("answered/" + id1 + ".md", "```cuda\n// one\n```\n");
  dir.write("answered/" + id3 + ".md", "```cuda\n// three\n```\n");
  kforge::test::CliResult c = script("collect " + folder);
  ASSERT_EQ(c.code, 0) << c.out;
  // Each answer in the format of its request.
  bool anthropic_line = false, openai_line = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().filename().string().rfind("answers-", 0) != 0) continue;
    std::ifstream in(entry.path());
    for (std::string text; std::getline(in, text);) {
      json j = json::parse(text);
      if (j["custom_id"] == id1) {
        anthropic_line = true;
        EXPECT_EQ(j["result"]["type"], "succeeded");
        const json& m = j["result"]["message"];
        EXPECT_EQ(m["type"], "message");
        EXPECT_EQ(m["role"], "assistant");
        EXPECT_EQ(m["model"], "claude-sonnet-4-5");
        EXPECT_EQ(m["stop_reason"], "end_turn");
        EXPECT_EQ(m["content"][0]["type"], "text");
        EXPECT_TRUE(m["usage"]["input_tokens"].is_number_integer() &&
                    m["usage"]["output_tokens"].is_number_integer());
      } else if (j["custom_id"] == id3) {
        openai_line = true;
        EXPECT_EQ(j["response"]["status_code"], 200);
      }
    }
  }
  EXPECT_TRUE(anthropic_line && openai_line);
  // pending again: the answered requests' prompts leave the folder, the unanswered one stays.
  kforge::test::CliResult again = script("pending " + folder);
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("1 unanswered request(s) written to"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("2 answered one(s) removed from it"), std::string::npos) << again.out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "pending" / (id1 + ".md")));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "pending" / (id3 + ".md")));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "pending" / (id2 + ".md")));

  ev::BatchExchange resumed(dir.path(), anthropic_endpoint(), 0ms, 1ms);
  ev::ChatResponse got = resumed.chat(one, 0);
  EXPECT_EQ(got.text, "```cuda\n// one\n```\n");
  EXPECT_GT(got.tokens_in, 0);
  EXPECT_GT(got.tokens_out, 0);
  EXPECT_EQ(ev::BatchExchange(dir.path(), "gpt-5", 0ms, 1ms).chat(three, 0).text,
            "```cuda\n// three\n```\n");
  EXPECT_EQ(resumed.unanswered(), 1);

  // Only the one still unanswered is left to submit; nothing was written twice.
  b = script("anthropic-body " + folder, body_file);
  ASSERT_EQ(b.code, 0) << b.out;
  body = json::parse(*kforge::read_file(body_file));
  ASSERT_EQ(body["requests"].size(), 1u);
  EXPECT_EQ(body["requests"][0]["custom_id"], id2);
  EXPECT_EQ(request_lines(resumed).size(), 3u);
}

// Requests written by hand or by another client: system a string or text blocks, content a string
// or blocks. A malformed Anthropic request is a one-line error naming its line.
TEST(BatchAnthropic, ScriptReadsEveryShapeOfAMessagesRequest) {
  TempDir dir;
  json as_strings = {{"custom_id", "kf-000000000000000000000001"},
                     {"params",
                      {{"model", "claude-x"},
                       {"max_tokens", 100},
                       {"system", "plain system"},
                       {"messages", {{{"role", "user"}, {"content", "plain user"}}}}}}};
  json as_blocks = {{"custom_id", "kf-000000000000000000000002"},
                    {"params",
                     {{"model", "claude-x"},
                      {"max_tokens", 100},
                      {"system",
                       {{{"type", "text"},
                         {"text", "block system"},
                         {"cache_control", {{"type", "ephemeral"}}}}}},
                      {"messages",
                       {{{"role", "user"},
                         {"content",
                          {{{"type", "text"},
                            {"text", "block context"},
                            {"cache_control", {{"type", "ephemeral"}}}},
                           {{"type", "text"}, {"text", "block user"}}}}}}}}}};
  dir.write("requests.jsonl", as_strings.dump() + "\n" + as_blocks.dump() + "\n");
  kforge::test::CliResult p = script("pending " + dir.path().string());
  ASSERT_EQ(p.code, 0) << p.out;
  std::string first =
      *kforge::read_file((dir.path() / "pending/kf-000000000000000000000001.md").string());
  std::string second =
      *kforge::read_file((dir.path() / "pending/kf-000000000000000000000002.md").string());
  EXPECT_TRUE(has(first, "plain system") && has(first, "plain user")) << first;
  EXPECT_TRUE(has(second, "block system") && has(second, "block context\n\nblock user")) << second;

  for (const json& params :
       {json("text"), json{{"model", "m"}}, json{{"model", "m"}, {"messages", json::array()}},
        json{{"model", "m"}, {"messages", {{{"role", "user"}, {"content", 5}}}}},
        json{{"model", "m"}, {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}}}}}}}},
        json{{"model", "m"}, {"system", 5}, {"messages", {{{"role", "user"}, {"content", "x"}}}}},
        json{{"model", 5}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}}) {
    dir.write("requests.jsonl",
              json{{"custom_id", "kf-000000000000000000000003"}, {"params", params}}.dump() + "\n");
    for (const char* cmd : {"pending ", "anthropic-body "}) {
      kforge::test::CliResult r = script(cmd + dir.path().string(), "/dev/null");
      EXPECT_EQ(r.code, 1) << cmd << params.dump() << r.out;
      EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
      EXPECT_FALSE(has(r.out, "Traceback")) << r.out;
      EXPECT_TRUE(has(r.out, "requests.jsonl:1: params")) << r.out;
    }
  }
}

// Issue 40: a run waiting on a batch folder says so (kforge evolve prints a line a minute from
// these reports), once per period whatever the number of requests waiting.
TEST(BatchExchange, AWaitingRequestReportsWhileItWaits) {
  TempDir dir;
  ev::BatchExchange ex(dir.path(), "gpt-5", 450ms, 5ms);
  std::mutex m;
  std::vector<ev::BatchWaiting> reports;
  ex.on_waiting(
      [&](const ev::BatchWaiting& w) {
        std::lock_guard<std::mutex> lock(m);
        reports.push_back(w);
      },
      100ms);
  std::thread other([&] { EXPECT_THROW(ex.chat({"", "another request", 1.0, 10}), ev::LlmError); });
  EXPECT_THROW(ex.chat({"", "a request nobody answers", 1.0, 10}), ev::LlmError);
  other.join();
  ASSERT_GE(reports.size(), 1u);  // one at least, however busy the machine
  EXPECT_LE(reports.size(), 5u) << "two waiting requests report once per period between them";
  for (const ev::BatchWaiting& w : reports) {
    EXPECT_EQ(w.unanswered, 2);
    EXPECT_GE(w.waited_s, 0.1);
    EXPECT_NEAR(w.limit_s, 0.45, 1e-9);
    EXPECT_EQ(w.dir, dir.path());
  }
}

}  // namespace
