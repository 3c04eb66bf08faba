// The GPU workers' wire (evolve/worker_pool.h, remote_gpu.h) against hostile peers, over real
// sockets on loopback: the test plays an outsider without the token, a worker with the token that
// breaks the protocol (beside a real fake worker that does the job), or the parent of a real worker
// process. Nothing from a connection without the token does more than close it; a worker that
// breaks the protocol is taken out, named with the field, and its job goes to another; a worker
// refuses what its parent may not ask.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "fake_gpu.h"
#include "fuzz_util.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/process.h"
#include "kforge/common/sandbox.h"
#include "kforge/evolve/remote_gpu.h"
#include "kforge/evolve/run.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/outcome.h"
#include "kforge/verify/protocol.h"
#include "test_util.h"
// The wire's line reader, which both sides use (internal to evolve/; the fuzz targets read through
// it).
#include "gpu/json_lines.h"

namespace {

using namespace kforge;
using kforge::test::TempDir;
using nlohmann::json;
using namespace std::chrono_literals;
using namespace kforge::test::fuzzing;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One end of a loopback TCP connection, read line by line.
struct Conn {
  int fd = -1;
  std::string buffer;
  explicit Conn(int f) : fd(f) {}
  Conn(Conn&& o) noexcept : fd(o.fd), buffer(std::move(o.buffer)) { o.fd = -1; }
  Conn& operator=(Conn&& o) noexcept {
    std::swap(fd, o.fd);
    std::swap(buffer, o.buffer);
    return *this;
  }
  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
  static Conn dial(const std::string& address) {
    size_t colon = address.rfind(':');
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
    ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &to.sin_addr);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0)
      throw std::runtime_error("cannot connect to " + address);
    return Conn(fd);
  }
  // Sends it all, or stops when the peer closed.
  bool send(const std::string& data) const {
    for (size_t done = 0; done < data.size();) {
      ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // The next line, or nullopt when the peer closed or `timeout` passed.
  std::optional<std::string> line(std::chrono::milliseconds timeout = 20s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    for (size_t nl; (nl = buffer.find('\n')) == std::string::npos;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      until - std::chrono::steady_clock::now())
                      .count();
      pollfd p{fd, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return std::nullopt;
      char chunk[65536];
      ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) return std::nullopt;
      buffer.append(chunk, static_cast<size_t>(n));
    }
    size_t nl = buffer.find('\n');
    std::string out = buffer.substr(0, nl);
    buffer.erase(0, nl + 1);
    return out;
  }
  // True when the peer closed the connection within `timeout`.
  bool closed_within(std::chrono::milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char chunk[65536];
      if (::recv(fd, chunk, sizeof chunk, 0) <= 0) return true;
    }
    return false;
  }
};

// A pool whose worker I writes "{address} {token}" to DIR/wI and then either waits for DIR/go and
// execs `commands[I]`, or (for an empty command) sleeps: the test plays that worker itself.
struct Staged {
  TempDir dir;
  std::string script(const std::vector<std::string>& commands) const {
    std::string d = dir.path().string(), s = "case {worker} in";
    for (size_t i = 0; i < commands.size(); ++i) {
      std::string w = std::to_string(i);
      s += " " + w + ") echo {address} {token} > " + d + "/w" + w + ".tmp; mv " + d + "/w" + w +
           ".tmp " + d + "/w" + w + "; ";
      s += commands[i].empty()
               ? "exec sleep 120;;"
               : "while [ ! -e " + d + "/go ]; do sleep 0.02; done; exec " + commands[i] + ";;";
    }
    return s + " esac";
  }
  // Worker I's {address} and {token}, once its command wrote them.
  std::pair<std::string, std::string> address_and_token(int worker) const {
    std::string f = (dir.path() / ("w" + std::to_string(worker))).string();
    for (int i = 0; i < 1000 && !std::filesystem::exists(f); ++i) std::this_thread::sleep_for(10ms);
    std::string text = read_file(f).value_or(" ");
    size_t space = text.find(' ');
    std::string token = text.substr(space + 1);
    while (!token.empty() && token.back() == '\n') token.pop_back();
    return {text.substr(0, space), token};
  }
  void go() const { std::ofstream(dir.path() / "go") << "go"; }
};

const std::string kFakePoolWorker =
    std::string("'") + KFORGE_FAKE_POOL_WORKER + "' --connect {address} --worker {worker}";
const std::string kFakeGpuWorker =
    std::string("'") + KFORGE_FAKE_GPU_WORKER + "' --connect {address} --worker {worker}";

// ---- The parent's side: outsiders, and workers with the token that break the protocol ----

TEST(WorkerProtocol, NothingAConnectionWithoutTheTokenSendsEndsTheRun) {
  Staged stage;
  evolve::WorkerPoolOptions o;
  o.command = {"/bin/sh", "-c", stage.script({kFakePoolWorker})};
  o.connect_timeout = 20s;
  auto started =
      std::async(std::launch::async, [&] { return std::make_unique<evolve::WorkerPool>(o); });
  std::string address = stage.address_and_token(0).first;
  std::vector<std::string> payloads = {"{\"op\": 1}\n",
                                       "{\"op\": \"hello\", \"worker\": \"0\", \"token\": \"x\"}\n",
                                       "{\"op\": \"hello\", \"worker\": 0, \"token\": 5}\n",
                                       "\xff\xfe garbage\n",
                                       std::string(70000, 'a'),
                                       std::string(100000, '[') + "\n",
                                       "{\"op\": \"hello\", \"worker\": 1e300, \"token\": \"x\"}\n",
                                       "{\"op\": \"hello\", \"worker\": -1, \"token\": null}\n",
                                       "[1, 2]\n",
                                       "\"hello\"\n",
                                       "{\"token\": {}}\n"};
  std::vector<Conn> outsiders;
  for (const std::string& p : payloads) {
    outsiders.push_back(Conn::dial(address));
    outsiders.back().send(p);
  }
  for (int i = 0; i < 300; ++i)
    outsiders.push_back(Conn::dial(address));  // and many that say nothing
  for (size_t i = 0; i < payloads.size(); ++i)
    EXPECT_TRUE(outsiders[i].closed_within(10s))
        << "the pool closes a connection without the token: " << payloads[i].substr(0, 60);
  stage.go();
  std::unique_ptr<evolve::WorkerPool> pool;
  ASSERT_NO_THROW(pool = started.get());
  EXPECT_EQ(pool->alive(), 1);
  evolve::JobResult r = pool->submit({{"value", 21}}, 10s).get();
  ASSERT_FALSE(r.error) << *r.error;
  EXPECT_EQ(r.answer["double"], 42);
}

// Worker 0 is played by the test with the pool's token, worker 1 is the fake pool worker. Worker 0
// gets the first job and answers it with `answer(id)`: it must be taken out with a reason that
// contains `expected`, and worker 1 must do the job.
void expect_taken_out_and_job_done_elsewhere(const std::function<std::string(int64_t)>& answer,
                                             const std::string& expected) {
  Staged stage;
  evolve::WorkerPoolOptions o;
  o.command = {"/bin/sh", "-c", stage.script({"", kFakePoolWorker})};
  o.workers = 2;
  o.connect_timeout = 20s;
  auto started =
      std::async(std::launch::async, [&] { return std::make_unique<evolve::WorkerPool>(o); });
  auto [address, token] = stage.address_and_token(0);
  Conn w0 = Conn::dial(address);
  w0.send(json{{"op", "hello"}, {"worker", 0}, {"token", token}}.dump() + "\n");
  stage.go();
  std::unique_ptr<evolve::WorkerPool> pool = started.get();
  ASSERT_EQ(pool->alive(), 2);
  std::future<evolve::JobResult> f = pool->submit({{"value", 5}}, 60s);
  std::optional<std::string> job = w0.line();
  ASSERT_TRUE(job) << "worker 0 gets the first job";
  std::thread sender([&, id = json::parse(*job)["id"].get<int64_t>()] { w0.send(answer(id)); });
  bool ready = f.wait_for(20s) == std::future_status::ready;
  sender.join();
  ASSERT_TRUE(ready) << "the job was not done elsewhere within 20 s";
  evolve::JobResult r = f.get();
  ASSERT_FALSE(r.error) << *r.error;
  EXPECT_EQ(r.worker, 1);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(r.answer["double"], 10);
  evolve::WorkerState w = pool->workers()[0];
  EXPECT_FALSE(w.alive);
  EXPECT_TRUE(has(w.out_reason, expected)) << w.out_reason;
  EXPECT_TRUE(pool->workers()[1].alive);
}

TEST(WorkerProtocol, AWorkerThatBreaksTheProtocolIsTakenOutNamingTheFieldAndItsJobGoesToAnother) {
  struct Case {
    std::string name;
    std::function<std::string(int64_t)> answer;
    std::string expected;
  };
  std::vector<Case> cases = {
      {"id a string", [](int64_t) { return std::string("{\"op\":\"result\",\"id\":\"x\"}\n"); },
       "id: \"x\""},
      {"op a number", [](int64_t) { return std::string("{\"op\":7}\n"); }, "op: 7"},
      {"id huge",
       [](int64_t) { return std::string("{\"op\":\"result\",\"id\":1e300,\"answer\":{}}\n"); },
       "id: 1e+300"},
      {"another id",
       [](int64_t id) {
         return "{\"op\":\"result\",\"id\":" + std::to_string(id + 1) + ",\"answer\":{}}\n";
       },
       "id: "},
      {"no answer",
       [](int64_t id) { return "{\"op\":\"result\",\"id\":" + std::to_string(id) + "}\n"; },
       "answer"},
      {"not JSON", [](int64_t) { return std::string("this is not JSON\n"); }, "not valid JSON"},
      {"nested 200,000 deep",
       [](int64_t id) {
         return "{\"op\":\"result\",\"id\":" + std::to_string(id) +
                ",\"answer\":" + std::string(200000, '[') + std::string(200000, ']') + "}\n";
       },
       "nested more than"},
      {"a line without end",
       [](int64_t) { return std::string(size_t{40} << 20, 'a'); },  // no newline, ever
       "longer than"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    expect_taken_out_and_job_done_elsewhere(c.answer, c.expected);
  }
}

// A hello with the token whose worker index is not one: the pool says so when none starts.
TEST(WorkerProtocol, AHelloWithTheTokenButNoWorkerIndexIsNamedWhenNoneStarts) {
  for (std::string worker : {"\"0\"", "1e300", "-1", "null", "7"}) {
    SCOPED_TRACE(worker);
    Staged stage;
    evolve::WorkerPoolOptions o;
    o.command = {"/bin/sh", "-c", stage.script({""})};
    o.connect_timeout = 3s;
    auto started =
        std::async(std::launch::async, [&] { return std::make_unique<evolve::WorkerPool>(o); });
    auto [address, token] = stage.address_and_token(0);
    Conn w0 = Conn::dial(address);
    w0.send("{\"op\": \"hello\", \"worker\": " + worker + ", \"token\": \"" + token + "\"}\n");
    try {
      started.get();
      FAIL() << "a pool without a worker";
    } catch (const Error& e) {
      EXPECT_TRUE(has(e.what(), "worker: " + (worker == "1e300" ? std::string("1e+300") : worker)))
          << e.what();
    }
  }
}

// A worker whose first line was refused before its token was read (over 64 KiB, or a token that is
// not a string) is not "a worker that did not connect": the reason says no hello with the token
// came, and how many connections were closed for their first line.
TEST(WorkerProtocol, AWorkerWhoseHelloWasRefusedUnreadIsToldApartFromOneThatNeverConnected) {
  for (bool oversized : {true, false}) {
    SCOPED_TRACE(oversized ? "a hello over 64 KiB" : "a token that is a number");
    Staged stage;
    evolve::WorkerPoolOptions o;
    o.command = {"/bin/sh", "-c", stage.script({""})};
    o.connect_timeout = 3s;
    auto started =
        std::async(std::launch::async, [&] { return std::make_unique<evolve::WorkerPool>(o); });
    auto [address, token] = stage.address_and_token(0);
    Conn w0 = Conn::dial(address);
    w0.send(oversized ? json{{"op", "hello"},
                             {"worker", 0},
                             {"token", token},
                             {"name", std::string(70000, 'x')}}
                                .dump() +
                            "\n"
                      : "{\"op\": \"hello\", \"worker\": 0, \"token\": 5}\n");
    try {
      started.get();
      FAIL() << "a pool without a worker";
    } catch (const Error& e) {
      EXPECT_TRUE(has(e.what(),
                      "no hello with the pool's token came from it within 3000 ms (1 connection(s) "
                      "were closed"))
          << e.what();
      EXPECT_FALSE(has(e.what(), "did not connect")) << e.what();
    }
  }
}

// ---- RemoteGpu: what a worker with the token says of its GPU and its verdicts ----

json good_hello(int worker, const std::string& token) {
  return {{"op", "hello"},
          {"worker", worker},
          {"token", token},
          {"driver", "fake"},
          {"profiler", ""},
          {"harness_version", verify::kHarnessVersion},
          {"measured", nullptr},
          {"pid", 1},
          {"device",
           {{"cc_major", 9},
            {"cc_minor", 0},
            {"clock_khz", 0},
            {"l2_bytes", 0},
            {"max_shared_per_block_optin", 0},
            {"memory_bus_bits", 0},
            {"memory_bytes", 150000000000},
            {"memory_clock_khz", 0},
            {"name", "Fake GPU"},
            {"ordinal", 0},
            {"sm_count", 132},
            {"uuid", "GPU-played-0"}}},
          {"facts",
           {{"arch", "sm_90a"},
            {"max_block", {1024, 1024, 64}},
            {"max_grid", {2147483647, 65535, 65535}},
            {"max_shared_per_block", 232448},
            {"max_threads_per_block", 1024},
            {"measured", false},
            {"num_sms", 132},
            {"warp_size", 32}}}};
}

// A RemoteGpu of worker 0, played by the test (saying `hello`), and worker 1, the fake GPU worker.
struct PlayedRemoteGpu {
  Staged stage;
  std::unique_ptr<evolve::RemoteGpu> gpu;
  std::optional<Conn> w0;
  explicit PlayedRemoteGpu(const std::function<json(json)>& edit_hello) {
    evolve::RemoteGpuOptions o;
    o.pool.command = {"/bin/sh", "-c", stage.script({"", kFakeGpuWorker})};
    o.pool.workers = 2;
    o.pool.env = child_environment();
    o.pool.connect_timeout = 20s;
    o.deadline = 60s;
    auto started =
        std::async(std::launch::async, [&] { return std::make_unique<evolve::RemoteGpu>(o); });
    auto [address, token] = stage.address_and_token(0);
    w0.emplace(Conn::dial(address));
    w0->send(edit_hello(good_hello(0, token)).dump() + "\n");
    stage.go();
    gpu = started.get();
  }
};

std::shared_ptr<const tasks::Task> relu() {
  return std::make_shared<const tasks::Task>(
      tasks::load_task(kforge::test::source_dir() / "tasks/smoke/relu.toml"));
}

std::unique_ptr<evolve::Evaluator> evaluator(const TempDir& dir, evolve::Gpu* gpu) {
  evolve::EvaluatorOptions eo;
  eo.facts = compile::DeviceFacts::for_arch("sm_90a");
  eo.db = (dir.path() / "a.db").string();
  eo.compiler.workers = 1;
  return std::make_unique<evolve::Evaluator>(eo, gpu);
}

TEST(WorkerProtocol, AHelloWithAMissingOrWrongFieldTakesThatWorkerOut) {
  struct Case {
    std::function<json(json)> edit;
    std::string expected;
  };
  std::vector<Case> cases = {
      {[](json h) {
         h["harness_version"] = "3";
         return h;
       },
       "harness_version"},
      {[](json h) {
         h["device"] = "garbage";
         return h;
       },
       "device"},
      {[](json h) {
         h["device"]["cc_major"] = "nine";
         return h;
       },
       "device.cc_major"},
      {[](json h) {
         h.erase("facts");
         return h;
       },
       "facts"},
      {[](json h) {
         h["facts"]["max_block"] = {1, 2};
         return h;
       },
       "facts.max_block"},
      {[](json h) {
         h["measured"] = {{"bandwidth", "fast"}};
         return h;
       },
       "measured"},
      {[](json h) {
         h["driver"] = 5;
         return h;
       },
       "driver"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    std::unique_ptr<PlayedRemoteGpu> played;
    ASSERT_NO_THROW(played = std::make_unique<PlayedRemoteGpu>(c.edit));
    std::vector<evolve::WorkerState> workers = played->gpu->workers();
    EXPECT_FALSE(workers[0].alive);
    EXPECT_TRUE(has(workers[0].out_reason, c.expected)) << workers[0].out_reason;
    EXPECT_TRUE(workers[1].alive);
    EXPECT_EQ(played->gpu->parallel(), 1);
    EXPECT_EQ(played->gpu->device().uuid, "GPU-fake-worker-1");
    EXPECT_NO_THROW(played->gpu->facts());
  }
}

TEST(WorkerProtocol, AVerdictWithAMissingOrWrongFieldTakesTheWorkerOutAndTheJobIsJudgedElsewhere) {
  std::vector<std::pair<json, std::string>> cases = {
      {{{"verdict", {{"outcome", "correct"}}}}, "verdict: no field \"flags\""},
      {{{"verdict", {{"outcome", 5}, {"flags", "x"}, {"timing", json::array()}, {"evidence", 3}}}},
       "verdict.outcome"},
      {{{"verdict", "garbage"}}, "verdict"},
      {"x", "answer"},
      {{{"verdict",
         {{"outcome", "correct"},
          {"flags", json::array()},
          {"summary", ""},
          {"evidence", nullptr},
          {"timing", {{"time", 1}}}}}},
       "timing"},
  };
  TempDir dir;
  for (const auto& [answer, expected] : cases) {
    SCOPED_TRACE(expected);
    PlayedRemoteGpu played([](json h) { return h; });
    ASSERT_EQ(played.gpu->parallel(), 2);
    auto ev = evaluator(dir, played.gpu.get());
    std::shared_ptr<const tasks::Task> task = relu();
    auto seeds = evolve::starting_population(task, ev->archive(), 1, std::nullopt);
    ASSERT_FALSE(seeds.empty());
    evolve::Checked c = ev->check(seeds.at(0));
    ASSERT_TRUE(c.report.ok());
    std::thread w0([&, a = answer] {
      std::optional<std::string> job = played.w0->line();
      if (job)
        played.w0->send(
            json{{"op", "result"}, {"id", json::parse(*job)["id"]}, {"answer", a}}.dump() + "\n");
    });
    verify::Verdict v;
    try {
      v = played.gpu->verify(*task, c);
    } catch (const std::exception& e) {
      w0.join();
      FAIL() << "the run ended: " << e.what();
    }
    w0.join();
    test::FakeGpu local;
    EXPECT_EQ(verify::to_json(v), verify::to_json(local.verify(*task, c)));
    EXPECT_EQ(v.gpu_uuid, "GPU-fake-worker-1");
    std::vector<evolve::WorkerState> workers = played.gpu->workers();
    EXPECT_FALSE(workers[0].alive);
    EXPECT_TRUE(has(workers[0].out_reason, expected)) << workers[0].out_reason;
  }
}

// Baselines come over the wire as one list keyed by kind (verify::BaselineTiming::to_json): a
// malformed entry takes the worker out naming it, and the job is timed by the other worker, whose
// list arrives whole (the fake GPU's four kinds).
TEST(WorkerProtocol, ABaselinesAnswerWithAMissingOrWrongFieldTakesTheWorkerOut) {
  json eager = {{"kind", "eager"}, {"median_ms", 1.0}, {"iqr_ms", 0.0},
                {"min_ms", 1.0},   {"reps", 10},       {"held", true}};
  auto answer = [](json list) {
    json b = {{"math_mode", "ieee"}, {"clocks", json::object()}};
    if (!list.is_null()) b["list"] = list;
    return json{{"baselines", b}};
  };
  json slow = eager;
  slow["median_ms"] = "slow";
  std::vector<std::pair<json, std::string>> cases = {
      {answer(nullptr), "baselines.list: missing"},
      {answer(json::array({slow})), "baselines.list[0].median_ms: \"slow\""},
      {answer(json::array({eager, {{"kind", "compiled"}}})),
       "baselines.list[1]: no field \"absent\""},
      {answer(json::array({eager, {{"kind", "compiled"}, {"absent", std::string(70000, 'x')}}})),
       "baselines.list: the compiled baseline's reason is a string of more than 65536 bytes"},
  };
  for (const auto& [bad, expected] : cases) {
    SCOPED_TRACE(expected);
    PlayedRemoteGpu played([](json h) { return h; });
    std::shared_ptr<const tasks::Task> task = relu();
    std::thread w0([&, a = bad] {
      std::optional<std::string> job = played.w0->line();
      if (job)
        played.w0->send(
            json{{"op", "result"}, {"id", json::parse(*job)["id"]}, {"answer", a}}.dump() + "\n");
    });
    std::optional<verify::Baselines> b;
    try {
      b = played.gpu->baselines(*task);
    } catch (const std::exception& e) {
      w0.join();
      FAIL() << "the run ended: " << e.what();
    }
    w0.join();
    ASSERT_TRUE(b);
    test::FakeGpu local;
    ASSERT_EQ(b->list.size(), baseline_kinds().size());
    EXPECT_EQ(verify::medians(b->list).to_json(),
              verify::medians(local.baselines(*task)->list).to_json());
    EXPECT_EQ(b->gpu_uuid, "GPU-fake-worker-1");
    std::vector<evolve::WorkerState> workers = played.gpu->workers();
    EXPECT_FALSE(workers[0].alive);
    EXPECT_TRUE(has(workers[0].out_reason, expected)) << workers[0].out_reason;
  }
}

// ---- kforge evolve: a worker failure is exit 1 with the reasons, never exit 4 ----

TEST(WorkerProtocol, KforgeEvolveEndsWithExit1WhenNoGpuWorkerIsLeftOrNoneStarts) {
  if (verify::Driver::get().available())
    GTEST_SKIP() << "this machine has a GPU: kforge evolve would check for it";
  TempDir dir;
  std::string common = " --llm none --generations 1 --workers 1 --db " +
                       (dir.path() / "a.db").string() + " --tasks-dir " +
                       (kforge::test::source_dir() / "tasks").string();
  test::CliResult r = test::run_kforge("evolve smoke/relu" + common + " --worker-command \"" +
                                       kFakeGpuWorker + " --die-after 1\"");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "no GPU worker is left")) << r.out;
  EXPECT_TRUE(has(r.out, "worker 0: it ended (exited with status 3)")) << r.out;
  // The fake pool worker's hello names no GPU ("device" is a string): not a GPU worker.
  r = test::run_kforge("evolve smoke/relu" + common + " --worker-command \"" + kFakePoolWorker +
                       "\"");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "worker 0: its hello: ")) << r.out;
}

TEST(WorkerProtocol, KforgeGpuWorkerSaysWhatIsWrongWithItsDevicesList) {
  test::CliResult r = test::run_kforge("gpu-worker --connect 127.0.0.1:1 --worker 1 --devices 0,x");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "'x' is not a GPU number")) << r.out;
}

// ---- The worker's side: the test is its parent ----

struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 4);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
  std::optional<Conn> accept(std::chrono::milliseconds timeout) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    return Conn(::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC));
  }
};

// The fake GPU worker (serve_gpu_jobs) connected to the test; its stderr goes to DIR/err.
struct PlayedParent {
  TempDir dir;
  Listener listener;
  Process worker;
  std::optional<Conn> conn;
  PlayedParent() {
    SpawnOptions s;
    s.argv = {"/bin/sh", "-c",
              std::string("exec '") + KFORGE_FAKE_GPU_WORKER +
                  "' --connect 127.0.0.1:" + std::to_string(listener.port) + " --worker 0 2> " +
                  (dir.path() / "err").string()};
    s.env = child_environment({{"KFORGE_WORKER_TOKEN", "t"}});
    worker = Process::spawn(s);
    conn = listener.accept(20s);
    if (!conn || !conn->line()) throw std::runtime_error("the worker did not say hello");
  }
  std::string stderr_text() const { return read_file((dir.path() / "err").string()).value_or(""); }
  // A baselines job for smoke/relu with `dims` (and its check dims); the worker's answer.
  json baselines(int64_t id, const json& dims, std::optional<json> check_dims = std::nullopt) {
    std::string path = (kforge::test::source_dir() / "tasks/smoke/relu.toml").string();
    std::string text = *read_file(path);
    json task{{"file", path},
              {"text", text},
              {"content_hash", content_hash(text)},
              {"dims", dims},
              {"check_dims", check_dims ? *check_dims : json::array({{{"B", 1}, {"N", 3}}})}};
    conn->send(
        json{{"op", "job"}, {"id", id}, {"job", {{"kind", "baselines"}, {"task", task}}}}.dump() +
        "\n");
    std::optional<std::string> line = conn->line(30s);
    if (!line) return nullptr;
    json r = json::parse(*line);
    EXPECT_EQ(r["id"], id);
    return r["answer"];
  }
};

TEST(WorkerProtocol, AWorkerRefusesDimsThatAreNotTheTasks) {
  PlayedParent parent;
  std::vector<std::pair<json, std::string>> bad = {
      {{{"B", 4}, {"N", -5}}, "N"},  // not positive
      {{{"B", 4}, {"N", 0}}, "N"},
      {{{"B", 4}, {"N", 8}, {"X", 3}}, "X"},  // not a dim of the task
      {{{"B", 4}}, "N"},                      // a dim missing
      {{{"B", 4}, {"N", "8"}}, "N"},          // not an integer
      {json::array({1, 2}), "dims"},
      {{{"B", 4611686018427387904LL}, {"N", 4611686018427387904LL}}, "dims"},  // sizes overflow
  };
  int64_t id = 1;
  for (const auto& [dims, field] : bad) {
    SCOPED_TRACE(dims.dump());
    json a = parent.baselines(id++, dims);
    ASSERT_TRUE(a.is_object()) << "the worker ended: " << parent.stderr_text();
    ASSERT_TRUE(a.contains("error"))
        << "judged at dims " << dims.dump() << ": " << a.dump().substr(0, 200);
    EXPECT_TRUE(has(a["error"].get<std::string>(), "dims")) << a["error"];
    EXPECT_TRUE(has(a["error"].get<std::string>(), field)) << a["error"];
  }
  json a = parent.baselines(id++, {{"B", 4}, {"N", 8}}, json::array({{{"B", -1}, {"N", 3}}}));
  ASSERT_TRUE(a.contains("error")) << a.dump().substr(0, 200);
  EXPECT_TRUE(has(a["error"].get<std::string>(), "check_dims")) << a["error"];
  a = parent.baselines(id++, {{"B", 4}, {"N", 8}});
  EXPECT_TRUE(a.contains("baselines"))
      << "the worker still judges what is right: " << a.dump().substr(0, 200);
}

// A job's kind is one of five spellings on the wire, each read back to its kind: parents and
// workers of other builds keep understanding each other.
TEST(WorkerProtocol, GpuJobKindsKeepTheirWireSpellings) {
  const std::vector<std::pair<evolve::GpuJobKind, std::string>> wire = {
      {evolve::GpuJobKind::Verify, "verify"},
      {evolve::GpuJobKind::Screen, "screen"},
      {evolve::GpuJobKind::Admit, "admit"},
      {evolve::GpuJobKind::Baselines, "baselines"},
      {evolve::GpuJobKind::Profile, "profile"}};
  for (const auto& [kind, name] : wire) {
    EXPECT_EQ(evolve::to_string(kind), name);
    EXPECT_EQ(evolve::gpu_job_kind_from_string(name), kind) << name;
  }
  EXPECT_EQ(evolve::gpu_job_kinds_text(), "verify, screen, admit, baselines, profile");
  for (const char* other : {"", "Verify", "verify ", "judge", "baseline", "hello", "job"})
    EXPECT_EQ(evolve::gpu_job_kind_from_string(other), std::nullopt) << other;
}

// A job of a kind the worker does not know is refused naming the field "kind" (in its own reading
// and in the answer the parent gets), and the worker goes on answering jobs.
TEST(WorkerProtocol, AJobOfAnUnknownKindIsRefusedNamingTheField) {
  std::string path = (kforge::test::source_dir() / "tasks/smoke/relu.toml").string();
  std::string text = *read_file(path);
  tasks::Task task = tasks::load_task(path);
  json t{{"file", path},
         {"text", text},
         {"content_hash", content_hash(text)},
         {"dims", task.dims},
         {"check_dims", task.check_dims}};
  for (const std::string kind : {"judge", "Verify", "baselines "}) {
    SCOPED_TRACE(kind);
    try {
      (void)evolve::read_gpu_job({{"kind", kind}, {"task", t}});
      ADD_FAILURE() << "a job of kind '" << kind << "' was read";
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "the parent's job");
      EXPECT_EQ(e.field(), "kind");
      EXPECT_TRUE(has(e.problem(), json(kind).dump() + " is not a GPU job (verify, screen, admit, "
                                                       "baselines, profile)"))
          << e.what();
    }
  }
  try {  // a kind that is no string: named as wire:: names a field of the wrong type
    (void)evolve::read_gpu_job({{"kind", 3}, {"task", t}});
    ADD_FAILURE() << "a job of kind 3 was read";
  } catch (const InputError& e) {
    EXPECT_TRUE(has(e.what(), "kind")) << e.what();
  }

  PlayedParent parent;
  parent.conn->send(
      json{{"op", "job"}, {"id", 1}, {"job", {{"kind", "judge"}, {"task", t}}}}.dump() + "\n");
  std::optional<std::string> line = parent.conn->line(30s);
  ASSERT_TRUE(line) << "the worker ended: " << parent.stderr_text();
  json r = json::parse(*line);
  EXPECT_EQ(r["id"], 1);
  ASSERT_TRUE(r["answer"].contains("error")) << r.dump().substr(0, 200);
  std::string error = r["answer"]["error"].get<std::string>();
  EXPECT_TRUE(has(error, "kind: \"judge\" is not a GPU job")) << error;
  json a = parent.baselines(2, task.dims);
  EXPECT_TRUE(a.contains("baselines")) << "the worker still answers: " << a.dump().substr(0, 200);
}

TEST(WorkerProtocol, AWorkerEndsWithAClearMessageOnALineThatIsNotAJob) {
  for (const std::string& line : std::vector<std::string>{
           "{\"op\": 5}", "{\"op\": \"job\", \"id\": 1}", "[1]",
           "{\"op\": \"job\", \"id\": {}, \"job\": {}}", std::string(100000, '[')}) {
    SCOPED_TRACE(line.substr(0, 40));
    PlayedParent parent;
    parent.conn->send(line + "\n");
    std::optional<int> status = parent.worker.wait_exit(10s);
    ASSERT_TRUE(status) << "the worker went on";
    EXPECT_EQ(describe_exit(*status), "exited with status 1");
    std::string err = parent.stderr_text();
    EXPECT_TRUE(has(err, "the parent's job line")) << err;
    EXPECT_FALSE(has(err, "[json.exception")) << err;
  }
}

TEST(WorkerProtocol, AWorkerCapsTheParentsLines) {
  PlayedParent parent;
  auto t0 = std::chrono::steady_clock::now();
  std::thread sender([&] { parent.conn->send(std::string(size_t{64} << 20, 'a')); });
  std::optional<int> status = parent.worker.wait_exit(20s);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::shutdown(parent.conn->fd, SHUT_RDWR);
  sender.join();
  ASSERT_TRUE(status) << "the worker kept reading an endless line";
  EXPECT_TRUE(has(parent.stderr_text(), "longer than")) << parent.stderr_text();
  EXPECT_LT(secs, 5.0);
}

// ---- Fuzz: mutated lines into each side's reader ----

// Lines as the reader splits them when `text` arrives in chunks of a size drawn from its length
// (a byte or a few at a time for short texts).
std::vector<std::string> lines_of(const std::string& text, size_t max_bytes) {
  std::vector<std::string> out;
  kforge::LineSplitter reader(max_bytes);
  size_t chunk = text.size() < 20000 ? 1 + text.size() % 13 : 4096 + text.size() % 7 * 9000;
  for (size_t at = 0; at < text.size() && !reader.over_limit(); at += chunk) {
    reader.append(text.data() + at, std::min(chunk, text.size() - at));
    while (std::optional<std::string> line = reader.next()) out.push_back(*line);
  }
  return out;
}

TEST(Fuzz, WorkerProtocolHelloLines) {
  json hello = good_hello(1, "T");
  json measured = {{"uuid", "GPU-x"},
                   {"name", "Fake GPU"},
                   {"driver", 12080},
                   {"read_gbps", 3000.5},
                   {"write_gbps", 2900},
                   {"copy_gbps", 2800},
                   {"peak_tflops", {{"float32", 60.0}, {"bfloat16", 900.0}}}};
  json with_measured = hello;
  with_measured["measured"] = measured;
  std::vector<std::string> seeds = {
      hello.dump() + "\n", with_measured.dump() + "\n", hello.dump(1) + "\n",
      "{\"op\": \"hello\", \"worker\": 0, \"token\": \"T\"}\n" + hello.dump() + "\n"};
  std::string failures = fuzz(seeds, 500, 25, 341, [](const std::string& text) -> std::string {
    for (const std::string& line : lines_of(text, evolve::kMaxHelloBytes)) {
      evolve::HelloLine h = evolve::read_hello(line, "T", 2);
      if (h.problem.empty() && (h.worker < 0 || h.worker > 1))
        return "a hello accepted for worker " + std::to_string(h.worker);
      if (h.problem.empty() && !h.has_token) return "a hello accepted without the token";
      if (h.hello.contains("token")) return "the token kept in the hello";
      if (h.problem.empty()) (void)evolve::hello_problem(h.hello);
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

TEST(Fuzz, WorkerProtocolAnswerLines) {
  verify::TimeStats t{0.5, 0.01, 0.49, 100, true};
  verify::TimingResult timing;
  timing.time = t;
  timing.baselines = {{BaselineKind::Eager, t, "", 0},
                      {BaselineKind::Scripted, t, "", 0},
                      {BaselineKind::Compiled, t, "", 61.5},
                      {BaselineKind::CompiledMaxAutotune, std::nullopt, "no", 0}};
  timing.bytes = 1e9, timing.floor_ms = 0.3;
  timing.math_mode = "ieee";
  timing.device = {{"name", "Fake GPU"}};
  verify::Verdict v;
  v.outcome = verify::Outcome::Correct;
  v.flags = {"a"};
  v.summary = "correct";
  v.evidence = {{"max_abs_err", 0.0}};
  v.timing = timing;
  json list = json::array();
  for (const verify::BaselineTiming& b : timing.baselines) list.push_back(b.to_json());
  json baselines = {{"list", list}, {"math_mode", "ieee"}, {"clocks", json::object()}};
  auto result = [](const json& answer) {
    return json{{"op", "result"}, {"id", 3}, {"answer", answer}}.dump() + "\n";
  };
  std::vector<std::string> seeds = {
      result({{"verdict", verify::to_json(v)}}), result({{"baselines", baselines}}),
      result({{"profile", {{"kernels", json::array()}}}}), result({{"error", "a wrong job"}}),
      result({{"verdict", verify::to_json(verify::Verdict{})}}) + result({{"baselines", nullptr}})};
  std::string failures = fuzz(seeds, 500, 25, 342, [](const std::string& text) -> std::string {
    for (const std::string& line : lines_of(text, evolve::kMaxLineBytes)) {
      evolve::ResultLine r = evolve::read_result(line, 3);
      if (!r.problem.empty()) continue;
      for (evolve::GpuJobKind kind :
           {evolve::GpuJobKind::Verify, evolve::GpuJobKind::Baselines, evolve::GpuJobKind::Profile})
        if (evolve::answer_problem(kind, r.answer).empty() && kind == evolve::GpuJobKind::Verify &&
            !r.answer.contains("error")) {
          try {
            (void)verify::verdict_from_json(r.answer.at("verdict"));
          } catch (const std::exception& e) {
            return std::string("a verdict passed the check yet cannot be read: ") + e.what();
          }
        }
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

TEST(Fuzz, WorkerProtocolJobLines) {
  std::vector<std::string> seeds;
  for (const char* name : {"relu", "vector_add"}) {
    std::string path =
        (kforge::test::source_dir() / "tasks/smoke" / (std::string(name) + ".toml")).string();
    tasks::Task task = tasks::load_task(path);
    std::string text = *read_file(path);
    json t{{"file", path},
           {"text", text},
           {"content_hash", task.content_hash},
           {"dims", task.dims},
           {"check_dims", task.check_dims}};
    seeds.push_back(
        json{{"op", "job"}, {"id", 7}, {"job", {{"kind", "baselines"}, {"task", t}}}}.dump() +
        "\n");
    json cand{{"source", "__global__ void k(float* y, const float* x, int n) {}"},
              {"plan", "[[launch]]\nkernel = \"k\"\n"},
              {"tunables", {{"BLOCK", 256}}}};
    seeds.push_back(json{{"op", "job"},
                         {"id", 8},
                         {"job", {{"kind", "screen"}, {"task", t}, {"candidate", cand}}}}
                        .dump() +
                    "\n");
  }
  std::string failures = fuzz(seeds, 500, 25, 343, [](const std::string& text) -> std::string {
    for (const std::string& line : lines_of(text, evolve::kMaxLineBytes)) {
      try {
        evolve::JobLine j = evolve::read_job_line(line);
        evolve::GpuJob job = evolve::read_gpu_job(j.job);
        for (const tasks::Dims& d : job.task->all_dims())
          for (const auto& [name, value] : d)
            if (value < 1 || !job.task->dims.count(name))
              return "a job accepted at dims " + tasks::format_dims(d);
      } catch (const std::exception& e) {
        if (std::string problem = named(e, "the parent's job"); !problem.empty()) return problem;
      }
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
