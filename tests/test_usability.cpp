// Issue 17: what a new user meets first — commands, exit codes, --tune, --arch, which task, parents
// of prompts, big checks on the CPU, progress. Each test runs the real binary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/verify/driver.h"
#include "test_util.h"

namespace {

using kforge::test::run_kforge;
using kforge::test::TempDir;
using nlohmann::json;

std::string tasks_dir() {
  return (kforge::test::source_dir() / "tasks").string();
}
std::string source(const std::string& relative) {
  return (kforge::test::source_dir() / relative).string();
}
bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Usability, NoCommandListsTheCommands) {
  auto r = run_kforge("");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "kforge needs a command")) << r.out;
  for (const char* c : {"doctor", "tasks", "compile", "verify", "corpus", "archive", "prompt"})
    EXPECT_TRUE(has(r.out, std::string("  ") + c)) << c << "\n" << r.out;
  auto help = run_kforge("help");
  EXPECT_EQ(help.code, 0) << help.out;
  EXPECT_TRUE(has(help.out, "Commands:")) << help.out;
  EXPECT_FALSE(has(help.out, "__reference")) << help.out;  // the hidden child mode
}

TEST(Usability, MisspeltCommandNamesItAndTheNearest) {
  auto r = run_kforge("verfy x.cu");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "unknown command 'verfy'; did you mean 'verify'?")) << r.out;
  EXPECT_TRUE(has(r.out, "  corpus")) << r.out;
  auto far = run_kforge("frobnicate");
  EXPECT_EQ(far.code, 2);
  EXPECT_TRUE(has(far.out, "unknown command 'frobnicate'")) << far.out;
  EXPECT_FALSE(has(far.out, "did you mean")) << far.out;  // nothing is near
  auto sub = run_kforge("tasks chek smoke --tasks-dir " + tasks_dir());
  EXPECT_EQ(sub.code, 2) << sub.out;
  EXPECT_TRUE(has(sub.out, "kforge tasks: unknown command 'chek'; did you mean 'check'?"))
      << sub.out;
}

TEST(Usability, GroupWithoutSubcommandListsItsSubcommands) {
  auto r = run_kforge("tasks");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "kforge tasks needs a command")) << r.out;
  for (const char* c : {"list", "show", "check"})
    EXPECT_TRUE(has(r.out, std::string("  ") + c)) << r.out;
  auto archive = run_kforge("archive");
  EXPECT_EQ(archive.code, 2);
  EXPECT_TRUE(has(archive.out, "  import")) << archive.out;
  auto help = run_kforge("help tasks check");
  EXPECT_EQ(help.code, 0) << help.out;
  EXPECT_TRUE(has(help.out, "--dims")) << help.out;
}

// --version and --help answer without LibTorch: the front binary does not link it at all.
TEST(Usability, VersionAndHelpDoNotLoadLibTorch) {
  FILE* p = ::popen(("ldd " + std::string(KFORGE_BINARY)).c_str(), "r");
  std::string libs;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) libs.append(buf, n);
  ::pclose(p);
  EXPECT_FALSE(has(libs, "libtorch")) << libs;
  EXPECT_FALSE(has(libs, "libc10")) << libs;
  auto v = run_kforge("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_TRUE(has(v.out, "kforge ")) << v.out;
  // Every other command reaches kforge-core, which does load it.
  EXPECT_EQ(run_kforge("tasks list smoke --tasks-dir " + tasks_dir()).code, 0);
}

TEST(Usability, HarnessFailureExits4AndBadArgumentExits2) {
  TempDir dir;
  std::string answer =
      " --answer " + source("tests/gpu/honest/vector_add.md") + " --tasks-dir " + tasks_dir();
  // The NVRTC worker cannot start: not the user's input, so not exit 2.
  auto broken = run_kforge("compile --no-cache" + answer,
                           "KFORGE_NVRTC_WORKER=" + dir.path().string() + "/missing");
  EXPECT_EQ(broken.code, 4) << broken.out;
  EXPECT_TRUE(has(broken.out, "NVRTC worker")) << broken.out;
  auto suite = run_kforge("compile --task smoke" + answer);
  EXPECT_EQ(suite.code, 2) << suite.out;
  EXPECT_TRUE(has(suite.out, "names a suite")) << suite.out;
}

std::string relu_seed() {
  return source("tasks/smoke/seeds/relu.md");
}

// The README's example: one tunable given, the others at their defaults.
TEST(Usability, PartialTuneFillsTheOtherTunables) {
  auto r = run_kforge("compile --json --answer " + relu_seed() + " --tune BLOCK=512 --tasks-dir " +
                      tasks_dir());
  ASSERT_EQ(r.code, 0) << r.out;
  json j = json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["tunables"], json({{"BLOCK", 512}, {"BLOCKS_PER_SM", 65536}, {"UNROLL", 2}}))
      << j["tunables"];
  // BLOCKS_PER_SM=16 with the default BLOCK=128 keeps the constraint; with BLOCK=512 nothing does.
  auto none = run_kforge("compile --answer " + relu_seed() +
                         " --tune BLOCK=512 --tune BLOCKS_PER_SM=8 --tasks-dir " + tasks_dir());
  EXPECT_EQ(none.code, 1) << none.out;
  EXPECT_TRUE(has(
      none.out, "no combination of the tunables' values with BLOCK=512, BLOCKS_PER_SM=8 satisfies"))
      << none.out;
  auto partial_none =
      run_kforge("compile --answer " + relu_seed() +
                 " --tune BLOCKS_PER_SM=16 --tune UNROLL=2 --tasks-dir " + tasks_dir());
  EXPECT_EQ(partial_none.code, 0) << partial_none.out;  // BLOCK=128: 128 * 16 <= 2048
  auto listed = run_kforge("compile --answer " + relu_seed() + " --tune BLOCK=100 --tasks-dir " +
                           tasks_dir());
  EXPECT_EQ(listed.code, 2) << listed.out;  // the argument is wrong, not the candidate
  EXPECT_TRUE(has(listed.out,
                  "kforge compile: --tune BLOCK=100: not one of the plan's values of "
                  "BLOCK ("))
      << listed.out;
  auto unknown = run_kforge("compile --answer " + relu_seed() + " --tune BLOKC=128 --tasks-dir " +
                            tasks_dir());
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_TRUE(has(unknown.out, "--tune BLOKC=128: the plan has no tunable BLOKC (its tunables: "))
      << unknown.out;
}

// `--tune` is NAME=V everywhere; corpus's count of tune points is --tune-points.
TEST(Usability, TuneMeansOneThing) {
  auto r = run_kforge("corpus " + source("tests/gpu/honest") + " --tune 4 --no-store");
  EXPECT_EQ(r.code, 2) << r.out;
  auto help = run_kforge("corpus --help");
  EXPECT_TRUE(has(help.out, "--tune-points")) << help.out;
}

TEST(Usability, BadArchIsAUsageError) {
  for (const char* arch : {"sm_999", "banana", "compute_90"}) {
    auto r = run_kforge("compile --answer " + relu_seed() + " --arch " + arch + " --tasks-dir " +
                        tasks_dir());
    EXPECT_EQ(r.code, 2) << arch << ": " << r.out;
    EXPECT_TRUE(has(r.out, "--arch: ")) << r.out;
    EXPECT_TRUE(has(r.out, "sm_90")) << r.out;  // the supported ones are listed
  }
  EXPECT_EQ(
      run_kforge("compile --answer " + relu_seed() + " --arch sm_80 --tasks-dir " + tasks_dir())
          .code,
      0);
}

TEST(Usability, CompileReadsTheTaskFromTheAnswer) {
  auto r = run_kforge("compile --answer " + relu_seed() + " --tasks-dir " + tasks_dir());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "smoke/relu")) << r.out;
  TempDir dir;
  std::string text = *kforge::read_file(relu_seed());
  auto unnamed = dir.write("unnamed.md", text.substr(text.find('\n') + 1));  // no task line
  auto none = run_kforge("compile --answer " + unnamed.string() + " --tasks-dir " + tasks_dir());
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_TRUE(has(none.out, "--task: which task?")) << none.out;
  // --task, when given, is the task.
  auto given = run_kforge("compile --answer " + unnamed.string() +
                          " --task smoke/relu --tasks-dir " + tasks_dir());
  EXPECT_EQ(given.code, 0) << given.out;
}

// Seeds imported from the shipped results (claims), then a prompt for one of their tasks.
TEST(Usability, PromptParentMustBeOfTheTaskAndQuotesItsEagerTime) {
  TempDir dir;
  std::string jsonl = (dir.path() / "seeds.jsonl").string(), db = (dir.path() / "a.db").string();
  ASSERT_EQ(
      std::system(
          ("zcat " + source("docs/results/seeds-2026-12-03.jsonl.gz") + " > " + jsonl).c_str()),
      0);
  auto imported = run_kforge("archive import " + jsonl + " --db " + db);
  ASSERT_EQ(imported.code, 0) << imported.out;
  auto id_of = [&](const std::string& suite, const std::string& name) {
    kforge::archive::Database raw(db, kforge::archive::Access::ReadOnly);
    auto q = raw.prepare(
        "SELECT c.id FROM candidates c JOIN tasks t ON t.id = c.task_id WHERE t.suite = ? AND "
        "t.name = ? "
        "ORDER BY c.id LIMIT 1");
    q.bind(1, suite).bind(2, name);
    return q.step() ? q.integer(0) : int64_t{-1};
  };
  int64_t relu = id_of("smoke", "relu");
  ASSERT_GT(relu, 0);
  std::string render = "prompt render optimize --tasks-dir " + tasks_dir() + " --db " + db +
                       " --parent " + std::to_string(relu);
  auto wrong = run_kforge(render + " --task smoke/softmax");
  EXPECT_EQ(wrong.code, 2) << wrong.out;
  EXPECT_TRUE(has(wrong.out, "is a kernel of smoke/relu, not of smoke/softmax")) << wrong.out;
  auto right = run_kforge(render + " --task smoke/relu");
  EXPECT_EQ(right.code, 0) << right.out;
  EXPECT_TRUE(has(right.out, "PyTorch baselines: ")) << right.out;
  // The task's context has no measurement (claims are none); the request quotes the parent's.
  EXPECT_TRUE(has(right.out, "where the operation above says not measured yet: PyTorch "))
      << right.out;
  EXPECT_TRUE(has(right.out, "ms (measured beside candidate " + std::to_string(relu))) << right.out;
}

TEST(Usability, TimedDimsOnTheCpuAskBeforeMovingGigabytes) {
  TempDir dir;
  std::string text = kforge::test::valid_task("huge");  // a 4 GiB input at its timed dims
  text.replace(text.find("N = 64"), 6, "N = 1073741824");
  dir.write("big/huge.toml", text);

  auto r = run_kforge("tasks check big --dims timed --tasks-dir " + dir.path().string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "big/huge: 4.29 GB")) << r.out;
  EXPECT_TRUE(has(r.out, "--force")) << r.out;
  EXPECT_FALSE(has(r.out, "checking 1 task")) << r.out;  // nothing ran
  auto check =
      run_kforge("tasks check big --tasks-dir " + dir.path().string());  // check dims: fine
  EXPECT_EQ(check.code, 0) << check.out;
}

TEST(Usability, ProgressOnATerminalOnly) {
  std::string cmd = "tasks check smoke/relu smoke/softmax --tasks-dir " + tasks_dir();
  auto shown = run_kforge(cmd, "KFORGE_PROGRESS=always");
  EXPECT_EQ(shown.code, 0) << shown.out;
  EXPECT_TRUE(has(shown.out, "\r\033[K[1/2] smoke/relu")) << shown.out;
  EXPECT_TRUE(has(shown.out, "[2/2] smoke/softmax on ")) << shown.out;  // a configuration step
  auto piped = run_kforge(cmd);                                         // not a terminal
  EXPECT_FALSE(has(piped.out, "\r")) << piped.out;
}

}  // namespace

namespace {

// The binary's standard output alone (its stderr dropped): what a script reading --json gets.
kforge::test::CliResult run_kforge_stdout(const std::string& args) {
  return kforge::test::run_command("{ " + std::string(KFORGE_BINARY) + " " + args +
                                   " 2>/dev/null; }");
}

// --json's refusal: one JSON object on stdout naming the command, the message and the exit code.
json refusal(const kforge::test::CliResult& r) {
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
  EXPECT_TRUE(j.contains("error")) << r.out;
  if (!j.contains("error")) return json::object();
  EXPECT_EQ(j["error"]["exit_code"], r.code) << r.out;
  return j["error"];
}

}  // namespace

// Issue 40: with --json a refusal is JSON too, whatever refused: the front door, CLI11's parser,
// a command's own checks, a missing archive, no GPU.
TEST(Usability, JsonRefusalsAreJson) {
  TempDir dir;
  std::string db = " --db " + (dir.path() / "none.db").string();
  auto unknown = run_kforge_stdout("frobnicate --json");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(refusal(unknown)["kind"], "usage");
  auto sub = run_kforge_stdout("tasks chek --json");
  EXPECT_EQ(sub.code, 2);
  EXPECT_EQ(refusal(sub)["command"], "kforge tasks");
  auto parse = run_kforge_stdout("tasks list --json --frobnicate");
  EXPECT_EQ(parse.code, 2);
  json p = refusal(parse);
  EXPECT_EQ(p["command"], "kforge tasks list");
  EXPECT_TRUE(has(p.value("message", ""), "--frobnicate")) << parse.out;
  auto task = run_kforge_stdout("evolve nosuch --llm none --json --tasks-dir " + tasks_dir());
  EXPECT_EQ(task.code, 2);
  json t = refusal(task);
  EXPECT_EQ(t["command"], "kforge evolve");
  EXPECT_TRUE(has(t.value("message", ""), "nosuch")) << task.out;
  auto missing = run_kforge_stdout("archive show 7 --json" + db);
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(refusal(missing)["kind"], "usage");
  // Without --json the refusal stays on stderr alone.
  EXPECT_EQ(run_kforge_stdout("archive show 7" + db).out, "");
}

TEST(Usability, JsonWithoutAGpu) {
  if (kforge::verify::Driver::get().available()) GTEST_SKIP() << "a GPU is here";
  auto evolve = run_kforge_stdout("evolve smoke --llm none --json --tasks-dir " + tasks_dir());
  EXPECT_EQ(evolve.code, 3);
  json e = refusal(evolve);
  EXPECT_EQ(e["kind"], "no_gpu");
  EXPECT_TRUE(has(e.value("message", ""), "--worker-command")) << evolve.out;
  // --dry-run needs no GPU: the plan as JSON.
  TempDir dir;
  auto dry = run_kforge_stdout("evolve smoke --llm none --dry-run --json --tasks-dir " +
                               tasks_dir() + " --db " + (dir.path() / "a.db").string());
  ASSERT_EQ(dry.code, 0) << dry.out;
  json plan = json::parse(dry.out);
  EXPECT_EQ(plan["dry_run"], true);
  EXPECT_TRUE(has(plan["judged_on"].get<std::string>(), "no GPU here")) << dry.out;
  EXPECT_NE(std::find(plan["task_ids"].begin(), plan["task_ids"].end(), "smoke/relu"),
            plan["task_ids"].end())
      << dry.out;
}

// export --json: the result alone on stdout, progress on stderr; nothing exported, nothing written.
TEST(Usability, ExportJsonSaysWhatWasLeftOut) {
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  (void)kforge::archive::Archive::open(db);  // an archive without kernels
  auto r =
      run_kforge_stdout("export --json --out " + (dir.path() / "kernels").string() + " --db " + db);
  json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(j["written"], false);
  EXPECT_TRUE(j["ops"].empty());
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "kernels" / "CMakeLists.txt"));
}
