// The LLM client against a real HTTP server on loopback (cpp-httplib), scripted per test.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kforge/common/files.h"
#include "kforge/evolve/batch.h"
#include "kforge/evolve/config.h"
#include "kforge/evolve/llm.h"
#include "llm_test_util.h"
#include "test_util.h"

namespace {

using namespace kforge::evolve;
using namespace std::chrono_literals;

const char* kKey = "sk-test-SECRET-0123456789";

// A loopback server whose handler the test scripts; records what it received.
class FakeEndpoint {
 public:
  using Handler = std::function<void(int call, const httplib::Request&, httplib::Response&)>;
  explicit FakeEndpoint(Handler h) : handler_(std::move(h)) {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      int call = ++calls_;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        last_auth_ = req.get_header_value("Authorization") + req.get_header_value("x-api-key");
        last_version_ = req.get_header_value("anthropic-version");
        last_body_ = req.body;
        last_path_ = req.path;
      }
      handler_(call, req, res);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~FakeEndpoint() {
    server_.stop();
    thread_.join();
  }
  Endpoint endpoint(Provider p) const {
    Endpoint e;
    e.provider = p;
    e.base_url = "http://127.0.0.1:" + std::to_string(port_) + (p == Provider::OpenAI ? "/v1" : "");
    e.model = "test-model";
    e.api_key = kKey;
    return e;
  }
  int calls() const { return calls_; }
  std::string last_auth() {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_auth_;
  }
  std::string last_path() {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_path_;
  }
  std::string last_version() {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_version_;
  }
  std::string last_body() {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_body_;
  }

 private:
  httplib::Server server_;
  Handler handler_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> calls_{0};
  std::mutex mutex_;
  std::string last_auth_, last_version_, last_body_, last_path_;
};

const std::string kOpenAiOk =
    R"({"id": "x", "model": "test-model", "choices": [{"index": 0, "message": {"role": "assistant", "content": "```cuda\n__global__ void k() {}\n```", "reasoning_content": "thinking..."}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 120, "completion_tokens": 45, "total_tokens": 165}})";
const std::string kAnthropicOk =
    R"({"id": "m", "type": "message", "model": "test-model", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "answer part 1"}, {"type": "redacted_thinking", "data": "zzz"}, {"type": "text", "text": " and 2"}], "usage": {"input_tokens": 10, "output_tokens": 20}})";

using kforge::test::Sleeps;

RetryPolicy fast_policy() {
  RetryPolicy p;
  p.max_attempts = 4;
  p.base_delay = 100ms;
  p.max_delay = 5000ms;
  p.connect_timeout = 2000ms;
  p.total_timeout = 2000ms;
  return p;
}

TEST(Llm, OpenAiAnswerWithReasoningAndUsage) {
  FakeEndpoint server([](int, const httplib::Request&, httplib::Response& res) {
    res.set_content(kOpenAiOk, "application/json");
  });
  LlmClient client(server.endpoint(Provider::OpenAI), fast_policy());
  ChatResponse r = client.chat({"You write CUDA.", "Write relu.", 0.7, 1000});
  EXPECT_NE(r.text.find("__global__"), std::string::npos);
  EXPECT_EQ(r.reasoning, "thinking...");
  EXPECT_EQ(r.tokens_in, 120);
  EXPECT_EQ(r.tokens_out, 45);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(server.last_path(), "/v1/chat/completions");
  EXPECT_EQ(server.last_auth(), std::string("Bearer ") + kKey);
  auto body = nlohmann::json::parse(server.last_body());
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["temperature"], 0.7);
}

TEST(Llm, AnthropicMessagesWithExtraBlocks) {
  FakeEndpoint server([](int, const httplib::Request&, httplib::Response& res) {
    res.set_content(kAnthropicOk, "application/json");
  });
  LlmClient client(server.endpoint(Provider::Anthropic), fast_policy());
  ChatResponse r = client.chat({"sys", "user", 1.0, 100});
  EXPECT_EQ(r.text, "answer part 1 and 2");
  EXPECT_EQ(r.reasoning, "hmm");
  EXPECT_EQ(r.tokens_in, 10);
  EXPECT_EQ(r.tokens_out, 20);
  EXPECT_EQ(server.last_path(), "/v1/messages");
  EXPECT_EQ(server.last_auth(), kKey);
  EXPECT_EQ(server.last_version(), "2023-06-01");
  // The system text as a block the prompt cache may keep (test_llm_wire.cpp has the shapes).
  EXPECT_EQ(nlohmann::json::parse(server.last_body())["system"][0]["text"], "sys");
}

TEST(Llm, RetriesOn429HonouringRetryAfter) {
  FakeEndpoint server([](int call, const httplib::Request&, httplib::Response& res) {
    if (call < 3) {
      res.status = 429;
      res.set_header("Retry-After", "2");
      res.set_content(R"({"error": {"message": "rate limited"}})", "application/json");
      return;
    }
    res.set_content(kOpenAiOk, "application/json");
  });
  Sleeps sleeps;
  LlmClient client(server.endpoint(Provider::OpenAI), fast_policy(), sleeps.fn());
  ChatResponse r = client.chat({"", "hi", 1.0, 10});
  EXPECT_EQ(r.attempts, 3);
  ASSERT_EQ(sleeps.waits.size(), 2u);
  EXPECT_EQ(sleeps.waits[0], 2000ms);
  EXPECT_EQ(sleeps.waits[1], 2000ms);
}

TEST(Llm, RetriesOn500WithExponentialBackoffAndJitter) {
  FakeEndpoint server([](int call, const httplib::Request&, httplib::Response& res) {
    if (call < 4) {
      res.status = 500;
      res.set_content("<html><body>Internal Server Error</body></html>", "text/html");
      return;
    }
    res.set_content(kOpenAiOk, "application/json");
  });
  Sleeps sleeps;
  LlmClient client(server.endpoint(Provider::OpenAI), fast_policy(), sleeps.fn());
  EXPECT_EQ(client.chat({"", "hi", 1.0, 10}).attempts, 4);
  ASSERT_EQ(sleeps.waits.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    auto full = std::chrono::milliseconds(100 << i);
    EXPECT_GE(sleeps.waits[i], full / 2) << i;  // equal jitter: between half and all of 2^i * base
    EXPECT_LE(sleeps.waits[i], full) << i;
  }
}

TEST(Llm, GivesUpWithAClearErrorAndNoKey) {
  FakeEndpoint server([](int, const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content(std::string("overloaded; you sent ") + kKey,
                    "text/plain");  // an endpoint echoing the key
  });
  Sleeps sleeps;
  LlmClient client(server.endpoint(Provider::OpenAI), fast_policy(), sleeps.fn());
  try {
    client.chat({"", "hi", 1.0, 10});
    FAIL();
  } catch (const LlmError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.kind(), LlmError::Kind::Http);
    EXPECT_EQ(e.http_status(), 503);
    EXPECT_NE(msg.find("gave up after 4 attempt(s)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("HTTP 503"), std::string::npos) << msg;
    EXPECT_EQ(msg.find(kKey), std::string::npos) << "the key leaked: " << msg;
    EXPECT_NE(msg.find("[redacted]"), std::string::npos) << msg;
  }
  EXPECT_EQ(server.calls(), 4);
}

TEST(Llm, ClientErrorsAreNotRetried) {
  FakeEndpoint server([](int, const httplib::Request&, httplib::Response& res) {
    res.status = 401;
    res.set_content(R"({"error": {"message": "invalid api key"}})", "application/json");
  });
  LlmClient client(server.endpoint(Provider::OpenAI), fast_policy(), [](auto) {});
  EXPECT_THROW(client.chat({"", "hi", 1.0, 10}), LlmError);
  EXPECT_EQ(server.calls(), 1);
}

TEST(Llm, StalledResponseHitsTheTimeout) {
  FakeEndpoint server([](int call, const httplib::Request&, httplib::Response& res) {
    if (call == 1) std::this_thread::sleep_for(1500ms);  // longer than the client's total timeout
    res.set_content(kOpenAiOk, "application/json");
  });
  RetryPolicy p = fast_policy();
  p.total_timeout = 400ms;
  Sleeps sleeps;
  LlmClient client(server.endpoint(Provider::OpenAI), p, sleeps.fn());
  auto t0 = std::chrono::steady_clock::now();
  ChatResponse r = client.chat({"", "hi", 1.0, 10});
  EXPECT_EQ(r.attempts, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1400ms);  // the first attempt was cut at 400 ms
}

TEST(Llm, TruncatedAndGarbageRepliesAreRetriedThenReported) {
  FakeEndpoint server([](int call, const httplib::Request&, httplib::Response& res) {
    if (call == 1)
      res.set_content(kOpenAiOk.substr(0, 60), "application/json");  // truncated JSON
    else if (call == 2)
      res.set_content(R"({"choices": []})", "application/json");
    else
      res.set_content("<!DOCTYPE html><html>Bad gateway page</html>", "text/html");
  });
  LlmClient client(server.endpoint(Provider::OpenAI), fast_policy(), [](auto) {});
  try {
    client.chat({"", "hi", 1.0, 10});
    FAIL();
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::BadResponse);
    EXPECT_NE(std::string(e.what()).find("not JSON"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.calls(), 4);
}

TEST(Llm, EnormousAnswerArrivesWhole) {
  std::string big(5 << 20, 'x');
  nlohmann::json reply = {{"choices", {{{"message", {{"content", big}}}}}},
                          {"usage", {{"prompt_tokens", 1}, {"completion_tokens", 2}}}};
  std::string body = reply.dump();
  FakeEndpoint server([&](int, const httplib::Request&, httplib::Response& res) {
    res.set_content(body, "application/json");
  });
  LlmClient client(server.endpoint(Provider::OpenAI), fast_policy());
  EXPECT_EQ(client.chat({"", "hi", 1.0, 10}).text.size(), big.size());
}

TEST(Llm, NetworkErrorWhenNothingListens) {
  Endpoint e;
  e.base_url = "http://127.0.0.1:1/v1";  // port 1: refused
  e.model = "m";
  e.api_key = kKey;
  RetryPolicy p = fast_policy();
  p.max_attempts = 2;
  LlmClient client(e, p, [](auto) {});
  try {
    client.chat({"", "hi", 1.0, 10});
    FAIL();
  } catch (const LlmError& err) {
    EXPECT_EQ(err.kind(), LlmError::Kind::Network);
    EXPECT_EQ(std::string(err.what()).find(kKey), std::string::npos);
  }
}

TEST(Llm, ResponseCacheReplaysAndKeepsSamplesDistinct) {
  FakeEndpoint server([](int, const httplib::Request&, httplib::Response& res) {
    res.set_content(kOpenAiOk, "application/json");
  });
  char dir[] = "/tmp/kforge-llm-cache-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto cache = std::make_shared<ResponseCache>(dir);
  LlmClient client(server.endpoint(Provider::OpenAI), fast_policy(), {}, nullptr, cache);
  ChatRequest req{"sys", "write relu", 1.0, 100};
  ChatResponse first = client.chat(req, 0);
  EXPECT_FALSE(first.cached);
  ChatResponse again = client.chat(req, 0);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.text, first.text);
  EXPECT_EQ(again.tokens_out, first.tokens_out);
  EXPECT_EQ(server.calls(), 1);
  EXPECT_FALSE(client.chat(req, 1).cached);  // another sample of the same prompt is a new request
  EXPECT_EQ(server.calls(), 2);
  // Nothing written holds the key.
  std::string grep = std::string("grep -rl '") + kKey + "' " + dir + " | wc -l";
  FILE* p = popen(grep.c_str(), "r");
  char buf[16] = {};
  fread(buf, 1, sizeof buf - 1, p);
  pclose(p);
  EXPECT_EQ(std::string(buf), "0\n");
  std::system((std::string("rm -rf ") + dir).c_str());
}

// Issue 35: a provider's tokens_per_minute holds across its clients; each request is reckoned at
// its estimate (prompt / 4 + max_tokens) until its reply reports what it used (165 here).
TEST(Llm, TokensPerMinuteWaitOnlyForWhatWasReallyUsed) {
  FakeEndpoint server([](int, const httplib::Request&, httplib::Response& res) {
    res.set_content(kOpenAiOk, "application/json");
  });
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  std::vector<std::chrono::milliseconds> waits;
  auto rate = std::make_shared<TokenRate>(
      1000, [&] { return now; },
      [&](std::chrono::milliseconds d) {
        waits.push_back(d);
        now += d;
      });
  LlmClient a(server.endpoint(Provider::OpenAI), fast_policy(), {}, nullptr, nullptr, rate);
  LlmClient b(server.endpoint(Provider::OpenAI), fast_policy(), {}, nullptr, nullptr, rate);
  ChatRequest r{"", "hi", std::nullopt, 600};
  // 600 estimated each; settled to 165: three fit in a minute, two would not on the estimates.
  a.chat(r), b.chat(r), a.chat(r);
  EXPECT_TRUE(waits.empty());
  b.chat(r);  // 3 x 165 + 600 > 1000: waits for the first to leave the window
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_GE(waits[0], std::chrono::seconds(59));
  EXPECT_EQ(server.calls(), 4);
}

TEST(Llm, ConcurrencyLimitCapsRequestsInFlight) {
  std::atomic<int> in_flight{0}, peak{0};
  FakeEndpoint server([&](int, const httplib::Request&, httplib::Response& res) {
    int now = ++in_flight;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(150ms);
    --in_flight;
    res.set_content(kOpenAiOk, "application/json");
  });
  auto limit = std::make_shared<ConcurrencyLimit>(2);
  LlmClient client(server.endpoint(Provider::OpenAI), fast_policy(), {}, limit);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) threads.emplace_back([&] { client.chat({"", "hi", 1.0, 10}); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(server.calls(), 6);
  EXPECT_EQ(peak.load(), 2);
}

const auto run_cli = kforge::test::run_command;

TEST(Llm, PingFromTheCommandLine) {
  FakeEndpoint server([](int, const httplib::Request&, httplib::Response& res) {
    res.set_content(kOpenAiOk, "application/json");
  });
  std::string env = "OPENAI_BASE_URL=" + server.endpoint(Provider::OpenAI).base_url +
                    " OPENAI_API_KEY=" + kKey + " ";
  auto [rc, out] = run_cli(env + KFORGE_BINARY + " llm ping --model openai:test-model");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("tokens    120 in, 45 out"), std::string::npos) << out;
  EXPECT_EQ(out.find(kKey), std::string::npos) << "the key leaked: " << out;
  auto [rc2, out2] = run_cli(std::string("env -u KFORGE_MODEL ") + KFORGE_BINARY + " llm ping");
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("no model configured"), std::string::npos) << out2;
  auto [rc3, out3] = run_cli(std::string("OPENAI_BASE_URL=http://127.0.0.1:1/v1 ") + KFORGE_BINARY +
                             " llm ping --model openai:m --timeout 1");
  EXPECT_EQ(rc3, 1) << out3;
  EXPECT_NE(out3.find("failed"), std::string::npos) << out3;
  // --json: one object per model on stdout (stderr dropped here), the key nowhere.
  auto [rc4, out4] = run_cli("{ " + env + KFORGE_BINARY +
                             " llm ping --model openai:test-model --json 2>/dev/null; }");
  EXPECT_EQ(rc4, 0) << out4;
  nlohmann::json j = nlohmann::json::parse(out4, nullptr, false);
  ASSERT_TRUE(j.is_array()) << out4;
  ASSERT_EQ(j.size(), 1u) << out4;
  EXPECT_EQ(j[0]["ok"], true) << out4;
  EXPECT_EQ(j[0]["tokens_in"], 120) << out4;
  EXPECT_EQ(j[0]["tokens_out"], 45) << out4;
  EXPECT_EQ(out4.find(kKey), std::string::npos) << "the key leaked: " << out4;
  auto [rc5, out5] = run_cli(std::string("{ OPENAI_BASE_URL=http://127.0.0.1:1/v1 ") +
                             KFORGE_BINARY + " llm ping --model openai:m --timeout 1 --json; }");
  EXPECT_EQ(rc5, 1) << out5;
  EXPECT_NE(out5.find("\"ok\": false"), std::string::npos) << out5;
}

// SIGPIPE ignored while a test's server writes to a client that hung up (the Debian build of
// cpp-httplib sends without MSG_NOSIGNAL); restored after, so later children do not inherit it.
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() : old_(std::signal(SIGPIPE, SIG_IGN)) {}
  ~IgnoreSigpipe() { std::signal(SIGPIPE, old_); }

 private:
  void (*old_)(int);
};

TEST(Llm, EndlessBodyIsStoppedAtTheCap) {
  IgnoreSigpipe guard;
  std::atomic<int64_t> sent{0};
  const int64_t give_up = int64_t{256}
                          << 20;  // the server's own bound, so a regression cannot fill the memory
  FakeEndpoint server([&](int, const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink& sink) {
      static const std::string chunk(64 << 10,
                                     ' ');  // never-ending whitespace: JSON that never finishes
      if (sent >= give_up) {
        sink.done();
        return true;
      }
      if (!sink.write(chunk.data(), chunk.size())) return false;
      sent += static_cast<int64_t>(chunk.size());
      return true;
    });
  });
  RetryPolicy p = fast_policy();
  p.max_attempts = 2;
  p.total_timeout = 20000ms;
  p.max_reply_bytes = 1 << 20;
  Sleeps sleeps;
  LlmClient client(server.endpoint(Provider::OpenAI), p, sleeps.fn());
  try {
    client.chat({"", "hi", 1.0, 10});
    FAIL() << "an endless body was accepted";
  } catch (const LlmError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.kind(), LlmError::Kind::BadResponse) << msg;
    EXPECT_NE(msg.find("the reply body passed 1048576 bytes (max_reply_bytes)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("gave up after 2 attempt(s)"), std::string::npos)
        << msg;  // retried like any bad reply
    EXPECT_EQ(msg.find(kKey), std::string::npos) << msg;
  }
  EXPECT_EQ(server.calls(), 2);
  EXPECT_LT(sent.load(), give_up / 2) << "the client read on past its cap";
}

TEST(Llm, DeclaredLengthPastTheCapIsRefusedUnread) {
  std::string body(2 << 20, ' ');
  FakeEndpoint server([&](int, const httplib::Request&, httplib::Response& res) {
    res.set_content(body, "application/json");
  });
  RetryPolicy p = fast_policy();
  p.max_attempts = 1;
  p.max_reply_bytes = 1 << 20;
  LlmClient client(server.endpoint(Provider::OpenAI), p, [](auto) {});
  try {
    client.chat({"", "hi", 1.0, 10});
    FAIL();
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::BadResponse) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_reply_bytes"), std::string::npos) << e.what();
  }
}

TEST(Llm, ServerThatNeverAnswersTimesOut) {
  // A listening socket nobody serves: the kernel completes the connection, no reply ever comes.
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(s, 8), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  Endpoint e;
  e.base_url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/v1";
  e.model = "m";
  RetryPolicy p = fast_policy();
  p.max_attempts = 1;
  p.total_timeout = 300ms;
  LlmClient client(e, p, [](auto) {});
  try {
    client.chat({"", "hi", 1.0, 10});
    ADD_FAILURE() << "a silent server answered";
  } catch (const LlmError& err) {
    EXPECT_EQ(err.kind(), LlmError::Kind::Timeout) << err.what();
    EXPECT_NE(std::string(err.what()).find("timed out"), std::string::npos) << err.what();
  }
  ::close(s);
}

TEST(Llm, TimeoutsMustBeFinitePositiveAndBounded) {
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL, -HUGE_VAL, 1e300, 3600.5}) {
    try {
      checked_timeout(bad, "llm.toml", 3, "providers.openai.timeout");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const kforge::InputError& e) {
      EXPECT_EQ(e.file(), "llm.toml");
      EXPECT_EQ(e.line(), 3);
      EXPECT_EQ(e.field(), "providers.openai.timeout");
      EXPECT_NE(e.problem().find("above 0 and at most 3600"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(checked_timeout(0.0001, "f", std::nullopt, "x"),
            1ms);  // never 0 ms: libcurl's "no limit"
  EXPECT_EQ(checked_timeout(3600, "f", std::nullopt, "x"), 3600000ms);
  EXPECT_EQ(parse_timeout(" 2.5 ", "--timeout"), 2500ms);
  for (const char* bad : {"", " ", "0", "-1", "nan", "inf", "1e300", "10s", "0x", "1e400"}) {
    try {
      parse_timeout(bad, "--timeout");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const kforge::InputError& e) {
      EXPECT_EQ(e.file(), "--timeout");
      EXPECT_NE(e.problem().find("must be a number of seconds"), std::string::npos) << e.what();
    }
  }
  RetryPolicy forever;
  forever.total_timeout = 0ms;  // what a caller skipping the checks would pass
  EXPECT_THROW((void)LlmClient(Endpoint{}, forever), kforge::Error);
  RetryPolicy uncapped;
  uncapped.max_reply_bytes = 0;
  EXPECT_THROW((void)LlmClient(Endpoint{}, uncapped), kforge::Error);
}

TEST(Llm, PingRejectsTimeoutsThatWouldWaitForever) {
  for (const char* bad :
       {"0", "inf", "''"}) {  // each value's rule: TimeoutsMustBeFinitePositiveAndBounded
    auto [rc, out] = run_cli(std::string("OPENAI_BASE_URL=http://127.0.0.1:1/v1 ") + KFORGE_BINARY +
                             " llm ping --model openai:m --timeout " + bad);
    EXPECT_EQ(rc, 2) << bad << ": " << out;
    EXPECT_NE(out.find("--timeout: must be a number of seconds above 0 and at most 3600"),
              std::string::npos)
        << out;
  }
}

TEST(Llm, ModelSpecsAndEnvironment) {
  setenv("OPENAI_BASE_URL", "http://localhost:8000/v1/", 1);
  setenv("OPENAI_API_KEY", "k1", 1);
  Endpoint e = endpoint_from_spec("openai:Qwen/Qwen3-Coder");
  EXPECT_EQ(e.base_url, "http://localhost:8000/v1");
  EXPECT_EQ(e.model, "Qwen/Qwen3-Coder");
  EXPECT_EQ(e.api_key, "k1");
  unsetenv("ANTHROPIC_BASE_URL");
  EXPECT_EQ(endpoint_from_spec("anthropic:claude-x").base_url, "https://api.anthropic.com");
  EXPECT_THROW(endpoint_from_spec("gpt-4.1"), kforge::InputError);
  EXPECT_THROW(endpoint_from_spec("mistral:large"), kforge::InputError);
}

}  // namespace

namespace {

TEST(LlmConfig, LoadsAnEnsembleWithPricesAndRoles) {
  char dir[] = "/tmp/kforge-llmcfg-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/llm.toml";
  std::ofstream(path) << R"([providers.openai]
base_url = "http://127.0.0.1:9/v1/"
api_key_env = "KFORGE_TEST_KEY_VAR"
concurrency = 8
timeout = 90
connect_timeout = 2.5
max_reply_bytes = 1048576

[[models]]
model = "openai:big"
weight = 3
price = { input = 2.0, output = 8.0 }
temperature = { translate = 0.7, repair = 0.2 }

[[models]]
model = "anthropic:small"
)";
  setenv("KFORGE_TEST_KEY_VAR", kKey, 1);
  LlmConfig cfg = load_llm_config(path);
  ASSERT_EQ(cfg.models.size(), 2u);
  EXPECT_EQ(cfg.models[0].temperature_for("repair"), 0.2);
  EXPECT_EQ(cfg.models[0].temperature_for("optimize"), std::nullopt)
      << "not configured: no temperature is sent";
  EXPECT_DOUBLE_EQ(cfg.models[0].cost_usd(1000000, 500000), 2.0 + 4.0);
  // OpenAI-compatible: cached input at the input price unless the file says otherwise.
  EXPECT_DOUBLE_EQ(cfg.models[0].cost_usd(1000000, 500000, 400000), 2.0 + 4.0);
  Endpoint e = cfg.endpoint(cfg.models[0]);
  EXPECT_EQ(e.base_url, "http://127.0.0.1:9/v1");
  EXPECT_EQ(e.api_key, kKey);
  EXPECT_EQ(cfg.providers.at("openai").concurrency, 8);
  RetryPolicy p = cfg.policy(cfg.models[0]);
  EXPECT_EQ(p.total_timeout, 90000ms);
  EXPECT_EQ(p.connect_timeout, 2500ms);
  EXPECT_EQ(p.max_reply_bytes, 1048576);
  EXPECT_EQ(cfg.policy(cfg.models[1]).total_timeout,
            RetryPolicy{}.total_timeout);  // no [providers.anthropic]
  std::mt19937_64 rng(1);
  int big = 0;
  for (int i = 0; i < 4000; ++i) big += cfg.pick(rng).spec == "openai:big";
  EXPECT_NEAR(big / 4000.0, 0.75, 0.03);
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(LlmConfig, ErrorsNameFileLineAndField) {
  char dir[] = "/tmp/kforge-llmcfg-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/llm.toml";
  auto expect = [&](const std::string& text, const std::string& field,
                    const std::string& fragment) {
    std::ofstream(path) << text;
    try {
      load_llm_config(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const kforge::InputError& e) {
      EXPECT_EQ(e.file(), path);
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_NE(e.problem().find(fragment), std::string::npos) << e.what();
    }
  };
  expect("[[models]]\nmodel = \"gpt-4\"\n", "models[0].model", "not PROVIDER:MODEL");
  expect("[[models]]\nmodel = \"openai:x\"\nweight = -1\n", "models[0].weight", "positive");
  expect("[[models]]\nmodel = \"openai:x\"\ntemperature = { judging = 0.1 }\n",
         "models[0].temperature.judging", "unknown role");
  expect("[[models]]\nmodel = \"openai:x\"\nprice = { input = -2 }\n", "models[0].price.input",
         "non-negative");
  // A provider of any name says its API and where it is; a model names a provider there is.
  expect(
      "[providers.mistral]\nbase_url = \"https://api.mistral.ai/v1\"\n[[models]]\nmodel = "
      "\"openai:x\"\n",
      "providers.mistral.api", "missing");
  expect("[providers.mistral]\napi = \"openai\"\n[[models]]\nmodel = \"mistral:x\"\n",
         "providers.mistral.base_url", "missing");
  expect("[[models]]\nmodel = \"mistral:large\"\n", "models[0].model",
         "unknown provider 'mistral'");
  expect("[[models]]\nmodel = \"anthropic:c\"\nthinking_budget = 512\n",
         "models[0].thinking_budget", "at least 1024");
  expect("[[models]]\nmodel = \"anthropic:c\"\nmax_tokens = 2048\nthinking_budget = 2048\n",
         "models[0].thinking_budget", "below max_tokens");
  expect("[[models]]\nmodel = \"anthropic:c\"\nthinking_budget = 2048\ntemperature = 1.0\n",
         "models[0].temperature", "thinking");
  expect("[[models]]\nmodel = \"anthropic:c\"\nreasoning_effort = \"low\"\n",
         "models[0].reasoning_effort", "only for api = \"openai\"");
  expect(
      "[providers.anthropic]\ntoken_limit_field = \"max_tokens\"\n[[models]]\nmodel = "
      "\"openai:x\"\n",
      "providers.anthropic.token_limit_field", "only for api = \"openai\"");
  expect("[providers.openai]\ntokens_per_minute = 0\n[[models]]\nmodel = \"openai:x\"\n",
         "providers.openai.tokens_per_minute", "whole number");
  expect("[providers.openai]\nkey = \"x\"\n[[models]]\nmodel = \"openai:x\"\n",
         "providers.openai.key", "unknown key");
  expect("", "models", "missing");
  for (const char* bad : {"0", "-1", "nan", "inf", "-inf", "1e300", "3601"})
    expect(std::string("[providers.openai]\ntimeout = ") + bad +
               "\n[[models]]\nmodel = \"openai:x\"\n",
           "providers.openai.timeout", "above 0 and at most 3600");
  expect("[providers.openai]\ntimeout = \"60\"\n[[models]]\nmodel = \"openai:x\"\n",
         "providers.openai.timeout", "number of seconds");
  expect("[providers.anthropic]\nconnect_timeout = 0\n[[models]]\nmodel = \"openai:x\"\n",
         "providers.anthropic.connect_timeout", "above 0");
  expect("[providers.openai]\nmax_reply_bytes = 0\n[[models]]\nmodel = \"openai:x\"\n",
         "providers.openai.max_reply_bytes", "number of bytes");
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(LlmConfig, PingsEveryModelWithCostAndNoKeyInTheOutput) {
  FakeEndpoint server([](int, const httplib::Request&, httplib::Response& res) {
    res.set_content(kOpenAiOk, "application/json");
  });
  char dir[] = "/tmp/kforge-llmcfg-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/llm.toml";
  std::ofstream(path) << "[providers.openai]\nbase_url = \""
                      << server.endpoint(Provider::OpenAI).base_url << "\"\napi_key = \"" << kKey
                      << "\"\n[[models]]\nmodel = \"openai:a\"\nprice = { input = 1000.0, output = "
                         "2000.0 }\n[[models]]\nmodel = \"openai:b\"\n";
  auto [rc, out] = run_cli(std::string(KFORGE_BINARY) + " llm ping --config " + path);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("cost      $0.210000"), std::string::npos)
      << out;  // 120 in x $1000/M + 45 out x $2000/M
  EXPECT_EQ(server.calls(), 2);
  EXPECT_EQ(out.find(kKey), std::string::npos) << "the key leaked: " << out;
  std::system((std::string("rm -rf ") + dir).c_str());
}

// Issue 35: the ping is a request a reasoning model can answer (no temperature, room to think),
// with the config's reasoning_effort; its tokens show the prompt cache's share and cost at its
// price.
TEST(LlmConfig, PingSendsNoTemperatureAndShowsTheCachedShare) {
  const std::string reply =
      R"({"id": "x", "model": "test-model", "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 120, "completion_tokens": 45, "total_tokens": 165, "prompt_tokens_details": {"cached_tokens": 100}}})";
  FakeEndpoint server([&](int, const httplib::Request&, httplib::Response& res) {
    res.set_content(reply, "application/json");
  });
  char dir[] = "/tmp/kforge-llmcfg-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/llm.toml";
  std::ofstream(path) << "[providers.local]\napi = \"openai\"\nbase_url = \""
                      << server.endpoint(Provider::OpenAI).base_url
                      << "\"\n[[models]]\nmodel = \"local:m\"\nreasoning_effort = \"low\"\n"
                         "price = { input = 1000.0, output = 2000.0, cached_input = 100.0 }\n";
  auto [rc, out] = run_cli(std::string(KFORGE_BINARY) + " llm ping --config " + path);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("tokens    120 in (100 from the prompt cache), 45 out"), std::string::npos)
      << out;
  EXPECT_NE(out.find("cost      $0.120000"), std::string::npos)
      << out;  // 20 x $1000/M + 100 x $100/M + 45 x $2000/M
  nlohmann::json body = nlohmann::json::parse(server.last_body());
  EXPECT_FALSE(body.contains("temperature")) << body.dump();
  EXPECT_EQ(body.value("model", ""), "m");
  EXPECT_EQ(body.value("reasoning_effort", ""), "low") << body.dump();
  EXPECT_GE(body.value("max_completion_tokens", 0), 1024) << body.dump();
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace

namespace {

// Issue 16: token counts become costs; an endpoint's negative count is a bad reply, not a refund.
TEST(Llm, NegativeTokenCountsAreABadResponse) {
  for (const std::string& usage :
       {std::string(R"({"prompt_tokens": -5000000, "completion_tokens": 45})"),
        std::string(R"({"prompt_tokens": 1, "completion_tokens": 18446744073709551615})")}) {
    std::string body =
        R"({"model": "m", "choices": [{"message": {"content": "hi"}}], "usage": )" + usage + "}";
    try {
      parse_reply(Provider::OpenAI, body);
      ADD_FAILURE() << usage;
    } catch (const LlmError& e) {
      EXPECT_EQ(e.kind(), LlmError::Kind::BadResponse);
      EXPECT_NE(std::string(e.what()).find("negative token count"), std::string::npos) << e.what();
    }
  }
  std::string anthropic =
      R"({"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 3, "output_tokens": -1}})";
  EXPECT_THROW(parse_reply(Provider::Anthropic, anthropic), LlmError);
}

}  // namespace

namespace {

using nlohmann::json;

// A batch output line as the OpenAI Batch API writes it.
std::string batch_output(const std::string& id, const std::string& text, int status = 200) {
  json body = {
      {"model", "m"},
      {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text}}}}}},
      {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 3}}}};
  return json{{"id", "batch_req_1"},
              {"custom_id", id},
              {"response", {{"status_code", status}, {"body", body}}},
              {"error", nullptr}}
      .dump();
}

TEST(Batch, RequestsGoOutAsBatchLinesAndAnswersComeBackWhenTheyAppear) {
  kforge::test::TempDir dir;
  BatchExchange ex(dir.path(), "batch", std::chrono::seconds(20), std::chrono::milliseconds(10));
  ChatRequest r;
  r.system = "sys";
  r.user = "make it fast " + std::string(kKey);  // a secret never reaches the file
  std::string id = ex.custom_id(r, 3);
  EXPECT_NE(id, ex.custom_id(r, 4));
  std::thread answer([&] {
    // Wait for the request line, then write the output: a partial line first, a malformed line,
    // an unrelated answer, then the answer.
    for (int i = 0; i < 2000 && !std::filesystem::exists(ex.requests_file()); ++i)
      std::this_thread::sleep_for(5ms);
    std::ofstream out(dir.path() / "output.jsonl");
    out << batch_output("kf-other", "not yours") << "\n"
        << "{\"custom_id\": \"" << id << "\", \"resp" << std::flush;
    std::this_thread::sleep_for(100ms);
    out << "\n" << batch_output(id, "```cuda\n__global__ void k() {}\n```") << "\n" << std::flush;
  });
  ChatResponse got = ex.chat(r, 3);
  answer.join();
  EXPECT_NE(got.text.find("__global__ void k"), std::string::npos);
  EXPECT_EQ(got.tokens_in, 7);
  EXPECT_EQ(got.tokens_out, 3);
  std::string requests = *kforge::read_file(ex.requests_file().string());
  json line = json::parse(requests.substr(0, requests.find('\n')));
  EXPECT_EQ(line["custom_id"], id);
  EXPECT_EQ(line["method"], "POST");
  EXPECT_EQ(line["url"], "/v1/chat/completions");
  EXPECT_EQ(line["body"]["messages"][1]["role"], "user");
  EXPECT_EQ(requests.find(kKey), std::string::npos) << "the API key reached the requests file";
  // Asked again (a resumed run, a new process): answered from the folder, nothing written twice.
  BatchExchange again(dir.path(), "batch", std::chrono::seconds(1), std::chrono::milliseconds(10));
  EXPECT_EQ(again.chat(r, 3).text, got.text);
  EXPECT_EQ(std::count(requests.begin(), requests.end(), '\n'), 1);
  EXPECT_EQ(kforge::read_file(ex.requests_file().string())->size(), requests.size());
}

TEST(Batch, AnErrorAnswerOrNoAnswerInTimeIsAnLlmError) {
  kforge::test::TempDir dir;
  BatchExchange ex(dir.path(), "batch", std::chrono::milliseconds(300),
                   std::chrono::milliseconds(10));
  ChatRequest r;
  r.user = "a";
  std::ofstream(dir.path() / "out.jsonl") << batch_output(ex.custom_id(r, 0), "x", 429) << "\n";
  try {
    ex.chat(r, 0);
    FAIL() << "a 429 answer was accepted";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.http_status(), 429);
  }
  r.user = "b";
  try {
    ex.chat(r, 0);
    FAIL() << "no answer, yet chat returned";
  } catch (const LlmError& e) {
    EXPECT_EQ(e.kind(), LlmError::Kind::Unanswered);  // the run pauses; a resumed run asks again
  }
}

}  // namespace
