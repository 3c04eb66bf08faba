// Untrusted candidates: what NVRTC may read on their behalf, what child processes may see, and
// that no API key reaches a log, the cache, the archive or the terminal (issue: a candidate's
// #include read /etc/passwd and /proc/self/environ into the compile log).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "compile_test_util.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/common/sandbox.h"
#include "kforge/common/secrets.h"
#include "kforge/compile/compiler.h"
#include "kforge/compile/source_check.h"

namespace {

using kforge::test::TempDir;
using namespace kforge::compile;

// A fake key, set in this process's environment before anything reads it (secrets are collected
// from the environment once).
const std::string kFakeKey = "sk-FAKE0KEY-9f8e7d6c5b4a-ZYXWVUTSRQ-0123456789";
const bool kKeySet = [] {
  ::setenv("OPENAI_API_KEY", kFakeKey.c_str(), 1);
  return true;
}();

// Whether `text` holds the fake key or any kSecretWindow-long piece of it.
bool leaks_key(const std::string& text) {
  for (size_t i = 0; i + kforge::kSecretWindow <= kFakeKey.size(); ++i)
    if (text.find(kFakeKey.substr(i, kforge::kSecretWindow)) != std::string::npos) return true;
  return false;
}

std::vector<std::string> problems_of(const std::string& source) {
  return preprocessing_problems(source, candidate_include_dirs());
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// ---- What a source may ask of the preprocessor ------------------------------------------------

TEST(SourceCheck, TheDocumentedHeadersPass) {
  for (const char* src :
       {"#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <mma.h>\n",
        "#include <cub/block/block_reduce.cuh>\n#include <cub/block/block_scan.cuh>\n",
        "#include <cooperative_groups.h>\n#include <cooperative_groups/reduce.h>\n",
        "#include <cstdint>\n#include <cfloat>\n#include \"cuda_fp16.h\"\n  #  include <climits>\n",
        "/* #include \"/etc/passwd\" */\n// #include \"/etc/passwd\"\nconst char* s = \"#include "
        "</etc/passwd>\";\n",
        "#if __has_include(<cuda_fp8.h>)\n#include <cuda_fp8.h>\n#endif\n#define N 4\n#pragma "
        "unroll\n"})
    EXPECT_TRUE(problems_of(src).empty()) << src << "\n" << joined(problems_of(src));
}

TEST(SourceCheck, EveryRouteToAFileOutsideTheHeadersIsRefused) {
  struct Case {
    std::string source, expect;
  };
  std::vector<Case> cases = {
      {"#include \"/etc/passwd\"\n", "an absolute path"},
      {"#include </proc/self/environ>\n", "an absolute path"},
      {"#include <cub/../../../../../etc/passwd>\n", "climbs with '..'"},
      {"#include \"../../etc/passwd\"\n", "climbs with '..'"},
      {"#include \"etc/passwd\"\n", "no such header"},  // relative to NVRTC's working folder
      {"#include \"proc/self/environ\"\n", "no such header"},
      {"#define H \"/etc/passwd\"\n#include H\n", "computed includes"},
      {"#define H <cub/block/block_reduce.cuh>\n#include H\n", "computed includes"},
      {"%:include \"/etc/passwd\"\n", "an absolute path"},  // a digraph
      {"#include /* a comment\n that spans lines */ \"/etc/passwd\"\n", "an absolute path"},
      {"#inc\\\nlude \"/etc/passwd\"\n", "an absolute path"},  // a line splice
      {"  #  include_next \"/etc/hostname\"\n", "an absolute path"},
      {"#embed \"/etc/passwd\"\n", "#embed"},
      {"#if __has_include(\"/etc/shadow\")\n#endif\n", "an absolute path"},
      {"#define ROOT </etc/passwd>\n", "#define holds a file path"},
      {"#define UP \"../x\"\n", "#define holds a file path"},
      {"const char* s = R\"x(\")/*)x\";\n#include \"/etc/passwd\"\n",
       "an absolute path"},  // a raw string
      {std::string("__global__ void k() {}\n") + std::string(1, '\0') +
           "#include \"/etc/passwd\"\n",
       "NUL byte"},
      {"??=include \"/etc/passwd\"\n", "trigraphs"},
  };
  for (const Case& c : cases) {
    std::string all = joined(problems_of(c.source));
    EXPECT_NE(all.find(c.expect), std::string::npos) << "source:\n"
                                                     << c.source << "\nproblems:\n"
                                                     << all;
  }
}

TEST(SourceCheck, KernelNameExpressionsAreNamesWithSimpleTemplateArguments) {
  for (const char* ok : {"relu", "softmax_rows<BLOCK>", "rows<BLOCK, VEC>",
                         "ns::k<256, (BLOCK * 2) / 32>", "k<float, 4>"})
    EXPECT_FALSE(name_expression_problem(ok)) << ok << ": " << *name_expression_problem(ok);
  for (const char* bad :
       {"k<1>\n#include \"/etc/passwd\"", "k<BLOCK>\n#include </proc/self/environ>\n", "k<\"x\">",
        "k(x)", "k<1>;", "1k", "k<1> ", "k<#x>", ""})
    EXPECT_TRUE(name_expression_problem(bad)) << bad;
  EXPECT_TRUE(name_expression_problem(std::string(300, 'k')));
}

// ---- Secrets -----------------------------------------------------------------------------------

TEST(Secrets, RedactionCatchesTheKeyItsPiecesAndItsEscapedForms) {
  ASSERT_TRUE(kKeySet);
  std::string piece = kFakeKey.substr(5, 14);
  nlohmann::json escaped = {{"echo", kFakeKey}};
  std::string unicode;
  for (char c : kFakeKey) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
    unicode += buf;
  }
  for (const std::string& text : {"key=" + kFakeKey + ";", "partial " + piece + " echo",
                                  escaped.dump(), "{\"k\": \"" + unicode + "\"}",
                                  kFakeKey.substr(0, 12) + "...", "..." + kFakeKey.substr(30)}) {
    std::string r = kforge::redact_secrets(text);
    EXPECT_FALSE(leaks_key(r)) << text << " -> " << r;
    EXPECT_NE(r.find(kforge::kRedacted), std::string::npos) << r;
  }
  EXPECT_EQ(kforge::redact_secrets("nothing secret here, sk-kforge"),
            "nothing secret here, sk-kforge");
  kforge::remember_secret("a-key-from-a-config-file-42");
  EXPECT_EQ(kforge::redact_secrets("x a-key-from-a-config-file-42 y"), "x [redacted] y");
}

TEST(Secrets, TheArchiveStoresNoSecret) {
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  {
    kforge::archive::Database db(path, /*create=*/true);
    db.exec("CREATE TABLE t (x TEXT)");
    db.prepare("INSERT INTO t (x) VALUES (?)")
        .bind(1, "log: OPENAI_API_KEY=" + kFakeKey + "\n")
        .step();
  }
  std::string bytes = *kforge::read_file(path);
  EXPECT_FALSE(leaks_key(bytes));
  EXPECT_NE(bytes.find("OPENAI_API_KEY=[redacted]"), std::string::npos);
}

// ---- Child processes ---------------------------------------------------------------------------

TEST(Sandbox, ChildrenGetAMinimalEnvironmentWithoutKeys) {
  ::setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-for-children-000", 1);
  ::setenv("MY_SERVICE_TOKEN", "token-not-for-children-0000", 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  ::setenv("SOME_UNRELATED_SETTING", "x", 1);
  std::string env = joined(kforge::child_environment({{"TMPDIR", "/x"}}));
  EXPECT_EQ(env.find("API_KEY"), std::string::npos) << env;
  EXPECT_EQ(env.find("TOKEN"), std::string::npos) << env;
  EXPECT_EQ(env.find("SOME_UNRELATED_SETTING"), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_VISIBLE_DEVICES=0"), std::string::npos) << env;
  EXPECT_NE(env.find("TMPDIR=/x\n"), std::string::npos) << env;
  EXPECT_FALSE(leaks_key(env));
}

// Exit bits of the confined child: 1 = could not read the allowed file, 2 = could read outside,
// 4 = could not write the writable folder, 8 = could write the read-only folder.
TEST(Sandbox, AConfinedProcessReadsOnlyWhatItWasAllowed) {
  TempDir dir;
  std::string ro = (dir.path() / "ro").string(), rw = (dir.path() / "rw").string(),
              out = (dir.path() / "out").string();
  dir.write("ro/allowed.h", "ok");
  dir.write("rw/.keep", "");
  dir.write("out/secret.txt", "the secret");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    kforge::Confinement c = kforge::confine_files({ro}, {rw});
    if (!c.active) ::_exit(100);
    int bits = 0;
    if (!std::ifstream(ro + "/allowed.h").good()) bits |= 1;
    if (std::ifstream(out + "/secret.txt").good() || std::ifstream("/etc/passwd").good()) bits |= 2;
    if (!std::ofstream(rw + "/new.txt").good()) bits |= 4;
    if (std::ofstream(ro + "/new.txt").good()) bits |= 8;
    ::_exit(bits);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 100)
    GTEST_SKIP() << "this kernel offers no Landlock: " << kforge::confine_files({}, {}).how;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

struct Worker {
  pid_t pid = -1;
  int to = -1, from = -1;
  ~Worker() {
    if (to >= 0) ::close(to);
    if (from >= 0) ::close(from);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// Starts the real kforge-nvrtc-worker with `env`, as the compiler does but without its checks.
void start_worker(Worker& w, const std::string& dir, const std::vector<std::string>& env,
                  const std::string& limit_ms = "60000") {
  int in[2], out[2];
  ASSERT_EQ(::pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::vector<std::string> argv = {KFORGE_WORKER, "--dir", dir, "--time-limit-ms", limit_ms};
  std::vector<char*> a, e;
  for (auto& s : argv) a.push_back(s.data());
  a.push_back(nullptr);
  std::vector<std::string> envs = env;
  for (auto& s : envs) e.push_back(s.data());
  e.push_back(nullptr);
  ASSERT_EQ(::posix_spawn(&w.pid, KFORGE_WORKER, &fa, nullptr, a.data(), e.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  w.to = in[1];
  w.from = out[0];
}

// The worker's next line (its hello, or a reply), or "" after `timeout_ms`.
std::string read_reply(Worker& w, int timeout_ms = 60000) {
  std::string reply;
  char c;
  while (true) {
    pollfd p{w.from, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0 || ::read(w.from, &c, 1) != 1) return reply;
    if (c == '\n') return reply;
    reply += c;
  }
}

std::string ask_worker(Worker& w, const std::string& source, int timeout_ms = 60000) {
  nlohmann::json req = {{"source", source},
                        {"arch", "sm_90a"},
                        {"defines", nlohmann::json::object()},
                        {"names", {"k"}}};
  std::string line = req.dump() + "\n";
  if (::write(w.to, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return "";
  return read_reply(w, timeout_ms);
}

TEST(Sandbox, TheNvrtcWorkerCannotReadFilesOutsideTheHeaders) {
  TempDir dir;
  std::string work = (dir.path() / "work").string();
  dir.write("work/.keep", "");
  auto secret = dir.write("outside/secret.h", "int kforge_secret_marker_42 = 1;\n");
  Worker w;
  // The worker's environment even holds the key here: the confinement alone must keep files out.
  start_worker(w, work, {"OPENAI_API_KEY=" + kFakeKey, "TMPDIR=" + work});
  std::string hello = read_reply(w);
  ASSERT_FALSE(hello.empty());
  std::string how = nlohmann::json::parse(hello).value("confinement", "");
  if (how.rfind("Landlock", 0) != 0) GTEST_SKIP() << "the worker is not confined here: " << how;
  std::string reply =
      ask_worker(w, "#include \"" + secret.string() + "\"\n__global__ void k() {}\n");
  ASSERT_FALSE(reply.empty());
  nlohmann::json j = nlohmann::json::parse(reply);
  EXPECT_FALSE(j["ok"].get<bool>());
  std::string log = j["log"].get<std::string>();
  EXPECT_NE(log.find("Permission denied"), std::string::npos) << log;
  EXPECT_EQ(log.find("kforge_secret_marker_42"), std::string::npos) << log;
  reply = ask_worker(w, "#include \"/proc/self/environ\"\n__global__ void k() {}\n");
  EXPECT_FALSE(leaks_key(reply)) << reply;
  // Headers still compile.
  reply = ask_worker(
      w, "#include <cub/block/block_reduce.cuh>\n__global__ void k(float* x) { x[0] = 1; }\n");
  EXPECT_TRUE(nlohmann::json::parse(reply)["ok"].get<bool>()) << reply;
}

std::string pathological_source(int depth) {
  std::string s = "#define A0 v\n";
  for (int i = 1; i <= depth; ++i)
    s += "#define A" + std::to_string(i) + " (A" + std::to_string(i - 1) + " + A" +
         std::to_string(i - 1) + ")\n";
  return s + "__global__ void k(float* out) { float v = out[1]; out[0] = A" +
         std::to_string(depth) + "; }\n";
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  std::getline(stat, all);
  size_t close = all.rfind(')');
  return !all.empty() && close != std::string::npos && all.size() > close + 2 &&
         all[close + 2] != 'Z';
}

TEST(Sandbox, TheNvrtcWorkerKeepsItsOwnTimeLimit) {
  TempDir dir;
  std::string work = (dir.path() / "work").string();
  dir.write("work/.keep", "");
  Worker w;
  start_worker(w, work, {"TMPDIR=" + work}, "1000");
  ASSERT_FALSE(read_reply(w).empty());  // its hello
  auto t0 = std::chrono::steady_clock::now();
  std::string reply = ask_worker(w, pathological_source(26), 15000);  // the parent never kills it
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(reply.empty()) << reply.substr(0, 200);
  EXPECT_LT(secs, 10.0);
  int status = 0;
  ASSERT_EQ(::waitpid(w.pid, &status, 0), w.pid);
  w.pid = -1;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) << status;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* proc = ::opendir("/proc");
  while (dirent* e = proc ? ::readdir(proc) : nullptr) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string all;
    std::getline(stat, all);
    size_t close = all.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(all.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(pid);
  }
  if (proc) ::closedir(proc);
  return out;
}

TEST(Sandbox, AWorkerEndsWhenItsKforgeIsKilledMidCompile) {
  TempDir dir;
  pid_t kforge = ::fork();
  ASSERT_GE(kforge, 0);
  if (kforge == 0) {  // stands in for a kforge process, compiling something slow in a worker
    CompilerOptions o = kforge::test::private_cache(dir, /*in_process=*/false);
    o.use_cache = false;
    o.time_limit = std::chrono::milliseconds(120000);
    Compiler c(o);
    ModuleRequest r;
    r.source = pathological_source(26);
    r.name_expressions = {"k"};
    c.compile(r);
    ::_exit(0);
  }
  std::vector<pid_t> workers;
  for (int i = 0; i < 200 && workers.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    workers = children_of(kforge);
  }
  ASSERT_EQ(workers.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // into the compile
  ::kill(kforge, SIGKILL);
  ::waitpid(kforge, nullptr, 0);
  auto t0 = std::chrono::steady_clock::now();
  while (alive(workers[0]) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(alive(workers[0])) << "the worker outlived its kforge by 5 s";
}

TEST(Sandbox, WorkersLeaveNoFilesBehind) {
  TempDir dir;
  std::string tmp = (dir.path() / "tmp").string();
  dir.write("tmp/.keep", "");
  dir.write("nvrtc/worker-stale1/lock", "");  // a killed kforge's worker folder
  std::string old_tmpdir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  {
    CompilerOptions o = kforge::test::private_cache(dir, /*in_process=*/false);
    o.use_cache = false;
    Compiler c(o);
    EXPECT_FALSE(std::ifstream((dir.path() / "nvrtc/worker-stale1/lock").string()).good())
        << "stale folder not swept";
    ModuleRequest r;
    r.source = "#include <cub/block/block_reduce.cuh>\n__global__ void k(float* x) { x[0] = 1; }\n";
    r.name_expressions = {"k"};
    Module m = c.compile(r);
    EXPECT_TRUE(m.ok) << m.log;
    EXPECT_TRUE(m.log.find("precompiled") == std::string::npos);
  }
  if (old_tmpdir.empty())
    ::unsetenv("TMPDIR");
  else
    ::setenv("TMPDIR", old_tmpdir.c_str(), 1);
  std::string left;
  for (const std::string& d : {tmp, (dir.path() / "nvrtc").string()}) {
    std::string cmd = "find " + d + " -mindepth 1 -not -name .keep";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) left.append(buf.data(), n);
    ::pclose(p);
  }
  EXPECT_EQ(left, "");
}

TEST(Compile, RefusedSourcesNeverReachNvrtcNorTheCache) {
  TempDir dir;
  CompilerOptions o = kforge::test::private_cache(dir, /*in_process=*/false);
  Compiler c(o);
  ModuleRequest r;
  r.source = "#include \"/proc/self/environ\"\n__global__ void k() {}\n";
  r.name_expressions = {"k"};
  Module m = c.compile(r);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.log.find("kforge did not compile this source"), std::string::npos) << m.log;
  EXPECT_NE(m.log.find("an absolute path"), std::string::npos) << m.log;
  EXPECT_EQ(c.stats().misses, 0);
  r.source = "__global__ void k() {}\n";
  r.name_expressions = {"k<1>\n#include \"/etc/passwd\""};
  m = c.compile(r);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.log.find("kernel name expression"), std::string::npos) << m.log;
}

// The real kforge binary, with the key in its environment, fed each route: nothing of the key (or
// of the files) may come out on the terminal, in the module cache or in the archive.
TEST(Cli, NoRouteLeaksTheKeyOrAFile) {
  TempDir dir;
  auto secret = dir.write("outside/secret.h", "int kforge_secret_marker_42 = 1;\n");
  const std::string relu = "__global__ void relu(const float* x, float* out, long long n) {}\n";
  const std::string plan =
      R"({ "launch": [ { "kernel": "relu", "grid": [1], "block": [32], "args": ["x", "out", "B * N"] } ] })";
  auto answer = [&](const std::string& source, const std::string& p) {
    return "<!-- task: smoke/relu -->\n```cuda\n" + source + "```\n\n```json\n" + p + "\n```\n";
  };
  std::string kernel_injection = plan;
  kernel_injection.replace(kernel_injection.find("\"relu\""), 6,
                           "\"relu<1>\\n#include \\\"/proc/self/environ\\\"\\n\"");
  std::vector<std::string> answers = {
      answer("#include \"/proc/self/environ\"\n" + relu, plan),
      answer("#include \"" + secret.string() + "\"\n" + relu, plan),
      answer("#define H \"/proc/self/environ\"\n#include H\n" + relu, plan),
      answer("%:include \"/proc/self/environ\"\n" + relu, plan),
      answer("#include \"proc/self/environ\"\n" + relu, plan),
      answer("template <int K> __global__ void relu(const float* x, float* out, long long n) {}\n",
             kernel_injection),
  };
  std::string env = "OPENAI_API_KEY=" + kFakeKey +
                    " KFORGE_CACHE_DIR=" + (dir.path() / "cache").string() +
                    " KFORGE_DB=" + (dir.path() / "a.db").string() + " ";
  for (size_t i = 0; i < answers.size(); ++i) {
    auto file = dir.write("answer" + std::to_string(i) + ".md", answers[i]);
    std::string cmd = env + KFORGE_BINARY + " compile --answer " + file.string() +
                      " --task smoke/relu --tasks-dir " +
                      (kforge::test::source_dir() / "tasks").string() + " 2>&1; echo \"exit=$?\"";
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    ::pclose(p);
    EXPECT_FALSE(leaks_key(out)) << out;
    EXPECT_EQ(out.find("kforge_secret_marker_42"), std::string::npos) << out;
    EXPECT_EQ(out.find("root:"), std::string::npos) << out;
    EXPECT_NE(out.find("exit=1"), std::string::npos)
        << "answer " << i << ": a refused candidate, not a crash\n"
        << out;
  }
  std::string stored;
  FILE* p = ::popen(("cat $(find " + dir.path().string() + "/cache -type f) " +
                     dir.path().string() + "/a.db* 2>/dev/null")
                        .c_str(),
                    "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) stored.append(buf.data(), n);
  ::pclose(p);
  EXPECT_FALSE(leaks_key(stored));
  EXPECT_EQ(stored.find("kforge_secret_marker_42"), std::string::npos);
}

}  // namespace
