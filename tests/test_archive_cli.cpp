// Issue 17, the archive and tables as a new user meets them: `archive import` reads gzip (by its
// bytes, not its name) and a failed import leaves no empty archive behind; `archive top` and
// `archive tasks` say why nothing is listed; an unknown suite is a usage error; tables fit COLUMNS
// (or the terminal) and `--wide` prints them whole; every table of baselines has a column per kind
// of baseline_kinds() and x best. The real `kforge` binary and real SQLite files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <sstream>

#include "kforge/archive/archive.h"
#include "kforge/archive/field_metrics.h"
#include "kforge/archive/first_sample.h"
#include "kforge/archive/run_log.h"
#include "kforge/common/baseline.h"
#include "test_util.h"

namespace {

using kforge::test::TempDir;

// Runs a shell command line (the kforge binary is $K in it); standard error goes with standard
// output.
std::pair<int, std::string> sh(const std::string& line) {
  std::string out;
  FILE* p = popen(("K=" + std::string(KFORGE_BINARY) + "; " + line + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc), out};
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

std::string shipped_export() {
  return (kforge::test::source_dir() / "docs/results/seeds-2026-12-03.jsonl.gz").string();
}

// AI CUDA Engineer rows: the smallest lines an import accepts (retrieval text, never winners).
std::string rows(int from, int to) {
  std::string out;
  for (int i = from; i < to; ++i)
    out += R"({"Op_Name": "op)" + std::to_string(i) +
           R"(", "Level_ID": 1, "CUDA_Code": "__global__ void k)" + std::to_string(i) +
           "() {}\"}\n";
  return out;
}

// Display columns of a UTF-8 line.
size_t columns(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

TEST(ArchiveGzip, TheShippedGzippedExportImportsAsItIs) {
  TempDir dir;
  std::string db = (dir.path() / "seeds.db").string();
  auto [rc, out] = sh("$K archive import --trust " + shipped_export() + " --db " + db);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("imported 146 line(s)"), std::string::npos) << out;
  auto [rc2, table] = sh("$K archive results smoke --kind seed --db " + db);
  EXPECT_EQ(rc2, 0) << table;
  EXPECT_NE(table.find("| smoke/relu | "), std::string::npos) << table;
}

TEST(ArchiveGzip, GzipIsKnownByItsBytesAndEveryMemberIsRead) {
  TempDir dir;
  std::string a = dir.write("a.jsonl", rows(0, 3)).string(),
              b = dir.write("b.jsonl", rows(3, 5)).string();
  std::string blob = (dir.path() / "export.data").string();  // two gzip members, no .gz in the name
  ASSERT_EQ(sh("gzip -c " + a + " > " + blob + " && gzip -c " + b + " >> " + blob).first, 0);
  std::string db = (dir.path() / "a.db").string();
  auto [rc, out] = sh("$K archive import " + blob + " --db " + db);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("imported 5 line(s)"), std::string::npos) << out;
}

TEST(ArchiveGzip, DamagedGzipSaysHowToCheckItAndLeavesNoArchive) {
  TempDir dir;
  std::string cut = (dir.path() / "cut.jsonl.gz").string();
  ASSERT_EQ(sh("head -c 300000 " + shipped_export() + " > " + cut).first, 0);
  std::string db = (dir.path() / "a.db").string();
  auto [rc, out] = sh("$K archive import --trust " + cut + " --db " + db);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find(cut + ": gzip data ends early"), std::string::npos) << out;
  EXPECT_NE(out.find("gunzip it first"), std::string::npos) << out;
  // The lines before the cut were imported: that archive is not empty and stays.
  EXPECT_TRUE(exists(db)) << out;

  std::string garbage = (dir.path() / "garbage.gz").string();
  ASSERT_EQ(sh("printf '\\037\\213\\010\\000not deflate at all' > " + garbage).first, 0);
  std::string db2 = (dir.path() / "b.db").string();
  auto [rc2, out2] = sh("$K archive import " + garbage + " --db " + db2);
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("gunzip"), std::string::npos) << out2;
  EXPECT_FALSE(exists(db2)) << out2;
}

TEST(ArchiveImportCleanup, AFailedImportLeavesNoEmptyArchiveButNeverRemovesOne) {
  TempDir dir;
  std::string db = (dir.path() / "new.db").string();
  std::string bad = dir.write("bad.jsonl", "{not json\n").string();
  std::string empty = dir.write("empty.jsonl", "\n\n").string();
  for (const std::string& file :
       {bad, empty, (dir.path() / "missing.jsonl").string(), dir.path().string()}) {
    auto [rc, out] = sh("$K archive import " + file + " --db " + db);
    EXPECT_EQ(rc, 2) << file << ": " << out;
    EXPECT_FALSE(exists(db)) << file << ": " << out;
    EXPECT_FALSE(exists(db + "-wal")) << file;
    EXPECT_FALSE(exists(db + "-shm")) << file;
  }
  // An archive that was there before stays, whatever the import.
  std::string good = dir.write("good.jsonl", rows(0, 1)).string();
  ASSERT_EQ(sh("$K archive import " + good + " --db " + db).first, 0);
  for (const std::string& file : {bad, empty}) {
    EXPECT_EQ(sh("$K archive import " + file + " --db " + db).first, 2);
    EXPECT_TRUE(exists(db));
  }
  // So does an empty file someone made (it is not ours to remove).
  std::string theirs = dir.write("theirs.db", "").string();
  EXPECT_EQ(sh("$K archive import " + bad + " --db " + theirs).first, 2);
  EXPECT_TRUE(exists(theirs));
}

TEST(ArchiveTop, NoWinnersSaysWhyAndPointsAtTheSeedsTable) {
  TempDir dir;
  std::string db = (dir.path() / "seeds.db").string(),
              plain = (dir.path() / "seeds.jsonl").string();
  ASSERT_EQ(sh("gzip -dc " + shipped_export() + " > " + plain + " && $K archive import --trust " +
               plain + " --db " + db)
                .first,
            0);
  // The shipped seeds were judged without --admit: correct and timed, but no winners.
  auto [rc, out] = sh("$K archive top --suite level1 --db " + db);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("no candidate of these tasks has been admitted as a winner"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("`kforge archive results level1 --kind seed`"), std::string::npos) << out;
  auto [rc2, out2] = sh("$K archive tasks --db " + db);
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_NE(out2.find("level1/relu"), std::string::npos) << out2;
  EXPECT_NE(out2.find("no candidate of these tasks has been admitted as a winner"),
            std::string::npos)
      << out2;
  EXPECT_NE(out2.find("`kforge archive results SUITE --kind seed`"), std::string::npos) << out2;
  // The command it points at exists and lists the seeds.
  auto [rc3, out3] = sh("$K archive results level1 --kind seed --db " + db);
  EXPECT_EQ(rc3, 0) << out3;
  EXPECT_NE(out3.find("| level1/relu | "), std::string::npos) << out3;
}

TEST(ArchiveTop, AnUnknownSuiteIsAUsageErrorNamingIt) {
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  ASSERT_EQ(
      sh("$K archive import " + dir.write("a.jsonl", rows(0, 1)).string() + " --db " + db).first,
      0);
  auto [rc, out] = sh("$K archive top --suite levle1 --db " + db);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--suite: no suite 'levle1'"), std::string::npos) << out;
  EXPECT_NE(out.find("level1"), std::string::npos) << out;  // the suites there are
  auto [rc2, out2] = sh("$K archive results levle1 --db " + db);
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("no suite 'levle1'"), std::string::npos) << out2;
  // Suites of the tasks folder and suites only the archive has (imports) are known.
  EXPECT_EQ(sh("$K archive top --suite level1 --db " + db).first, 0);
  EXPECT_EQ(sh("$K archive top --suite imported_1 --db " + db).first, 0);
}

TEST(Tables, FitColumnsAndWidePrintsThemWhole) {
  std::string list =
      "$K tasks list level1 --tasks-dir " + (kforge::test::source_dir() / "tasks").string();
  auto [rc, fitted] = sh("COLUMNS=60 " + list);
  ASSERT_EQ(rc, 0) << fitted;
  std::istringstream lines(fitted);
  int cut = 0;
  for (std::string l; std::getline(lines, l);) {
    EXPECT_LE(columns(l), 60u) << l;
    cut += l.find("...") != std::string::npos;
  }
  EXPECT_GT(cut, 0) << fitted;
  EXPECT_NE(fitted.find("level1/relu "), std::string::npos) << fitted;  // what fits stays whole

  auto [rc2, wide] = sh("COLUMNS=60 " + list + " --wide");
  EXPECT_EQ(rc2, 0) << wide;
  EXPECT_EQ(wide.find("..."), std::string::npos) << wide;
  size_t longest = 0;
  std::istringstream wl(wide);
  for (std::string l; std::getline(wl, l);) longest = std::max(longest, columns(l));
  EXPECT_GT(longest, 60u) << wide;

  // A pipe without COLUMNS gets whole rows, as with --wide.
  auto [rc3, piped] = sh("env -u COLUMNS " + list);
  EXPECT_EQ(rc3, 0) << piped;
  EXPECT_EQ(piped, wide);
}

// On a terminal (a pseudo-terminal from util-linux's `script`) without COLUMNS: its width.
TEST(Tables, ATerminalsWidthIsUsed) {
  if (sh("command -v script").first != 0)
    GTEST_SKIP() << "no `script` (util-linux) to make a terminal";
  std::string list = std::string(KFORGE_BINARY) + " tasks list smoke --tasks-dir " +
                     (kforge::test::source_dir() / "tasks").string();
  auto [rc, out] = sh("env -u COLUMNS script -qec 'stty cols 50 && " + list + "' /dev/null");
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  int rows = 0;
  for (std::string l; std::getline(lines, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    EXPECT_LE(columns(l), 50u) << out;
    rows += l.rfind("smoke/", 0) == 0;
  }
  EXPECT_EQ(rows, 4) << out;
}

TEST(Tables, ArchiveTablesFitToo) {
  TempDir dir;
  std::string db = (dir.path() / "seeds.db").string();
  std::string long_name(80, 'x');
  ASSERT_EQ(
      sh("$K archive import " +
         dir.write("a.jsonl", R"({"Op_Name": ")" + long_name +
                                  R"(", "Level_ID": 1, "CUDA_Code": "__global__ void k() {}"})"
                                  "\n")
             .string() +
         " --db " + db)
          .first,
      0);
  auto [rc, out] = sh("COLUMNS=50 $K archive tasks --db " + db);
  EXPECT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l) && !l.empty();)
    EXPECT_LE(columns(l), 50u) << out;  // the table
  EXPECT_EQ(out.find(long_name), std::string::npos) << out;
  auto [rc2, wide] = sh("COLUMNS=50 $K archive tasks --wide --db " + db);
  EXPECT_EQ(rc2, 0) << wide;
  EXPECT_NE(wide.find("imported_1/" + long_name), std::string::npos) << wide;
}

// ---- Baselines in the tables ----

// Heading -> cell of `task`'s row in the first markdown table of `out` whose heading starts with
// "| task |" and holds `column`; empty when there is none.
std::map<std::string, std::string> markdown_row(const std::string& out, const std::string& task,
                                                const std::string& column) {
  auto cells = [](const std::string& line) {
    std::vector<std::string> v;
    std::istringstream in(line.substr(1));
    for (std::string c; std::getline(in, c, '|');) {
      size_t from = c.find_first_not_of(' ');
      v.push_back(from == std::string::npos ? ""
                                            : c.substr(from, c.find_last_not_of(' ') + 1 - from));
    }
    return v;
  };
  std::istringstream lines(out);
  std::vector<std::string> heading;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("| task |", 0) == 0 && l.find("| " + column + " |") != std::string::npos)
      heading = cells(l);
    else if (!heading.empty() && l.rfind("| " + task + " |", 0) == 0) {
      std::vector<std::string> row = cells(l);
      std::map<std::string, std::string> out_row;
      for (size_t i = 0; i < heading.size() && i < row.size(); ++i) out_row[heading[i]] = row[i];
      return out_row;
    }
  }
  return {};
}

std::string two(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// An archive with a run and two tasks whose kernels ran 1 ms, each kind of baseline slower than
// the next (the last kind the fastest): t/all has every kind, t/missing lacks the fastest (with
// why).
struct BaselineArchive {
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  int64_t run = 0, all = 0, missing = 0;
  kforge::BaselineTimes times;  // t/all's

  BaselineArchive() {
    namespace ar_ns = kforge::archive;
    ar_ns::Archive ar = ar_ns::Archive::open(db);
    ar_ns::DeviceId gpu =
        ar.upsert_device("GPU-h100", "NVIDIA H100", "sm_90a", 132, int64_t{80} << 30, "1");
    run = ar_ns::RunLog(ar).start(nlohmann::json::object()).value;
    double ms = 1.0 + 0.5 * static_cast<double>(kforge::baseline_kinds().size());
    for (const kforge::BaselineKindInfo& info : kforge::baseline_kinds())
      times.set(info.kind, ms), ms -= 0.5;
    kforge::BaselineTimes without = times;
    without.set(kforge::baseline_kinds().back().kind, std::nullopt,
                "turned off (--no-max-autotune)");
    all = kernel(ar, gpu, "all", times);
    missing = kernel(ar, gpu, "missing", without);
  }

  int64_t kernel(kforge::archive::Archive& ar, kforge::archive::DeviceId gpu,
                 const std::string& name, const kforge::BaselineTimes& b) {
    kforge::tasks::Task t;
    t.suite = "t";
    t.name = name;
    t.summary = name;
    t.reference = "def forward(x: Tensor) -> Tensor:\n    return x\n";
    t.content_hash = name + "-v1";
    kforge::archive::NewCandidate c;
    c.task = ar.upsert_task(t);
    c.run = kforge::archive::RunId{run};
    c.identity = "identity-" + name;
    c.source = "__global__ void " + name + "() {}";
    c.prompt_kind = "seed";
    kforge::archive::EvaluationRecord e;
    e.device = gpu;
    e.outcome = "correct";
    e.time_ms = 1.0;
    e.baselines = b;
    e.admitted = true;
    e.harness_version = 1;
    return ar.add_candidate(c, std::nullopt, {e}).value;
  }
};

// `kforge archive results` and `kforge report`: a column per kind (a kind added to
// baseline_kinds() shows up without an edit to the tables), and x best, the fastest kind measured
// over the kernel's time; a kind not measured is "-" and its reason is listed.
TEST(BaselineColumns, EveryKindIsAColumnAndXBestIsTheFastestKindsRatio) {
  BaselineArchive a;
  const kforge::BaselineKindInfo& fastest = kforge::baseline_kinds().back();
  const kforge::BaselineKindInfo& second = kforge::baseline_kinds().end()[-2];
  auto [rc, results] = sh("$K archive results t --db " + a.db);
  ASSERT_EQ(rc, 0) << results;
  auto [rc2, report] = sh("$K report " + std::to_string(a.run) + " --db " + a.db);
  ASSERT_EQ(rc2, 0) << report;
  for (const std::string* out : {&results, &report}) {
    std::map<std::string, std::string> row = markdown_row(*out, "t/all", "x best");
    ASSERT_FALSE(row.empty()) << *out;
    for (const kforge::BaselineKindInfo& info : kforge::baseline_kinds()) {
      std::string label(info.label);
      ASSERT_TRUE(row.count(label + " ms") && row.count("x " + label)) << label << "\n" << *out;
      EXPECT_EQ(row["x " + label], two(*a.times.ms(info.kind))) << label << "\n" << *out;
    }
    EXPECT_EQ(row["x best"], two(*a.times.ms(fastest.kind))) << *out;
    EXPECT_EQ(row["x best"], two(*a.times.best_speedup(1.0))) << *out;
    std::map<std::string, std::string> lacking = markdown_row(*out, "t/missing", "x best");
    EXPECT_EQ(lacking["x " + std::string(fastest.label)], "-") << *out;
    EXPECT_EQ(lacking["x best"], two(*a.times.ms(second.kind))) << *out;
    EXPECT_NE(out->find("- t/missing: " + std::string(fastest.label) +
                        ": turned off (--no-max-autotune)"),
              std::string::npos)
        << *out;
  }
  double mean = std::sqrt(*a.times.ms(fastest.kind) * *a.times.ms(second.kind));
  EXPECT_NE(results.find(", " + two(mean) + "x best"), std::string::npos)
      << "the geometric mean over the best baseline\n"
      << results;
}

// The plain-text lists and one candidate's page: a column (or a figure) per kind and x best.
TEST(BaselineColumns, TheListsAndShowHaveEveryKindAndTheBest) {
  BaselineArchive a;
  auto [rc, top] = sh("$K archive top --suite t --wide --db " + a.db);
  ASSERT_EQ(rc, 0) << top;
  std::string heading = top.substr(0, top.find('\n'));
  size_t at = 0;
  for (const kforge::BaselineKindInfo& info : kforge::baseline_kinds()) {
    std::string label(info.label);
    for (char& c : label) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    at = heading.find("x " + label, at);
    EXPECT_NE(at, std::string::npos) << label << " in order\n" << top;
  }
  EXPECT_NE(heading.find("x BEST", at), std::string::npos) << top;
  std::string best = two(*a.times.best_speedup(1.0)) + "x";
  EXPECT_NE(top.find(best), std::string::npos) << top;
  auto [rc2, show] = sh("$K archive show " + std::to_string(a.missing) + " --db " + a.db);
  ASSERT_EQ(rc2, 0) << show;
  for (const kforge::BaselineKindInfo& info : kforge::baseline_kinds())
    EXPECT_NE(show.find("vs " + std::string(info.label) + " "), std::string::npos)
        << info.label << "\n"
        << show;
  EXPECT_NE(show.find("vs " + std::string(kforge::baseline_kinds().back().label) +
                      " - (not measured: turned off (--no-max-autotune))"),
            std::string::npos)
      << show;
  EXPECT_NE(show.find("vs best " + two(*a.times.ms(kforge::baseline_kinds().end()[-2].kind)) + "x"),
            std::string::npos)
      << show;
}

}  // namespace

// The field's metrics (archive/field_metrics.h, KernelBench's src/score.py), each figure worked
// out by hand on BaselineArchive: both kernels take 1 ms; t/all's baselines are eager 3, scripted
// 2.5, compile 2 and max-autotune 1.5 ms (best 1.5), t/missing's the same without max-autotune
// (best 2).
TEST(FieldMetrics, ArchiveResultsPrintsKernelBenchsFiguresWorkedOutByHand) {
  BaselineArchive a;
  ASSERT_EQ(kforge::baseline_kinds().size(), 4u) << "the figures below assume four kinds";
  auto [rc, out] = sh("$K archive results t --metrics --json --db " + a.db);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json figures = nlohmann::json::parse(out);
  // The best of all attempts; no kernel here is a model's (both are seeds): no first sample.
  nlohmann::json m = figures["best"];
  EXPECT_EQ(figures["first_sample"]["problems"], 2);
  EXPECT_EQ(figures["first_sample"]["correct"], 0);
  EXPECT_EQ(figures["first_sample"]["sampled"], 0);
  EXPECT_EQ(m["problems"], 2);
  EXPECT_EQ(m["correct"], 2);
  EXPECT_DOUBLE_EQ(m["correctness"].get<double>(), 1.0);
  const nlohmann::json& eager = m["against"]["eager"];
  EXPECT_EQ(eager["timed"], 2);
  for (const char* p : {"fast_0", "fast_1", "fast_1.5", "fast_2"})
    EXPECT_DOUBLE_EQ(eager["fast_p"][p].get<double>(), 1.0) << p;  // 3x each
  EXPECT_DOUBLE_EQ(eager["geomean_speedup_correct"].get<double>(), 3.0);
  const nlohmann::json& compile = m["against"]["compile"];
  EXPECT_DOUBLE_EQ(compile["fast_p"]["fast_1.5"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(compile["fast_p"]["fast_2"].get<double>(), 0.0);  // 2x is not more than 2
  EXPECT_DOUBLE_EQ(compile["geomean_speedup_correct"].get<double>(), 2.0);
  const nlohmann::json& best = m["against"]["best"];  // 1.5x and 2x
  EXPECT_DOUBLE_EQ(best["fast_p"]["fast_1"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(best["fast_p"]["fast_1.5"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(best["fast_p"]["fast_2"].get<double>(), 0.0);
  EXPECT_NEAR(best["geomean_speedup_correct"].get<double>(), std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(best["geomean_speedup_correct_and_faster"].get<double>(), std::sqrt(3.0), 1e-12);

  // A level of four problems, two of which never converted: the denominator is the level's.
  auto [rc2, out2] = sh("$K archive results t --metrics --json --problems 4 --db " + a.db);
  ASSERT_EQ(rc2, 0) << out2;
  nlohmann::json m4 = nlohmann::json::parse(out2)["best"];
  EXPECT_DOUBLE_EQ(m4["correctness"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(m4["against"]["best"]["fast_p"]["fast_1.5"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(m4["against"]["eager"]["fast_p"]["fast_0"].get<double>(), 0.5);
  EXPECT_NEAR(m4["against"]["best"]["geomean_speedup_correct"].get<double>(), std::sqrt(3.0),
              1e-12);  // over the correct problems only

  // The same over a run's tasks in `kforge report`.
  auto [rc_report, report] = sh("$K report " + std::to_string(a.run) + " --db " + a.db);
  ASSERT_EQ(rc_report, 0) << report;
  EXPECT_NE(report.find("## The field's metrics"), std::string::npos) << report;
  EXPECT_NE(report.find("**First sample (KernelBench's one-shot figure)**: no problem has a kernel "
                        "a model wrote here."),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("| best | 2 | 100.0 % | 100.0 % | 50.0 % | 0.0 % | 1.73 | 1.73 |"),
            std::string::npos)
      << report;

  // The table under `kforge archive results`.
  auto [rc3, text] = sh("$K archive results t --db " + a.db);
  ASSERT_EQ(rc3, 0) << text;
  EXPECT_NE(text.find("Correct: 2 of 2 problems (100.0 %)."), std::string::npos) << text;
  EXPECT_NE(text.find("| best | 2 | 100.0 % | 100.0 % | 50.0 % | 0.0 % | 1.73 | 1.73 |"),
            std::string::npos)
      << text;
}

// fast_p's edge cases: no problems, no correct kernel, a correct kernel without the baseline.
TEST(FieldMetrics, EmptyLevelsAndMissingBaselinesCountAsNotFast) {
  using kforge::archive::ProblemResult;
  kforge::archive::FieldMetrics none = kforge::archive::field_metrics({}, 0);
  EXPECT_EQ(none.problems, 0u);
  EXPECT_DOUBLE_EQ(none.against.at(0).fast.at(0), 0.0);
  ProblemResult wrong{"s/a", false, std::nullopt, {}};
  ProblemResult no_compile{"s/b", true, 1.0, {}};
  no_compile.baselines.set(kforge::BaselineKind::Eager, 2.0);
  kforge::archive::FieldMetrics m = kforge::archive::field_metrics({wrong, no_compile}, 2);
  EXPECT_EQ(m.correct, 1u);
  EXPECT_EQ(m.against.at(0).baseline, "eager");
  EXPECT_DOUBLE_EQ(m.against.at(0).fast.at(1), 0.5);
  EXPECT_EQ(m.against.at(1).baseline, "compile");
  EXPECT_EQ(m.against.at(1).timed, 0u);
  EXPECT_DOUBLE_EQ(m.against.at(1).fast.at(0), 0.0);
  EXPECT_DOUBLE_EQ(m.against.at(1).geomean_correct, 0.0);
}

namespace {

// An archive where each task's first sample (kforge/archive/first_sample.h) differs from its best,
// all on one GPU unless said otherwise; baselines eager and compile only (best: the faster).
//   fs/oneshot:  run 1's translate, correct 1 ms (eager 3, compile 1.2); run 2's translate wrong,
//                then its optimize correct 0.5 ms (eager 3, compile 1.2).
//   fs/retry:    run 1's optimize (generation 1, stored first) correct 1 ms (eager 2.5, compile
//                2), its translate (generation 0) wrong: the first sample is the wrong one.
//   fs/screened: a translate of no run, correct 0.5 ms (eager 4, compile 2.5); run 1's seed correct
//                1 ms (eager 4, compile 3); its translate only screened, correct 2 ms; its
//                optimize correct 1.6 ms (eager 4, compile 2.4): the newest evaluation with
//                baselines on the screen's GPU; an optimize on another GPU, newer still, 0.8 ms
//                (eager 8, compile 8), not admitted.
//   fs/nomodel:  run 1's seed correct 1 ms and tune point 0.9 ms (eager 1.5, compile 1.5); a
//                translate stored by hand (model "human", no run) 0.75 ms: no model-written kernel.
struct FirstSampleArchive {
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  int64_t run1 = 0, run2 = 0;
  std::map<std::string, int64_t> id;  // candidates by a short name

  FirstSampleArchive() {
    namespace ka = kforge::archive;
    ka::Archive ar = ka::Archive::open(db);
    ka::DeviceId a =
        ar.upsert_device("GPU-a", "NVIDIA H100", "sm_90a", 132, int64_t{80} << 30, "1");
    ka::DeviceId b =
        ar.upsert_device("GPU-b", "NVIDIA H100", "sm_90a", 132, int64_t{80} << 30, "1");
    run1 = ka::RunLog(ar).start(nlohmann::json::object()).value;
    run2 = ka::RunLog(ar).start(nlohmann::json::object()).value;
    std::map<std::string, ka::TaskId> tasks;
    for (const char* name : {"oneshot", "retry", "screened", "nomodel"}) {
      kforge::tasks::Task t;
      t.suite = "fs";
      t.name = name;
      t.summary = name;
      t.reference = "def forward(x: Tensor) -> Tensor:\n    return x\n";
      t.content_hash = std::string(name) + "-v1";
      tasks[name] = ar.upsert_task(t);
    }
    auto add = [&](const std::string& key, const std::string& task, std::optional<int64_t> run,
                   int generation, const std::string& kind, const std::string& model,
                   std::vector<ka::EvaluationRecord> evaluations) {
      ka::NewCandidate c;
      c.task = tasks.at(task);
      if (run) c.run = ka::RunId{*run};
      c.identity = "identity-" + key;
      c.source = "__global__ void k() {} // " + key;
      c.generation = generation;
      c.prompt_kind = kind;
      c.model = model;
      id[key] = ar.add_candidate(c, std::nullopt, evaluations).value;
    };
    auto correct = [&](double ms, double eager, double compile, ka::DeviceId on = ka::DeviceId{}) {
      ka::EvaluationRecord e;
      e.device = on.value ? on : a;
      e.outcome = "correct";
      e.time_ms = ms;
      e.baselines.set(kforge::BaselineKind::Eager, eager);
      e.baselines.set(kforge::BaselineKind::Compiled, compile);
      e.admitted = true;
      e.harness_version = 1;
      return e;
    };
    ka::EvaluationRecord wrong;
    wrong.device = a;
    wrong.outcome = "wrong_result";
    wrong.harness_version = 1;

    add("o1", "oneshot", run1, 0, "translate", "m", {correct(1.0, 3.0, 1.2)});
    add("o2", "oneshot", run2, 0, "translate", "m", {wrong});
    add("o3", "oneshot", run2, 1, "optimize", "m", {correct(0.5, 3.0, 1.2)});

    add("r1", "retry", run1, 1, "optimize", "m", {correct(1.0, 2.5, 2.0)});
    add("r2", "retry", run1, 0, "translate", "m", {wrong});

    add("s0", "screened", std::nullopt, 0, "translate", "m", {correct(0.5, 4.0, 2.5)});
    add("s1", "screened", run1, 0, "seed", "", {correct(1.0, 4.0, 3.0)});
    add("s2", "screened", run1, 0, "translate", "m", {});
    ka::RunLog(ar).add_screen(ka::CandidateId{id["s2"]}, a, ka::RunId{run1}, 1,
                              {"correct", 2.0, "screened"});
    add("s3", "screened", run1, 1, "optimize", "m", {correct(1.6, 4.0, 2.4)});
    ka::EvaluationRecord elsewhere = correct(0.8, 8.0, 8.0, b);
    elsewhere.admitted = false;
    add("s4", "screened", run1, 2, "optimize", "m", {elsewhere});

    add("n1", "nomodel", run1, 0, "seed", "", {correct(1.0, 1.5, 1.5)});
    add("n2", "nomodel", run1, 1, "tune", "offline-tuner", {correct(0.9, 1.5, 1.5)});
    add("n3", "nomodel", std::nullopt, 0, "translate", "human", {correct(0.75, 1.5, 1.5)});
  }
};

// The text from `from` to `to` (or the end) of `out`.
std::string section(const std::string& out, const std::string& from, const std::string& to) {
  size_t at = out.find(from);
  if (at == std::string::npos) return "";
  size_t end = out.find(to, at + from.size());
  return out.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

// Issue 38: the first sample's figures beside the best of all attempts, worked out by hand on
// FirstSampleArchive. Over the archive: fs/oneshot's first sample is run 1's translate (3x eager,
// 1.2x compile and best), fs/retry's is wrong, fs/screened's is its screen (2 ms: 2x eager, 1.2x
// compile and best, against s3's baselines), fs/nomodel has none: 2 of 4 correct.
TEST(FieldMetrics, TheFirstSampleIsTheFirstModelWrittenKernelJudgedByHand) {
  FirstSampleArchive a;
  namespace ka = kforge::archive;
  {
    ka::Archive ar = ka::Archive::open_read_only(a.db);
    std::vector<ka::FirstSample> first = ka::suite_first_samples(ar, "fs");
    ASSERT_EQ(first.size(), 4u);
    std::map<std::string, const ka::FirstSample*> by_task;
    for (const ka::FirstSample& f : first) by_task[f.result.task] = &f;
    const ka::FirstSample& oneshot = *by_task.at("fs/oneshot");
    EXPECT_EQ(oneshot.candidate->value, a.id["o1"]);
    EXPECT_EQ(oneshot.judged_by, "evaluation");
    EXPECT_TRUE(oneshot.result.correct);
    EXPECT_EQ(oneshot.result.time_ms, 1.0);
    EXPECT_EQ(oneshot.result.baselines.ms(kforge::BaselineKind::Eager), 3.0);
    const ka::FirstSample& retry = *by_task.at("fs/retry");
    EXPECT_EQ(retry.candidate->value, a.id["r2"]) << "generation 0 before 1, whatever the ids";
    EXPECT_EQ(retry.outcome, "wrong_result");
    EXPECT_FALSE(retry.result.correct);
    const ka::FirstSample& screened = *by_task.at("fs/screened");
    EXPECT_EQ(screened.candidate->value, a.id["s2"]) << "a run's kernels before those of none";
    EXPECT_EQ(screened.judged_by, "screen");
    EXPECT_TRUE(screened.result.correct);
    EXPECT_EQ(screened.result.time_ms, 2.0);
    EXPECT_EQ(screened.result.baselines.ms(kforge::BaselineKind::Compiled), 2.4)
        << "the newest evaluation on the screen's GPU";
    const ka::FirstSample& nomodel = *by_task.at("fs/nomodel");
    EXPECT_FALSE(nomodel.candidate) << "seed, tune and a human's kernel are not the model's";
    EXPECT_FALSE(nomodel.result.correct);
  }

  auto [rc, out] = sh("$K archive results fs --metrics --json --db " + a.db);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json m = nlohmann::json::parse(out);
  // The best of all attempts: o3 (6x eager, 2.4x compile), r1 (2.5x, 2x), s0 (8x, 5x), n3 (2x, 2x).
  const nlohmann::json& best = m["best"];
  EXPECT_EQ(best["problems"], 4);
  EXPECT_EQ(best["correct"], 4);
  EXPECT_DOUBLE_EQ(best["against"]["eager"]["fast_p"]["fast_2"].get<double>(), 0.75);
  EXPECT_NEAR(best["against"]["eager"]["geomean_speedup_correct"].get<double>(),
              std::pow(6.0 * 2.5 * 8.0 * 2.0, 0.25), 1e-12);
  EXPECT_DOUBLE_EQ(best["against"]["best"]["fast_p"]["fast_2"].get<double>(), 0.5);
  // The first sample: o1 (3x eager, 1.2x compile and best) and s2 (2x, 1.2x); r2 wrong; none.
  const nlohmann::json& first = m["first_sample"];
  EXPECT_EQ(first["problems"], 4);
  EXPECT_EQ(first["correct"], 2);
  EXPECT_EQ(first["sampled"], 3);  // fs/nomodel has none
  EXPECT_DOUBLE_EQ(first["correctness"].get<double>(), 0.5);
  const nlohmann::json& eager = first["against"]["eager"];
  EXPECT_EQ(eager["timed"], 2);
  EXPECT_DOUBLE_EQ(eager["fast_p"]["fast_0"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(eager["fast_p"]["fast_1"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(eager["fast_p"]["fast_1.5"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(eager["fast_p"]["fast_2"].get<double>(), 0.25);  // 3x; 2x is not more than 2
  EXPECT_NEAR(eager["geomean_speedup_correct"].get<double>(), std::sqrt(6.0), 1e-12);
  EXPECT_NEAR(eager["geomean_speedup_correct_and_faster"].get<double>(), std::sqrt(6.0), 1e-12);
  for (const char* against : {"compile", "best"}) {
    const nlohmann::json& x = first["against"][against];
    EXPECT_EQ(x["timed"], 2) << against;
    EXPECT_DOUBLE_EQ(x["fast_p"]["fast_1"].get<double>(), 0.5) << against;
    EXPECT_DOUBLE_EQ(x["fast_p"]["fast_1.5"].get<double>(), 0.0) << against;
    EXPECT_NEAR(x["geomean_speedup_correct"].get<double>(), 1.2, 1e-12) << against;
  }
  // --problems sets both denominators; --kind filters the best, not the first sample.
  auto [rc2, out2] =
      sh("$K archive results fs --metrics --json --problems 8 --kind seed --db " + a.db);
  ASSERT_EQ(rc2, 0) << out2;
  nlohmann::json m8 = nlohmann::json::parse(out2);
  EXPECT_EQ(m8["best"]["correct"], 2);  // s1, n1
  EXPECT_DOUBLE_EQ(m8["first_sample"]["correctness"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(m8["first_sample"]["against"]["eager"]["fast_p"]["fast_2"].get<double>(), 0.125);

  // The markdown: each table under its heading.
  auto [rc3, text] = sh("$K archive results fs --metrics --db " + a.db);
  ASSERT_EQ(rc3, 0) << text;
  std::string best_md = section(text, "**Best of all attempts**", "**First sample");
  std::string first_md =
      section(text, "**First sample (KernelBench's one-shot figure)**", "\n\n\n");
  EXPECT_NE(best_md.find("Correct: 4 of 4 problems (100.0 %)."), std::string::npos) << text;
  EXPECT_NE(first_md.find("(3 of 4 problems have one)"), std::string::npos) << text;
  EXPECT_NE(first_md.find("Correct: 2 of 4 problems (50.0 %)."), std::string::npos) << text;
  EXPECT_NE(first_md.find("| eager | 2 | 50.0 % | 50.0 % | 50.0 % | 25.0 % | 2.45 | 2.45 |"),
            std::string::npos)
      << text;
  EXPECT_NE(first_md.find("| best | 2 | 50.0 % | 50.0 % | 0.0 % | 0.0 % | 1.20 | 1.20 |"),
            std::string::npos)
      << text;
  auto [rc4, full] = sh("$K archive results fs --db " + a.db);
  ASSERT_EQ(rc4, 0) << full;
  EXPECT_NE(full.find("**First sample (KernelBench's one-shot figure)**"), std::string::npos)
      << full;
}

// `kforge report`: the first sample among the run's own candidates. Run 1 is the archive's figure
// above (its best: o1 3x, r1 2.5x, s1 4x, n2 1.67x eager); run 2 has fs/oneshot only, its first
// kernel wrong and its best o3.
TEST(FieldMetrics, KforgeReportPrintsTheRunsFirstSampleBesideItsBest) {
  FirstSampleArchive a;
  auto [rc, report] = sh("$K report " + std::to_string(a.run1) + " --db " + a.db);
  ASSERT_EQ(rc, 0) << report;
  std::string metrics = section(report, "## The field's metrics", "\n## ");
  std::string best_md = section(metrics, "**Best of all attempts**", "**First sample");
  std::string first_md = section(metrics, "**First sample (KernelBench's one-shot figure)**", "##");
  ASSERT_FALSE(best_md.empty()) << report;
  ASSERT_FALSE(first_md.empty()) << report;
  EXPECT_NE(best_md.find("Correct: 4 of 4 problems (100.0 %)."), std::string::npos) << report;
  EXPECT_NE(best_md.find("| eager | 4 | 100.0 % | 100.0 % | 100.0 % | 75.0 % |"), std::string::npos)
      << report;
  EXPECT_NE(first_md.find("Correct: 2 of 4 problems (50.0 %)."), std::string::npos) << report;
  EXPECT_NE(first_md.find("| eager | 2 | 50.0 % | 50.0 % | 50.0 % | 25.0 % | 2.45 | 2.45 |"),
            std::string::npos)
      << report;
  EXPECT_NE(first_md.find("| compile | 2 | 50.0 % | 50.0 % | 0.0 % | 0.0 % | 1.20 | 1.20 |"),
            std::string::npos)
      << report;

  auto [rc2, report2] = sh("$K report " + std::to_string(a.run2) + " --db " + a.db);
  ASSERT_EQ(rc2, 0) << report2;
  std::string metrics2 = section(report2, "## The field's metrics", "\n## ");
  EXPECT_NE(section(metrics2, "**Best of all attempts**", "**First sample")
                .find("Correct: 1 of 1 problems (100.0 %)."),
            std::string::npos)
      << report2;
  EXPECT_NE(section(metrics2, "**First sample", "##").find("Correct: 0 of 1 problems (0.0 %)."),
            std::string::npos)
      << report2;
}

// The field's metrics count what KernelBench counts, with kforge's trust in timings (winner.h,
// field_condition): a correct kernel with atomics (`bitwise_unstable`, never a winner) counts, a
// `suspicious` one (faster than the roofline floor: how skipped work looks) does not.
//   ff/atomics: run 1's translate correct 1 ms, bitwise_unstable, not admitted (eager 2).
//   ff/skips:   run 1's translate correct 0.01 ms, suspicious (eager 2); its optimize 1.6 ms (eager
//               2), a winner.
TEST(FieldMetrics, FlaggedTimingsDoNotCountAndBitwiseUnstableOnesDo) {
  namespace ka = kforge::archive;
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  int64_t run = 0;
  {
    ka::Archive ar = ka::Archive::open(db);
    ka::DeviceId gpu =
        ar.upsert_device("GPU-a", "NVIDIA H100", "sm_90a", 132, int64_t{80} << 30, "1");
    run = ka::RunLog(ar).start(nlohmann::json::object()).value;
    auto add = [&](const std::string& task, int generation, const std::string& kind, double ms,
                   std::vector<std::string> flags, bool admitted) {
      kforge::tasks::Task t;
      t.suite = "ff";
      t.name = task;
      t.summary = task;
      t.reference = "def forward(x: Tensor) -> Tensor:\n    return x\n";
      t.content_hash = task + "-v1";
      ka::NewCandidate c;
      c.task = ar.upsert_task(t);
      c.run = ka::RunId{run};
      c.identity = task + kind;
      c.source = "__global__ void k() {} // " + task + kind;
      c.generation = generation;
      c.prompt_kind = kind;
      c.model = "m";
      ka::EvaluationRecord e;
      e.device = gpu;
      e.outcome = "correct";
      e.time_ms = ms;
      e.flags = std::move(flags);
      e.admitted = admitted;
      e.harness_version = 1;
      e.baselines.set(kforge::BaselineKind::Eager, 2.0);
      ar.add_candidate(c, std::nullopt, {e});
    };
    add("atomics", 0, "translate", 1.0, {"bitwise_unstable"}, false);
    add("skips", 0, "translate", 0.01, {"suspicious"}, true);
    add("skips", 1, "optimize", 1.6, {}, true);
  }
  auto [rc, report] = sh("$K report " + std::to_string(run) + " --db " + db);
  ASSERT_EQ(rc, 0) << report;
  std::string metrics = section(report, "## The field's metrics", "\n## ");
  std::string best_md = section(metrics, "**Best of all attempts**", "**First sample");
  std::string first_md = section(metrics, "**First sample (KernelBench's one-shot figure)**", "##");
  // Best: atomics 2x, skips 1.25x (its optimize: the suspicious 200x is not counted).
  EXPECT_NE(best_md.find("Correct: 2 of 2 problems (100.0 %)."), std::string::npos) << report;
  EXPECT_NE(best_md.find("| eager | 2 | 100.0 % | 100.0 % | 50.0 % | 0.0 % | 1.58 | 1.58 |"),
            std::string::npos)
      << report;
  // First sample: atomics' translate (2x); skips' translate is suspicious, so not correct.
  EXPECT_NE(first_md.find("Correct: 1 of 2 problems (50.0 %)."), std::string::npos) << report;
  EXPECT_NE(first_md.find("| eager | 1 | 50.0 % | 50.0 % | 50.0 % | 0.0 % | 2.00 | 2.00 |"),
            std::string::npos)
      << report;
  // By generation: after generation 0 only atomics counts (skips' translate is suspicious).
  std::string by_generation = section(metrics, "**By generation**", "\n\n\n");
  EXPECT_NE(by_generation.find("| g0 | 1 of 2 | 50.0 % | 0.0 % | 50.0 % | 0.0 % | 2.00 | 0.00 |"),
            std::string::npos)
      << report;
  EXPECT_NE(by_generation.find("| g1 | 2 of 2 | 100.0 % | 0.0 % | 50.0 % | 0.0 % | 1.58 | 0.00 |"),
            std::string::npos)
      << report;
  // `kforge archive results` counts alike.
  auto [rc2, out] = sh("$K archive results ff --metrics --json --db " + db);
  ASSERT_EQ(rc2, 0) << out;
  nlohmann::json m = nlohmann::json::parse(out);
  EXPECT_EQ(m["best"]["correct"], 2);
  EXPECT_NEAR(m["best"]["against"]["eager"]["geomean_speedup_correct"].get<double>(),
              std::sqrt(2.0 * 1.25), 1e-12);
  EXPECT_EQ(m["first_sample"]["correct"], 1);
}
