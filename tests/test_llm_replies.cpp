// Model replies and their accounting (issue 34, second round): what a hostile or unlucky endpoint
// sends back, through the real HTTP client against loopback servers, the batch folder and the loop.
// Replies cut at the token limit are paid failed calls; usage is bounded; ideas answers and logs
// with megabyte lines parse without std::regex; an echoed key never reaches the cache or the
// output; Retry-After is capped; only http(s) is spoken. Plus the fuzz target of model replies.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <set>
#include <thread>

#include "fuzz_util.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/hash.h"
#include "kforge/common/secrets.h"
#include "kforge/evolve/batch.h"
#include "kforge/evolve/llm.h"
#include "kforge/evolve/prompt.h"
#include "kforge/evolve/proposer.h"
#include "kforge/evolve/run.h"
#include "llm_test_util.h"
#include "loop_rig.h"
#include "loopback_model.h"

namespace {

using namespace kforge;
using namespace kforge::evolve;
using namespace std::chrono_literals;
using kforge::test::Rig;
using kforge::test::TempDir;
using nlohmann::json;

const char* kKey = "sk-replies-SECRET-0123456789abcdef";

// A loopback endpoint whose replies the test writes whole (status, headers, body).
class RawEndpoint {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  explicit RawEndpoint(Handler h) : handler_(std::move(h)) {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      ++requests_;
      handler_(req, res);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~RawEndpoint() {
    server_.stop();
    thread_.join();
  }
  Endpoint endpoint(Provider p) const {
    Endpoint e;
    e.provider = p;
    e.base_url = "http://127.0.0.1:" + std::to_string(port_) + (p == Provider::OpenAI ? "/v1" : "");
    e.model = "hostile";
    e.api_key = kKey;
    return e;
  }
  int requests() const { return requests_; }

 private:
  httplib::Server server_;
  Handler handler_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> requests_{0};
};

// llm_server.py's reasoning-only and anthropic-thinking-only modes.
const std::string kReasoningOnly =
    R"({"id": "x", "model": "hostile", "choices": [{"index": 0, "message": {"role": "assistant", "content": null, )"
    R"("reasoning_content": "thinking thinking"}, "finish_reason": "length"}], "usage": {"prompt_tokens": 20000, "completion_tokens": 16384}})";
const std::string kThinkingOnly =
    R"({"content": [{"type": "thinking", "thinking": "deep thoughts", "signature": "x"}], "usage": {"input_tokens": 500, )"
    R"("output_tokens": 8000}, "stop_reason": "max_tokens"})";

RetryPolicy quick(int attempts = 5) {
  return kforge::test::quick_policy(attempts);
}

std::shared_ptr<const tasks::Task> relu() {
  return std::make_shared<const tasks::Task>(tasks::load_task(
      tasks::resolve_tasks("smoke/relu", (kforge::test::source_dir() / "tasks").string()).at(0)));
}

RunConfig loop_config() {
  RunConfig c;
  c.tasks = {"smoke/relu"};
  c.generations = 2;
  c.children = 0;  // the LLM's children alone
  c.llm_children = 2;
  c.judge_top = 1;
  c.islands = 1;
  c.tuner.exhaustive_max = 8;
  c.operators = {1, 0, 0};
  return c;
}

// Runs `body` in a forked child: "" when it returned true, else how it failed (a crash is a
// failure of this test, not the end of the test binary).
std::string in_child(const std::function<bool()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    bool ok = false;
    try {
      ok = body();
    } catch (...) {
    }
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return std::string("the child died of ") + strsignal(WTERMSIG(status));
  return WEXITSTATUS(status) == 0 ? "" : "the child's check failed";
}

const auto run_cli = kforge::test::run_command;

std::string grep_dir(const std::string& dir, const std::string& what) {
  auto [rc, out] = run_cli("grep -rl -F -- '" + what + "' " + dir + " | wc -l");
  return out;
}

// ---- A reply cut at the token limit; every reply's usage counts ----

TEST(LlmReplies, ReplyCutAtTheTokenLimitIsOnePaidFailedCallWithItsFinishReason) {
  for (Provider provider : {Provider::OpenAI, Provider::Anthropic}) {
    bool openai = provider == Provider::OpenAI;
    RawEndpoint server([&](const httplib::Request&, httplib::Response& res) {
      res.set_content(openai ? kReasoningOnly : kThinkingOnly, "application/json");
    });
    LlmClient client(server.endpoint(provider), quick(5), [](auto) {});
    try {
      client.chat({"", "hi", 1.0, 16384});
      ADD_FAILURE() << "a reply without answer text was accepted";
    } catch (const LlmError& e) {
      EXPECT_EQ(e.kind(), LlmError::Kind::CutOff) << e.what();
      EXPECT_EQ(e.tokens_in, openai ? 20000 : 500);
      EXPECT_EQ(e.tokens_out, openai ? 16384 : 8000);
      EXPECT_EQ(e.finish_reason, openai ? "length" : "max_tokens");
      EXPECT_NE(std::string(e.what()).find("raise max_tokens"), std::string::npos) << e.what();
    }
    EXPECT_EQ(server.requests(), 1) << "a paid reply is not asked again by the client";
  }
}

TEST(LlmReplies, RepliesCutAtTheTokenLimitCountAgainstTheBudgetsAndStopTheRun) {
  RawEndpoint server([](const httplib::Request&, httplib::Response& res) {
    res.set_content(kReasoningOnly, "application/json");
  });
  auto proposer = [&] {
    ModelConfig m;
    m.spec = "openai:hostile";
    m.price_input_per_mtok = 10, m.price_output_per_mtok = 40;  // cfg/price_ro.toml
    auto client =
        std::make_shared<const LlmClient>(server.endpoint(Provider::OpenAI), quick(5), [](auto) {});
    return std::make_unique<LlmProposer>(std::vector<Voice>{{m, client}},
                                         (kforge::test::source_dir() / "prompts").string(),
                                         "a test GPU");
  };
  const int64_t per_reply = 20000 + 16384;
  {
    // No budget: each child is asked twice (the retry of a cut-off reply), each reply paid.
    Rig rig;
    auto llm = proposer();
    RunSummary r =
        run_evolution(loop_config(), {relu()}, *rig.evaluator, std::nullopt, {}, llm.get());
    EXPECT_EQ(server.requests(), 2 * 2 * 2) << "2 generations x 2 children x (1 + 1 retry)";
    EXPECT_EQ(r.llm.calls, 0);
    EXPECT_EQ(r.llm.failed_calls, 8);
    EXPECT_EQ(r.llm.tokens(), 8 * per_reply);
    EXPECT_NEAR(r.llm.cost_usd, 8 * (20000 * 10 + 16384 * 40) / 1e6, 1e-9);
    // The children are recorded with why they failed, the finish reason among it (one candidate:
    // their empty sources are one identity).
    EXPECT_GE(
        rig.count("SELECT count(*) FROM compiles WHERE errors LIKE '%finish_reason: length%'"), 1);
  }
  {
    // budget.toml: llm_tokens = 1000, llm_dollars = 0.01. The first reply spends it: no retry, no
    // new request; only those already in flight (at most a generation's children) come back.
    Rig rig;
    int before = server.requests();
    RunConfig c = loop_config();
    c.generations = 8;
    c.llm_tokens = 1000;
    c.llm_dollars = 0.01;
    auto llm = proposer();
    RunSummary r = run_evolution(c, {relu()}, *rig.evaluator, std::nullopt, {}, llm.get());
    int sent = server.requests() - before;
    EXPECT_GE(sent, 1);
    EXPECT_LE(sent, c.llm_children) << "requests went past the spent budget";
    EXPECT_EQ(r.stopped, "LLM token budget reached");
    EXPECT_EQ(r.llm.failed_calls, sent);
    EXPECT_EQ(r.llm.tokens(), sent * per_reply);
  }
}

// ---- Implausible usage ----

TEST(LlmReplies, ImplausibleUsageIsABadReplyChargedAtItsBound) {
  auto body = [](const std::string& in, const std::string& out) {
    return R"({"choices": [{"message": {"content": "pong"}}], "usage": {"prompt_tokens": )" + in +
           R"(, "completion_tokens": )" + out + "}}";
  };
  for (const auto& [in, out] : std::vector<std::pair<std::string, std::string>>{
           {"9.2e18", "9.2e18"},
           {"9223372036854775807", "9223372036854775807"},
           {"18446744073709551615", "5"},
           {"1e300", "5"},
           {"10000001", "1"}}) {
    try {
      parse_reply(Provider::OpenAI, body(in, out));
      ADD_FAILURE() << "accepted usage " << in << ", " << out;
    } catch (const LlmError& e) {
      EXPECT_EQ(e.kind(), LlmError::Kind::BadResponse);
      EXPECT_NE(std::string(e.what()).find("implausible"), std::string::npos) << e.what();
      EXPECT_EQ(e.tokens_in, kMaxReplyTokens) << in;
      EXPECT_LE(e.tokens_out, kMaxReplyTokens) << out;
      EXPECT_TRUE(e.paid());
    }
  }
  try {
    parse_reply(Provider::OpenAI, body("1e400", "5"));  // past a double: not JSON, nothing reported
    ADD_FAILURE() << "1e400 accepted";
  } catch (const LlmError& e) {
    EXPECT_FALSE(e.paid()) << e.what();
  }
  EXPECT_THROW(parse_reply(Provider::OpenAI, body("\"100\"", "\"x\"")), LlmError);  // not numbers
  EXPECT_THROW(parse_reply(Provider::OpenAI, body("[[[[1]]]]", "1")), LlmError);
  ChatResponse fractional =
      parse_reply(Provider::OpenAI, body("1.5", "2.7"));  // llm_server.py usage-float
  EXPECT_EQ(fractional.tokens_in, 1);
  EXPECT_EQ(fractional.tokens_out, 2);
  ChatResponse edge = parse_reply(Provider::OpenAI, body(std::to_string(kMaxReplyTokens), "0"));
  EXPECT_EQ(edge.tokens_in, kMaxReplyTokens);
  // Through the client: one request, charged at the bound, and the sums never wrap.
  RawEndpoint server([&](const httplib::Request&, httplib::Response& res) {
    res.set_content(body("9.2e18", "9.2e18"), "application/json");
  });
  LlmClient client(server.endpoint(Provider::OpenAI), quick(5), [](auto) {});
  try {
    client.chat({"", "hi", 1.0, 10});
    ADD_FAILURE() << "9.2e18 tokens accepted";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.tokens_in + e.tokens_out, 2 * kMaxReplyTokens);
  }
  EXPECT_EQ(server.requests(), 1);
  LlmSpent a, b;
  a.tokens_in = b.tokens_in = INT64_MAX - 5;
  a.tokens_out = b.tokens_out = INT64_MAX - 5;
  a.add(b);
  EXPECT_EQ(a.tokens_in, INT64_MAX);
  EXPECT_EQ(a.tokens(), INT64_MAX);
}

// ---- No std::regex on model text: ideas answers and logs with megabyte lines ----

TEST(LlmReplies, IdeasWithAMegabyteLineParseInLinearTime) {
  std::string huge(1 << 20, 'a');
  std::string failed = in_child([&] {
    std::vector<std::string> ideas = parse_ideas("1. " + huge + "\n2. b\n3. c\n", 3);
    return ideas.size() == 3 && ideas[0].size() == kMaxIdeaBytes && ideas[1] == "b" &&
           ideas[2] == "c" && parse_ideas(std::string(1 << 20, '1') + ".\n", 3).empty() &&
           parse_ideas("**Idea " + huge, 3).empty();
  });
  EXPECT_EQ(failed, "");
  // The regex's forms, kept: bullets, bold, "Idea N:", CRLF lines, three digits are no number.
  std::vector<std::string> ideas =
      parse_ideas("- **1.** Tiles\r\n* 2) Unroll\r\n  more\r\n**Idea 3:** Vectorise\n", 5);
  ASSERT_EQ(ideas.size(), 3u);
  EXPECT_EQ(ideas[0], "Tiles");
  EXPECT_EQ(ideas[1], "Unroll\n  more");
  EXPECT_EQ(ideas[2], "Vectorise");
  EXPECT_TRUE(parse_ideas("100. no\n", 3).empty());
  EXPECT_EQ(parse_ideas("IDEA 1. x\n", 3), std::vector<std::string>{"x"});
}

std::string relu_answer() {
  return *read_file((kforge::test::source_dir() / "tasks/smoke/seeds/relu.md").string());
}
bool asks_for_ideas(const std::string& prompt) {
  return prompt.find("distinct optimisation ideas as a numbered list") !=
         std::string::npos;  // prompts/ideas.md
}
std::string long_line_ideas() {
  return "1. " + std::string(1 << 20, 'a') + "\n2. Unroll by four.\n3. Use float4.\n";
}

RunConfig ideas_config() {
  RunConfig c = loop_config();
  c.generations = 1;
  c.llm_children = 1;
  c.operators = {0, 0, 1};
  c.ideas_count = 3;
  return c;
}

TEST(LlmReplies, IdeasAnswerWithAMegabyteLineThroughTheHttpClient) {
  std::atomic<int> marked{0};
  kforge::test::LoopbackModel model([&](const std::string& prompt) -> std::optional<std::string> {
    if (asks_for_ideas(prompt)) return long_line_ideas();
    std::string a = relu_answer();
    return a.insert(a.find("```cuda\n") + 8, "// idea child " + std::to_string(++marked) + "\n");
  });
  Rig rig;
  auto llm = model.proposer((rig.dir.path() / "cache").string());
  RunSummary r =
      run_evolution(ideas_config(), {relu()}, *rig.evaluator, std::nullopt, {}, llm.get());
  EXPECT_EQ(r.llm.failed_calls, 0);
  EXPECT_EQ(rig.count("SELECT count(*) FROM candidates WHERE prompt_kind = 'idea'"), 3);
  for (const std::string& p : model.prompts())
    EXPECT_LT(p.size(), 512u << 10) << "an idea is cut at kMaxIdeaBytes";
}

// Answers each request line of a batch folder as it appears (as a batch API would).
class BatchAnswerer {
 public:
  BatchAnswerer(std::filesystem::path dir,
                std::function<std::string(const std::string& prompt)> answer)
      : dir_(std::move(dir)), thread_([this, answer = std::move(answer)] {
          std::set<std::string> done;
          while (!stop_) {
            std::string requests = read_file((dir_ / "requests.jsonl").string()).value_or("");
            std::istringstream lines(requests);
            for (std::string line; std::getline(lines, line);) {
              json j = json::parse(line, nullptr, false);
              if (j.is_discarded() || !done.insert(j.value("custom_id", "")).second) continue;
              json body = {{"model", "batch"},
                           {"choices",
                            {{{"index", 0},
                              {"message",
                               {{"role", "assistant"},
                                {"content", answer(j["body"]["messages"].back()["content"])}}}}}},
                           {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 3}}}};
              std::ofstream(dir_ / "answers.jsonl", std::ios::app)
                  << json{{"custom_id", j["custom_id"]},
                          {"response", {{"status_code", 200}, {"body", body}}},
                          {"error", nullptr}}
                         .dump()
                  << "\n";
            }
            std::this_thread::sleep_for(10ms);
          }
        }) {}
  ~BatchAnswerer() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::filesystem::path dir_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(LlmReplies, IdeasAnswerWithAMegabyteLineThroughTheBatchFolder) {
  Rig rig;
  std::filesystem::path dir = rig.dir.path() / "batch";
  std::filesystem::create_directories(dir);
  std::atomic<int> marked{0};
  BatchAnswerer answerer(dir, [&](const std::string& prompt) {
    if (asks_for_ideas(prompt)) return long_line_ideas();
    std::string a = relu_answer();
    return a.insert(a.find("```cuda\n") + 8, "// idea child " + std::to_string(++marked) + "\n");
  });
  auto exchange = std::make_shared<BatchExchange>(dir, "batch", 30s, 10ms);
  LlmProposer llm(exchange, (kforge::test::source_dir() / "prompts").string(), "a test GPU");
  RunSummary r = run_evolution(ideas_config(), {relu()}, *rig.evaluator, std::nullopt, {}, &llm);
  EXPECT_EQ(r.llm.failed_calls, 0);
  EXPECT_EQ(rig.count("SELECT count(*) FROM candidates WHERE prompt_kind = 'idea'"), 3);
}

// Prompt memory reads sanitizer and compiler logs of model-written kernels: megabyte lines.
TEST(LlmReplies, FailureMemoryReadsMegabyteLogLines) {
  TempDir dir;
  auto task = relu();
  archive::Archive ar = archive::Archive::open((dir.path() / "a.db").string());
  archive::TaskId tid = ar.upsert_task(*task);
  auto add = [&](const std::string& name, const std::string& at,
                 std::optional<archive::CompileRecord> compile,
                 std::vector<archive::EvaluationRecord> evaluations) {
    archive::NewCandidate c;
    c.task = tid;
    c.source = "__global__ void " + name + "() {}\n";
    c.identity = content_hash(c.source);
    c.created_at = at;
    if (compile) compile->created_at = at;
    for (auto& e : evaluations) e.harness_version = 1, e.created_at = at;
    ar.add_candidate(c, compile, evaluations);
  };
  archive::CompileRecord failed;
  failed.stage = "compile";
  failed.errors = {"x.md:3: error: " + std::string(1 << 20, '7') + "\n1 error detected"};
  add("c", "2025-01-01T00:01:00.000Z", failed, {});
  archive::CompileRecord ok;
  ok.ok = true;
  ok.stage = "passed";
  archive::EvaluationRecord oob;
  oob.outcome = "out_of_bounds_write";
  oob.evidence = {
      {"detail",
       {{"memcheck",
         "========= Invalid __global__ write of size 4 bytes\n=========     at relu_k+0x90 in "
         "x.cu:5 " +
             std::string(1 << 20, 'x') + "\n========= " + std::string(1 << 20, '=') + "\n"}}}};
  add("m", "2025-01-01T00:02:00.000Z", ok, {oob});
  archive::EvaluationRecord oob2 = oob;
  oob2.evidence = {
      {"detail",
       {{"memcheck",
         "========= Invalid __global__ read of size 16 bytes\n=========     at k+0x10\n"}}}};
  add("n", "2025-01-01T00:03:00.000Z", ok, {oob2});
  std::string failures;
  std::string crashed = in_child([&] {
    PromptInputs in;
    in.task = task.get();
    auto ref = tasks::Reference::compile(*task);
    in.reference = &ref;
    in.archive = &ar;
    in.device = "a test GPU";
    std::string f = prompt_context(in).at("failures");
    // The short log as the regex made it: the message and the line after, "=========" made one
    // space.
    return f.find("Invalid __global__ read of size 16 bytes at k+0x10") != std::string::npos &&
           f.find("Invalid __global__ write of size 4 bytes at relu_k+0x90") != std::string::npos &&
           f.find("error: 7777") != std::string::npos;
  });
  EXPECT_EQ(crashed, "");
}

// ---- An echoed key ----

TEST(LlmReplies, EchoedKeyNeverReachesTheCacheOrThePing) {
  RawEndpoint server([](const httplib::Request& req,
                        httplib::Response& res) {  // llm_server.py echo-key-200
    std::string auth = req.get_header_value("Authorization") + req.get_header_value("x-api-key");
    json reply = {{"model", "hostile " + auth},
                  {"choices",
                   {{{"message", {{"content", "you sent " + auth}, {"reasoning_content", auth}}}}}},
                  {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 1}}}};
    res.set_content(reply.dump(), "application/json");
  });
  TempDir dir;
  std::string cache = (dir.path() / "llm").string();
  {
    LlmClient client(server.endpoint(Provider::OpenAI), quick(2), {}, nullptr,
                     std::make_shared<ResponseCache>(cache));
    ChatResponse r = client.chat({"", "hi", 1.0, 10});
    EXPECT_EQ(r.text.find(kKey), std::string::npos) << r.text;
    EXPECT_NE(r.text.find("[redacted]"), std::string::npos) << r.text;
    EXPECT_EQ(r.reasoning.find(kKey), std::string::npos);
    EXPECT_TRUE(client.chat({"", "hi", 1.0, 10}).cached);
  }
  EXPECT_EQ(grep_dir(cache, kKey), "0\n") << "the key reached the response cache";
  EXPECT_EQ(grep_dir(cache, std::string(kKey).substr(8, 12)), "0\n")
      << "part of the key reached the response cache";
  std::string env = "OPENAI_BASE_URL=" + server.endpoint(Provider::OpenAI).base_url +
                    " OPENAI_API_KEY=" + kKey + " ";
  auto [rc, out] = run_cli(env + KFORGE_BINARY + " llm ping --model openai:m");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find(kKey), std::string::npos) << "the key was printed: " << out;
  EXPECT_EQ(out.find(std::string(kKey).substr(8, 12)), std::string::npos) << out;
  EXPECT_NE(out.find("reply     you sent Bearer [redacted]"), std::string::npos) << out;
}

// ---- Retry-After ----

TEST(LlmReplies, RetryAfterThatIsHugeInfiniteOrNegativeIsCapped) {
  for (std::string value : {"inf", "1e300", "1e400", "nan", "-3", "99999999999999999999",
                            "Wed, 21 Oct 2015 07:28:00 GMT"}) {
    RawEndpoint server([&](const httplib::Request&, httplib::Response& res) {
      res.status = 429;
      res.set_header("Retry-After", value);
      res.set_content(R"({"error": "rate limited"})", "application/json");
    });
    std::vector<std::chrono::milliseconds> waits;
    RetryPolicy p = quick(3);
    p.max_delay = 4000ms;
    LlmClient client(server.endpoint(Provider::OpenAI), p,
                     [&](std::chrono::milliseconds d) { waits.push_back(d); });
    EXPECT_THROW(client.chat({"", "hi", 1.0, 10}), LlmError);
    ASSERT_EQ(waits.size(), 2u) << value;
    for (auto w : waits) {
      EXPECT_GE(w.count(), 0) << value;
      EXPECT_LE(w, p.max_delay) << value;
    }
    if (value == "inf" || value == "1e300" || value == "99999999999999999999") {
      EXPECT_EQ(waits[0], p.max_delay) << value;
    }
  }
}

// ---- Only http and https ----

TEST(LlmReplies, BaseUrlsOtherThanHttpAreRefusedUpFront) {
  for (const char* bad :
       {"file:///etc/passwd#", "FILE:///etc/passwd", "gopher://127.0.0.1:6379/_INFO",
        "dict://127.0.0.1:11211/", "ftp://x/", "http:///etc/passwd", "127.0.0.1:8000/v1", ""}) {
    Endpoint e;
    e.base_url = bad;
    e.model = "m";
    try {
      LlmClient client(e, quick(1));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InputError& err) {
      EXPECT_EQ(err.file(), "OPENAI_BASE_URL") << err.what();
      EXPECT_NE(err.problem().find("must be an http:// or https:// URL"), std::string::npos)
          << err.what();
      EXPECT_NE(err.problem().find("base_url"), std::string::npos) << err.what();
    }
  }
  EXPECT_TRUE(is_http_url("HTTPS://api.openai.com/v1"));
  EXPECT_TRUE(is_http_url("http://127.0.0.1:8000/v1"));
  setenv("ANTHROPIC_BASE_URL", "file:///etc/passwd#", 1);
  try {
    endpoint_from_spec("anthropic:x");
    ADD_FAILURE() << "ANTHROPIC_BASE_URL=file:// accepted";
  } catch (const InputError& err) {
    EXPECT_EQ(err.file(), "ANTHROPIC_BASE_URL");
  }
  unsetenv("ANTHROPIC_BASE_URL");
  // From the command line: no local file printed, no other port reached, a clear error.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  ::fcntl(listener, F_SETFL, O_NONBLOCK);
  std::string gopher =
      "gopher://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/_SET%20x%201";
  for (const std::string& url : {std::string("file:///etc/passwd#"), gopher}) {
    auto [rc, out] = run_cli("OPENAI_BASE_URL='" + url + "' " + KFORGE_BINARY +
                             " llm ping --model openai:m --timeout 2");
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("OPENAI_BASE_URL: must be an http:// or https:// URL"), std::string::npos)
        << out;
    EXPECT_EQ(out.find("root:"), std::string::npos) << "a local file was printed: " << out;
  }
  EXPECT_LT(::accept(listener, nullptr, nullptr), 0) << "gopher:// reached a local port";
  ::close(listener);
  TempDir dir;
  std::string cfg = (dir.path() / "llm.toml").string();
  std::ofstream(cfg) << "[providers.openai]\nbase_url = \"file:///etc/passwd#\"\n[[models]]\nmodel "
                        "= \"openai:x\"\n";  // cfg/llm_base_file.toml
  auto [rc, out] = run_cli(std::string(KFORGE_BINARY) + " llm ping --config " + cfg);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("base_url"), std::string::npos) << out;
  EXPECT_EQ(out.find("root:"), std::string::npos) << out;
}

}  // namespace

// ---- The fuzz target: model replies ----

namespace {

using namespace kforge::test::fuzzing;

// What a reply may hold once parsed: bounded usage, answer text, no key.
std::string check_reply(const ChatResponse& r) {
  if (r.tokens_in < 0 || r.tokens_out < 0 || r.tokens_in > kMaxReplyTokens ||
      r.tokens_out > kMaxReplyTokens)
    return "usage out of bounds: " + std::to_string(r.tokens_in) + ", " +
           std::to_string(r.tokens_out);
  if (r.tokens_cache_read < 0 || r.tokens_cache_write < 0 ||
      r.tokens_cache_read + r.tokens_cache_write > r.tokens_in)
    return "cached tokens out of bounds: " + std::to_string(r.tokens_cache_read) + " + " +
           std::to_string(r.tokens_cache_write) + " of " + std::to_string(r.tokens_in);
  if (r.text.empty()) return "a reply without answer text was accepted";
  if (r.text.find(kKey) != std::string::npos || r.reasoning.find(kKey) != std::string::npos)
    return "the key survived";
  return "";
}
std::string check_error(const LlmError& e) {
  if (e.tokens_in < 0 || e.tokens_out < 0 || e.tokens_in > 10 * kMaxReplyTokens ||
      e.tokens_out > 10 * kMaxReplyTokens)
    return "a failed call's usage out of bounds";
  if (std::string(e.what()).find(kKey) != std::string::npos) return "the key in an error";
  return "";
}

TEST(Fuzz, ModelRepliesThroughTheParserAndTheHttpClient) {
  remember_secret(kKey);
  std::string echo = std::string("you sent Bearer ") + kKey;
  std::vector<std::string> seeds = {
      R"({"id": "x", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "```cuda\n__global__ void k() {}\n```", "reasoning_content": "hmm"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 120, "completion_tokens": 45}})",
      R"({"id": "m", "type": "message", "model": "m", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "1. Tiles\n2. Unroll\n"}], "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 20}})",
      kReasoningOnly,
      kThinkingOnly,
      R"({"choices": [{"message": {"content": [{"type": "text", "text": "pong"}]}}], "usage": {"prompt_tokens": 9.2e18, "completion_tokens": 1.5}})",
      json{{"choices", {{{"message", {{"content", echo}}}, {"finish_reason", "length"}}}},
           {"usage", {{"prompt_tokens", 1}}}}
          .dump(),
      R"({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}})",
      R"({"content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}], "usage": {"input_tokens": 5, "output_tokens": 5}})"};
  std::string failures = fuzz(seeds, 1000, 25, 34, [&](const std::string& body) -> std::string {
    static std::unique_ptr<RawEndpoint> server;  // made in the forked child, on the first HTTP case
    static std::mutex served_mutex;
    static std::string served;
    static int cases = 0;
    for (Provider p : {Provider::OpenAI, Provider::Anthropic}) {
      try {
        ChatResponse r = parse_reply(p, body);
        if (std::string bad = check_reply(r); !bad.empty()) return bad;
        (void)parse_ideas(r.text, 5);
      } catch (const LlmError& e) {
        if (std::string bad = check_error(e); !bad.empty()) return bad;
      } catch (const std::exception& e) {
        return std::string("not an LlmError: ") + e.what();
      }
    }
    (void)parse_ideas(body, 5);
    if (cases++ % 10 != 0) return "";
    // One case in ten through the real client, served by a loopback server.
    if (!server)
      server = std::make_unique<RawEndpoint>([](const httplib::Request&, httplib::Response& res) {
        std::lock_guard<std::mutex> lock(served_mutex);
        res.set_content(served, "application/json");
      });
    {
      std::lock_guard<std::mutex> lock(served_mutex);
      served = body;
    }
    for (Provider p : {Provider::OpenAI, Provider::Anthropic}) {
      RetryPolicy policy = quick(2);
      LlmClient client(server->endpoint(p), policy, [](auto) {});
      try {
        if (std::string bad = check_reply(client.chat({"", "hi", 1.0, 10})); !bad.empty())
          return bad;
      } catch (const LlmError& e) {
        if (std::string bad = check_error(e); !bad.empty()) return bad;
      }
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

// Issue 35: streamed replies (server-sent events of both providers) through the assembler, the
// parser and, one case in ten, the real client served as text/event-stream: an answer or an
// LlmError with plausible usage, never another exception, a crash or a hang.
TEST(Fuzz, StreamedRepliesThroughTheAssemblerAndTheHttpClient) {
  remember_secret(kKey);
  std::vector<std::string> seeds = {
      "data: "
      "{\"model\":\"o4-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
      "\"content\":\"\"}}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"```cuda\\n__global__ void k() "
      "{}\\n```\"},"
      "\"finish_reason\":\"stop\"}]}\n\n"
      "data: "
      "{\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":300,\"prompt_tokens_"
      "details\":"
      "{\"cached_tokens\":1792}}}\n\ndata: [DONE]\n\n",
      "event: message_start\ndata: "
      "{\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":5,"
      "\"cache_read_input_tokens\":3000,\"output_tokens\":1}}}\n\n"
      "event: content_block_start\ndata: "
      "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
      "\"thinking\",\"thinking\":\"\"}}\n\n"
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
      "\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n"
      "event: content_block_start\ndata: "
      "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\","
      "\"text\":\"\"}}\n\n"
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\","
      "\"text\":\"1. Tiles\"}}\n\n"
      "event: message_delta\ndata: "
      "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":"
      "{\"output_tokens\":20}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
      "event: error\ndata: "
      "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"
      "\n\n",
      "data: {\"error\": {\"message\": \"boom\", \"type\": \"server_error\"}}\n\n"};
  std::string failures = fuzz(seeds, 1000, 25, 35, [&](const std::string& events) -> std::string {
    static std::unique_ptr<RawEndpoint> server;  // made in the forked child, on the first HTTP case
    static std::mutex served_mutex;
    static std::string served;
    static int cases = 0;
    for (Provider p : {Provider::OpenAI, Provider::Anthropic}) {
      try {
        ChatResponse r = parse_reply(p, assemble_stream(p, events));
        if (std::string bad = check_reply(r); !bad.empty()) return bad;
      } catch (const LlmError& e) {
        if (std::string bad = check_error(e); !bad.empty()) return bad;
      } catch (const std::exception& e) {
        return std::string("not an LlmError: ") + e.what();
      }
    }
    if (cases++ % 10 != 0) return "";
    if (!server)
      server = std::make_unique<RawEndpoint>([](const httplib::Request&, httplib::Response& res) {
        std::lock_guard<std::mutex> lock(served_mutex);
        res.set_content(served, "text/event-stream");
      });
    {
      std::lock_guard<std::mutex> lock(served_mutex);
      served = events;
    }
    for (Provider p : {Provider::OpenAI, Provider::Anthropic}) {
      LlmClient client(server->endpoint(p), quick(2), [](auto) {});
      try {
        if (std::string bad = check_reply(client.chat({"", "hi", std::nullopt, 10})); !bad.empty())
          return bad;
      } catch (const LlmError& e) {
        if (std::string bad = check_error(e); !bad.empty()) return bad;
      }
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
