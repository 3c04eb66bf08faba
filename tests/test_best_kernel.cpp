// One winner rule (kforge/archive/winner.h) for every "best": `kforge report` (its read model and
// its markdown), the web view (a run's bests, the leaderboard, the task page's curve), the
// exporter's selection and the archive's own best(), asked on one archive, agree on each task's
// best kernel. The archive holds a task for each place where kforge's old rules disagreed.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"
#include "kforge/archive/export_view.h"
#include "kforge/archive/report.h"
#include "kforge/archive/run_log.h"
#include "kforge/archive/web_view.h"
#include "kforge/archive/winner.h"
#include "test_util.h"

namespace kforge {
namespace {

using archive::CandidateId;
using nlohmann::json;

const int kHarness = 7;  // the harness version of every judgment here, and of the export asked

// One evaluation as the test made it, for the rule asked in C++ (is_winner, then the fastest, then
// the first judged).
struct Made {
  std::string task;  // suite/name
  bool newest_version = true, in_run = true;
  int64_t candidate = 0;
  archive::Judged facts;
  double time_ms = 0;
};

class BestKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = (dir_.path() / "archive.db").string();
    ar_.emplace(archive::Archive::open(db_));
    h100_ = ar_->upsert_device("GPU-h100", "NVIDIA H100", "sm_90a", 132, int64_t{80} << 30, "1");
    h200_ = ar_->upsert_device("GPU-h200", "NVIDIA H200", "sm_90a", 132, int64_t{141} << 30, "1");
    run_ = archive::RunLog(*ar_).start(json::object());
  }

  archive::TaskId task(const std::string& name, const std::string& version = "v1") {
    tasks::Task t;
    t.suite = "t";
    t.name = name;
    t.summary = name;
    t.reference = "def forward(x: Tensor) -> Tensor:\n    return x\n";
    t.content_hash = name + "-" + version;
    return ar_->upsert_task(t);
  }

  // A kernel of the task, made in the run (or outside any run), with no evaluation yet.
  int64_t kernel(archive::TaskId task, int generation, bool in_run = true) {
    archive::NewCandidate c;
    c.task = task;
    if (in_run) c.run = run_;
    c.identity = "identity-" + std::to_string(++made_);
    c.source = "__global__ void k" + std::to_string(made_) + "() {}";
    c.generation = generation;
    c.prompt_kind = generation == 0 ? "seed" : "optimize";
    return ar_->add_candidate(c, std::nullopt, {}).value;
  }

  // A judgment of `candidate`: correct unless `outcome` says otherwise.
  void judge(const std::string& task, int64_t candidate, double time_ms, double eager_ms,
             bool admitted, archive::DeviceId device, std::vector<std::string> flags = {},
             bool claimed = false, const std::string& outcome = "correct",
             bool newest_version = true, bool in_run = true) {
    archive::EvaluationRecord e;
    e.device = device;
    e.outcome = outcome;
    e.flags = flags;
    e.time_ms = time_ms;
    e.baselines.set(BaselineKind::Eager, eager_ms);
    e.admitted = admitted;
    e.harness_version = kHarness;
    if (claimed) e.import_source = "their-export.jsonl", e.import_trust = "claimed";
    ar_->add_evaluation(CandidateId{candidate}, e);
    archive::Judged facts;
    facts.correct = outcome == "correct";
    facts.timed = true;
    facts.flagged = !flags.empty();
    facts.admitted = admitted;
    facts.claimed = claimed;
    made_evaluations_.push_back({"t/" + task, newest_version, in_run, candidate, facts, time_ms});
  }

  // The rule, asked in C++ over what the test made: the fastest winner, the first judged on a tie.
  std::optional<int64_t> expected(const std::string& task) const {
    const Made* best = nullptr;
    for (const Made& m : made_evaluations_)
      if (m.task == task && m.newest_version && m.in_run && archive::is_winner(m.facts) &&
          (!best || m.time_ms < best->time_ms))
        best = &m;
    return best ? std::optional<int64_t>(best->candidate) : std::nullopt;
  }

  test::TempDir dir_;
  std::string db_;
  std::optional<archive::Archive> ar_;
  archive::DeviceId h100_, h200_;
  archive::RunId run_;
  int made_ = 0;
  std::vector<Made> made_evaluations_;
};

TEST_F(BestKernel, ReportWebViewAndExportAgreeOnEveryTasksBest) {
  // plain: two winners; the faster is the best everywhere, before and after.
  {
    archive::TaskId t = task("plain");
    int64_t a = kernel(t, 0), b = kernel(t, 1);
    judge("plain", a, 2.0, 2.0, true, h100_);
    judge("plain", b, 1.0, 2.0, true, h100_);
  }
  // admission: the fastest correct kernel failed admission (unseen dims). The web view's run
  // overview used to take it (it asked for no admission); it is no winner.
  {
    archive::TaskId t = task("admission");
    int64_t a = kernel(t, 0), b = kernel(t, 1);
    judge("admission", a, 1.0, 2.0, true, h100_);
    judge("admission", b, 0.5, 2.0, false, h100_);
  }
  // claim: an import added a claimed (unverified) evaluation to a candidate of the run. `kforge
  // report` used to take it (it did not ask whether an evaluation was a claim); a claim never wins.
  {
    archive::TaskId t = task("claim");
    int64_t a = kernel(t, 0), b = kernel(t, 1);
    judge("claim", a, 1.0, 2.0, true, h100_);
    judge("claim", b, 0.3, 2.0, true, h100_, {}, /*claimed=*/true);
  }
  // devices: two winners timed on two GPUs with different eager times. The web view's overview and
  // task page took the highest speedup over eager (b, 4x); the best is the fastest (a, 1.0 ms).
  {
    archive::TaskId t = task("devices");
    int64_t a = kernel(t, 0), b = kernel(t, 1);
    judge("devices", a, 1.0, 2.0, true, h100_);
    judge("devices", b, 1.5, 6.0, true, h200_);
  }
  // flagged: the fastest is flagged suspicious (a person has not accepted it yet). The task page's
  // curve used to take any correct kernel; flags keep it from winning.
  {
    archive::TaskId t = task("flagged");
    int64_t a = kernel(t, 0), b = kernel(t, 1);
    judge("flagged", a, 1.0, 2.0, true, h100_);
    judge("flagged", b, 0.4, 2.0, true, h100_, {"suspicious"});
  }
  // tie: equal times; the one judged first is the best (the other was made first).
  {
    archive::TaskId t = task("tie");
    int64_t b = kernel(t, 0), a = kernel(t, 0);
    judge("tie", a, 1.0, 2.0, true, h100_);
    judge("tie", b, 1.0, 2.0, true, h100_);
  }
  // version: the task was edited (a new version) and the new version has no winner yet. The
  // exporter used to export the old version's winner; the task is its newest version, which has
  // none.
  {
    archive::TaskId old_version = task("version", "v1");
    int64_t a = kernel(old_version, 0, /*in_run=*/false);
    judge("version", a, 1.0, 2.0, true, h100_, {}, false, "correct", /*newest_version=*/false,
          /*in_run=*/false);
    archive::TaskId newest = task("version", "v2");
    int64_t b = kernel(newest, 0);
    judge("version", b, 1.0, 2.0, false, h100_, {}, false, "wrong_result");
  }

  const std::vector<std::string> names = {"t/admission", "t/claim", "t/devices", "t/flagged",
                                          "t/plain",     "t/tie",   "t/version"};
  // The rule's answers, spelled out: the old rules' picks above are not among them.
  std::map<std::string, std::optional<int64_t>> want;
  for (const std::string& n : names) want[n] = expected(n);
  EXPECT_EQ(want["t/plain"], std::optional<int64_t>(2));
  EXPECT_EQ(want["t/admission"], std::optional<int64_t>(3));
  EXPECT_EQ(want["t/claim"], std::optional<int64_t>(5));
  EXPECT_EQ(want["t/devices"], std::optional<int64_t>(7));
  EXPECT_EQ(want["t/flagged"], std::optional<int64_t>(9));
  EXPECT_EQ(want["t/tie"], std::optional<int64_t>(12));
  EXPECT_EQ(want["t/version"], std::nullopt);

  // `kforge report`'s read model: each task of the run, its best.
  std::optional<archive::RunReport> report = archive::run_report(*ar_, run_);
  ASSERT_TRUE(report);
  std::map<std::string, std::optional<int64_t>> from_report;
  for (const archive::RunTask& t : report->tasks) {
    from_report[t.task] = t.best ? std::optional<int64_t>(t.best->candidate.value) : std::nullopt;
    if (t.best) {
      EXPECT_EQ(t.best->baselines.ms(BaselineKind::Eager), 2.0) << t.task;
    }
  }
  EXPECT_EQ(from_report, want);
  // Its best-by-generation curve ends at the best.
  for (const auto& [task, steps] : report->progress)
    EXPECT_EQ(std::optional<int64_t>(steps.back().candidate.value), want[task]) << task;

  // `kforge report` itself: the winners' lineage names each best first.
  test::CliResult cli = test::run_kforge("report " + std::to_string(run_.value) + " --db " + db_);
  ASSERT_EQ(cli.code, 0) << cli.out;
  std::map<std::string, std::optional<int64_t>> from_cli;
  for (const std::string& n : names) from_cli[n] = std::nullopt;
  std::smatch m;
  for (auto at = cli.out.cbegin();
       std::regex_search(at, cli.out.cend(), m, std::regex(R"(\n- (t/\w+): (\d+) \()"));
       at = m.suffix().first)
    from_cli[m[1].str()] = std::stoll(m[2].str());
  EXPECT_EQ(from_cli, want) << cli.out;
  // --json: the same bests, as numbers.
  test::CliResult as_json =
      test::run_kforge("report " + std::to_string(run_.value) + " --json --db " + db_);
  ASSERT_EQ(as_json.code, 0) << as_json.out;
  std::map<std::string, std::optional<int64_t>> from_json;
  json parsed = json::parse(as_json.out);
  for (const json& t : parsed["tasks"])
    from_json[t["task"].get<std::string>()] =
        t["best"].is_null() ? std::nullopt
                            : std::optional<int64_t>(t["best"]["candidate"].get<int64_t>());
  EXPECT_EQ(from_json, want) << as_json.out;

  // The web view: the run's bests (overview), the leaderboard, the task page's curve.
  std::map<std::string, std::optional<int64_t>> from_overview, from_leaderboard, from_curve;
  for (const std::string& n : names) from_overview[n] = from_leaderboard[n] = from_curve[n] = {};
  std::map<int64_t, std::vector<archive::RunBestKernel>> run_bests = archive::run_bests(*ar_);
  std::optional<double> previous;
  for (const archive::RunBestKernel& k : run_bests[run_.value]) {
    from_overview[k.task] = k.candidate.value;
    // The largest speedup over the best baseline first.
    std::optional<double> speedup = k.baselines.best_speedup(k.time_ms);
    ASSERT_TRUE(speedup) << k.task;
    if (previous) {
      EXPECT_GE(*previous, *speedup) << k.task;
    }
    previous = speedup;
  }
  for (const json& row : ar_->results("t", "", true)) {
    if (row["identity"].is_null()) continue;
    for (const Made& made : made_evaluations_)
      if (ar_->show(CandidateId{made.candidate})["identity"] == row["identity"])
        from_leaderboard[row["task"]] = made.candidate;
  }
  for (const std::string& n : names)
    for (const auto& [island, curve] : archive::task_best_by_generation(*ar_, "t", n.substr(2)))
      from_curve[n] = curve.back().candidate.value;
  EXPECT_EQ(from_overview, want);
  EXPECT_EQ(from_leaderboard, want);
  EXPECT_EQ(from_curve, want);

  // The exporter's selection, and the archive's own best().
  std::map<std::string, std::optional<int64_t>> from_export, from_best;
  for (const std::string& n : names) from_export[n] = from_best[n] = std::nullopt;
  for (const archive::ExportKernel& k :
       archive::export_kernels(*ar_, archive::ExportScope{{"sm_90a"}, kHarness, true}))
    from_export[k.task] = k.candidate.value;
  EXPECT_EQ(from_export, want);
  for (const std::string& n : names)
    if (std::optional<archive::TaskId> t = ar_->find_task(n))
      if (std::optional<archive::KernelSummary> k = ar_->best(*t)) from_best[n] = k->id.value;
  EXPECT_EQ(from_best, want);
}

// The rule in C++ (what the loop asks of a judgment in memory): each condition alone keeps a
// kernel from winning; admission only when it is required.
TEST(WinnerRule, EveryConditionCounts) {
  archive::Judged winner;
  winner.correct = winner.timed = winner.admitted = true;
  EXPECT_TRUE(archive::is_winner(winner));
  auto without = [&](auto change) {
    archive::Judged j = winner;
    change(j);
    return archive::is_winner(j);
  };
  EXPECT_FALSE(without([](archive::Judged& j) { j.correct = false; }));
  EXPECT_FALSE(without([](archive::Judged& j) { j.timed = false; }));
  EXPECT_FALSE(without([](archive::Judged& j) { j.flagged = true; }));
  EXPECT_FALSE(without([](archive::Judged& j) { j.verified = false; }));
  EXPECT_FALSE(without([](archive::Judged& j) { j.claimed = true; }));
  EXPECT_FALSE(without([](archive::Judged& j) { j.admitted = false; }));
  archive::Judged unadmitted = winner;
  unadmitted.admitted = false;
  EXPECT_TRUE(archive::is_winner(unadmitted, /*admission_required=*/false));
}

}  // namespace
}  // namespace kforge
