// The archive does not believe what it imports (issue 16): imported evaluations are claims that
// never make a winner unless the user trusts the file (and that is recorded), identities are
// recomputed, every field is checked, a line is atomic, a re-run adds nothing twice; damaged or
// foreign files are clear errors, and read commands never write. Real SQLite files and the real
// `kforge` binary.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "archive_schema.h"
#include "archive_sql.h"
#include "kforge/archive/archive.h"
#include "kforge/common/identity.h"
#include "test_util.h"

namespace {

using namespace kforge::archive;
using kforge::test::ArchiveSql;
using kforge::test::TempDir;
using nlohmann::json;

// `redirect` comes after 2>&1: the output that tests read is standard error's (and standard
// output's).
std::pair<int, std::string> kforge_cli(const std::string& args, const std::string& redirect = "") {
  std::string out;
  FILE* p = popen((std::string(KFORGE_BINARY) + " " + args + " 2>&1 " + redirect).c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc), out};
}

int64_t count(Archive& a, const std::string& sql) {
  return ArchiveSql(a).count(sql);
}

std::string scalar(const std::string& path, const std::string& sql) {
  Database raw(path, Access::ReadOnly);
  Statement s = raw.prepare(sql);
  s.step();
  return s.text(0);
}

// A kforge line as the export writes it, with a correct identity: one fast, correct, admitted
// evaluation on a device, inside a run. `edit` changes it before the identity is computed.
json kforge_line(const std::string& source = "__global__ void k() {}", double time_ms = 0.001) {
  json plan = {
      {"launch",
       json::array(
           {{{"kernel", "k"}, {"grid", {"1"}}, {"block", {"BLOCK"}}, {"args", json::array()}}})},
      {"tune", {{"BLOCK", {128, 256}}}}};
  json tunables = {{"BLOCK", 128}};
  json line = {{"kforge_archive", 1},
               {"task",
                {{"suite", "level1"},
                 {"name", "relu"},
                 {"version", "0123456789abcdef0123456789abcdef"},
                 {"summary", "ReLU"},
                 {"tags", {"elementwise"}},
                 {"definition", "def forward(x):\n    return x\n"},
                 {"created_at", "2026-12-01T00:00:00.000Z"}}},
               {"candidate",
                {{"identity", kforge::candidate_identity(source, plan, {{"BLOCK", 128}})},
                 {"source", source},
                 {"plan", plan},
                 {"tunables", tunables},
                 {"generation", 0},
                 {"island", 0},
                 {"prompt_kind", "seed"},
                 {"model", "human"},
                 {"origin", "kforge"},
                 {"verified", true},
                 {"imported", json::object()},
                 {"created_at", "2026-12-01T00:00:01.000Z"},
                 {"parents", json::array()},
                 {"run",
                  {{"started_at", "2026-12-01T00:00:00.500Z"},
                   {"finished_at", nullptr},
                   {"status", "finished"},
                   {"config", {{"suite", "level1"}}},
                   {"budgets_used", json::object()}}}}},
               {"compiles",
                {{{"ok", true},
                  {"stage", "passed"},
                  {"errors", json::array()},
                  {"log", ""},
                  {"resources", json::object()},
                  {"compile_ms", 12.5},
                  {"arch", "sm_90a"},
                  {"nvrtc", "13.0"},
                  {"created_at", "2026-12-01T00:00:02.000Z"}}}},
               {"evaluations",
                {{{"device",
                   {{"uuid", "GPU-import"},
                    {"name", "H200"},
                    {"arch", "sm_90a"},
                    {"sms", 132},
                    {"memory_bytes", 150000000000},
                    {"driver", "580"}}},
                  {"outcome", "correct"},
                  {"flags", json::array()},
                  {"evidence", {{"max_abs_error", 0.0}}},
                  {"dims", {{"N", 1024}}},
                  {"time_ms", time_ms},
                  {"time_iqr_ms", 0.0},
                  {"time_min_ms", time_ms},
                  {"baselines", {{"eager", 2.0}, {"scripted", 1.9}}},
                  {"roofline_fraction", 0.5},
                  {"admitted", true},
                  {"harness_version", 2},
                  {"toolchain", json::object()},
                  {"created_at", "2026-12-01T00:00:03.000Z"}}}}};
  return line;
}

std::string rows(const std::string& path, Access access = Access::ReadWrite) {
  ArchiveSql sql(path, access);
  std::string out;
  for (const char* t : {"tasks", "runs", "devices", "candidates", "compiles", "evaluations",
                        "kernel_text", "task_text"})
    out += std::string(t) + "=" +
           std::to_string(sql.count(std::string("SELECT count(*) FROM ") + t)) + " ";
  return out;
}
std::string rows(Archive& a) {
  return rows(a.path());
}

TEST(ArchiveImport, AHandWrittenLineNeverMakesAWinner) {
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  std::string file = dir.write("claims.jsonl", kforge_line().dump() + "\n").string();
  auto [rc, out] = kforge_cli("archive import " + file + " --db " + db);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("1 evaluation(s) are unverified claims"), std::string::npos) << out;
  auto [rc_top, top] = kforge_cli("archive top --json --db " + db);
  EXPECT_EQ(rc_top, 0) << top;
  EXPECT_EQ(json::parse(top), json::array()) << top;
  auto [rc_res, results] = kforge_cli("archive results level1 --json --db " + db);
  ASSERT_EQ(rc_res, 0) << results;
  EXPECT_TRUE(json::parse(results)[0]["time_ms"].is_null()) << results;
  Archive a = Archive::open_read_only(db);
  EXPECT_EQ(a.stats().winners, 0);
  EXPECT_EQ(a.stats().claimed, 1);
  EXPECT_FALSE(a.best(*a.find_task("level1/relu")).has_value());
  // The claims keep their origin, on the candidate and on the evaluation.
  json c = a.show(CandidateId{1});
  EXPECT_FALSE(c["verified"].get<bool>());
  EXPECT_EQ(c["origin"], "imported");
  EXPECT_EQ(c["import"], json({{"from", file}, {"trust", "claimed"}}));
  EXPECT_EQ(c["evaluations"][0]["import"], json({{"from", file}, {"trust", "claimed"}}));
}

TEST(ArchiveImport, AClaimOnAKnownCandidateIsNoWinnerEither) {
  // The same content made here: the import adds its evaluation to the verified candidate, as a
  // claim.
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  json line = kforge_line();
  {
    Archive a = Archive::open(db);
    kforge::tasks::Task t;
    t.suite = "level1", t.name = "relu", t.content_hash = line["task"]["version"],
    t.summary = "ReLU";
    NewCandidate c;
    c.task = a.upsert_task(t);
    c.source = line["candidate"]["source"], c.plan = line["candidate"]["plan"],
    c.tunables = line["candidate"]["tunables"];
    c.identity = line["candidate"]["identity"];
    EvaluationRecord slow;
    slow.outcome = "correct", slow.time_ms = 5.0, slow.admitted = true, slow.harness_version = 2;
    a.add_candidate(c, std::nullopt, {slow});
    std::stringstream in(line.dump() + "\n");
    ImportReport r = a.import_jsonl(in, "claims.jsonl");
    EXPECT_EQ(r.known_candidates, 1u);
    EXPECT_EQ(r.claimed, 1u);
    ASSERT_TRUE(a.best(TaskId{1}));
    EXPECT_EQ(*a.best(TaskId{1})->time_ms, 5.0);  // the local measurement, not the claimed 0.001
    EXPECT_EQ(a.results("level1", "")[0]["time_ms"], 5.0);
  }
}

TEST(ArchiveImport, TrustIsExplicitAndRecordedOnTheRows) {
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  std::string file = dir.write("mine.jsonl", kforge_line().dump() + "\n").string();
  auto [rc, out] = kforge_cli("archive import --trust " + file + " --db " + db);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("trusted"), std::string::npos) << out;
  auto [rc_top, top] = kforge_cli("archive top --json --db " + db);
  ASSERT_EQ(json::parse(top).size(), 1u) << top;
  EXPECT_EQ(scalar(db, "SELECT import_trust || ' ' || import_source FROM evaluations"),
            "trusted " + file);
  EXPECT_EQ(
      scalar(db, "SELECT import_trust || ' ' || import_source || ' ' || verified FROM candidates"),
      "trusted " + file + " 1");
  auto [rc_show, show] = kforge_cli("archive show 1 --db " + db);
  EXPECT_NE(show.find("(trusted import)"), std::string::npos) << show;
  // A claim stays a claim through an export, even into an import the user trusts.
  ArchiveSql(db).exec(
      "UPDATE evaluations SET import_trust = 'claimed', import_source = 'theirs.jsonl'");
  auto [rc_exp, exported] = kforge_cli("archive export --db " + db);
  ASSERT_EQ(rc_exp, 0) << exported;
  EXPECT_EQ(json::parse(exported)["evaluations"][0]["claimed_from"], "theirs.jsonl");
  std::string again = dir.write("again.jsonl", exported).string();
  std::string other = (dir.path() / "b.db").string();
  ASSERT_EQ(kforge_cli("archive import --trust " + again + " --db " + other).first, 0);
  EXPECT_EQ(scalar(other, "SELECT import_trust || ' ' || import_source FROM evaluations"),
            "claimed theirs.jsonl");
  EXPECT_EQ(kforge_cli("archive export --db " + other).second, exported);
}

TEST(ArchiveImport, TheIdentityIsRecomputedNotBelieved) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  json honest = kforge_line("__global__ void honest() {}", 3.0);
  std::stringstream first(honest.dump() + "\n");
  a.import_jsonl(first, "honest.jsonl", {true});
  std::string before = rows(a);
  // Another source under the honest candidate's identity: it would lend its 0.001 ms to it.
  json forged = kforge_line("__global__ void other() {}", 0.001);
  forged["candidate"]["identity"] = honest["candidate"]["identity"];
  forged["task"]["name"] = "new_task";  // and would leave a task behind
  forged["evaluations"][0]["device"]["uuid"] = "GPU-new";
  forged["candidate"]["run"]["started_at"] = "2026-12-02T00:00:00.000Z";
  std::stringstream in(forged.dump() + "\n");
  try {
    a.import_jsonl(in, "forged.jsonl", {true});
    FAIL() << "a line whose identity names other content was imported";
  } catch (const kforge::InputError& e) {
    EXPECT_EQ(e.file(), "forged.jsonl");
    EXPECT_EQ(e.line(), 1);
    EXPECT_EQ(e.field(), "candidate.identity");
  }
  EXPECT_EQ(rows(a), before);
  EXPECT_EQ(a.best(TaskId{1})->time_ms, 3.0);
}

TEST(ArchiveImport, ARejectedLineLeavesNoRowsAndTheMessageSaysWhatHappened) {
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  json good = kforge_line("__global__ void a() {}");
  json bad = kforge_line("__global__ void b() {}");
  bad["task"]["name"] = "other";
  bad["evaluations"][0]["device"]["uuid"] = "GPU-other";
  bad["candidate"]["run"]["started_at"] = "2026-12-02T00:00:00.000Z";
  bad["evaluations"].push_back(bad["evaluations"][0]);
  bad["evaluations"][1]["time_ms"] =
      -1;  // the last field checked: everything before it would be written
  std::string file = dir.write("two.jsonl", good.dump() + "\n" + bad.dump() + "\n").string();
  auto [rc, out] = kforge_cli("archive import " + file + " --db " + db);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find(file + ":2: evaluations[1].time_ms: -1 is not positive"), std::string::npos)
      << out;
  EXPECT_NE(out.find("nothing of this line was stored, the 1 line(s) before it were imported"),
            std::string::npos)
      << out;
  {
    Archive a = Archive::open_read_only(db);
    EXPECT_EQ(rows(db, Access::ReadOnly),
              "tasks=1 runs=1 devices=1 candidates=1 compiles=1 evaluations=1 kernel_text=1 "
              "task_text=1 ");
  }
  // A line that fails while it is being written (here a trigger refuses its evaluation, after its
  // task, run, device, candidate and compile went in) leaves nothing either: one transaction.
  Archive a = Archive::open(db);
  ArchiveSql(a).exec(
      "CREATE TRIGGER refuse BEFORE INSERT ON evaluations WHEN NEW.time_ms = 7 BEGIN SELECT "
      "RAISE(ABORT, 'no'); END");
  json late = kforge_line("__global__ void c() {}", 7);
  late["task"]["name"] = "third", late["evaluations"][0]["device"]["uuid"] = "GPU-third";
  late["candidate"]["run"]["started_at"] = "2026-12-03T00:00:00.000Z";
  std::stringstream in(late.dump() + "\n");
  EXPECT_THROW(a.import_jsonl(in, "late.jsonl"), kforge::Error);
  EXPECT_EQ(
      rows(a),
      "tasks=1 runs=1 devices=1 candidates=1 compiles=1 evaluations=1 kernel_text=1 task_text=1 ");
}

TEST(ArchiveImport, ReRunningAnImportAddsNothingTwice) {
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  std::string lines;
  for (int i = 0; i < 6; ++i) {
    json l = kforge_line("__global__ void k" + std::to_string(i) + "() {}", 1.0 + i);
    l["evaluations"].push_back(l["evaluations"][0]);
    l["evaluations"][1]["created_at"] = "2026-12-01T00:00:04.000Z";
    l["compiles"].push_back(l["compiles"][0]);
    l["compiles"][1]["created_at"] = "2026-12-01T00:00:05.000Z";
    lines += l.dump() + "\n";
  }
  Archive a = Archive::open(path);
  // An import cut short after three lines, then the whole file, then the whole file again.
  size_t third = 0;
  for (int i = 0; i < 3; ++i) third = lines.find('\n', third) + 1;
  std::stringstream part(lines.substr(0, third));
  a.import_jsonl(part, "all.jsonl");
  std::stringstream whole(lines);
  ImportReport r = a.import_jsonl(whole, "all.jsonl");
  EXPECT_EQ(r.new_candidates, 3u);
  EXPECT_EQ(r.known_candidates, 3u);
  EXPECT_EQ(r.duplicates, 12u);
  std::stringstream export1;
  a.export_jsonl(export1);
  std::stringstream again(lines);
  a.import_jsonl(again, "all.jsonl");
  EXPECT_EQ(rows(a),
            "tasks=1 runs=1 devices=1 candidates=6 compiles=12 evaluations=12 kernel_text=6 "
            "task_text=1 ");
  std::stringstream export2;
  a.export_jsonl(export2);
  EXPECT_EQ(export1.str(), export2.str());
  // The AI CUDA Engineer rows too.
  std::stringstream sakana1(
      R"({"Op_Name": "relu", "Level_ID": 1, "CUDA_Code": "__global__ void r() {}", "CUDA_Runtime": 0.1})"
      "\n"),
      sakana2(sakana1.str());
  a.import_jsonl(sakana1, "sakana.jsonl");
  a.import_jsonl(sakana2, "sakana.jsonl");
  EXPECT_EQ(
      count(a,
            "SELECT count(*) FROM candidates WHERE origin = 'imported' AND prompt_kind = 'import'"),
      1);
}

// Lines an older kforge wrote (schema 6 and before) have a column per baseline kind, and said why
// torch.compile had no time in the judge's evidence only: they import as lists keyed by kind, and
// export in the new shape.
TEST(ArchiveImport, AnOlderKforgesBaselineColumnsImportAsLists) {
  using kforge::BaselineKind;
  json old = kforge_line();
  json& e = old["evaluations"][0];
  e.erase("baselines");
  e["eager_ms"] = 2.0, e["scripted_ms"] = 1.9, e["speedup_eager"] = 2000.0;
  e["evidence"]["timing"] = {{"compiled_absent", "no Python with PyTorch 2"}};
  old["task"]["baselines"] = {{{"dims", {{"N", 1024}}},
                               {"device", e["device"]},
                               {"math_mode", "ieee"},
                               {"eager_ms", 2.0},
                               {"scripted_ms", nullptr},
                               {"compiled_ms", 1.5},
                               {"compiled_absent", nullptr},
                               {"created_at", "2026-12-01T00:00:03.000Z"}}};
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  std::stringstream in(old.dump() + "\n");
  ImportReport r = a.import_jsonl(in, "old.jsonl", {/*trust=*/true});
  EXPECT_EQ(r.evaluations, 1u);
  EXPECT_EQ(r.records, 1u);
  json shown = a.show(CandidateId{1})["evaluations"][0];
  EXPECT_EQ(shown["baselines"], json({{"eager", 2.0},
                                      {"scripted", 1.9},
                                      {"absent", {{"compiled", "no Python with PyTorch 2"}}}}));
  EXPECT_DOUBLE_EQ(shown["speedup"]["eager"].get<double>(), 2.0 / 0.001);
  std::optional<BaselineTimes> b = a.baseline(TaskId{1}, {{"N", 1024}}, DeviceId{1}, "ieee");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->to_json(), json({{"eager", 2.0}, {"compiled", 1.5}}));
  std::stringstream exported;
  a.export_jsonl(exported);
  json line = json::parse(exported.str());
  EXPECT_EQ(line["evaluations"][0]["baselines"], shown["baselines"]);
  EXPECT_EQ(line["task"]["baselines"][0]["baselines"], b->to_json());
  for (const char* key : {"eager_ms", "scripted_ms", "speedup_eager", "compiled_ms", "speedup"})
    EXPECT_FALSE(line["evaluations"][0].contains(key)) << key;
  EXPECT_FALSE(line["task"]["baselines"][0].contains("eager_ms"));
  // Importing the old line again adds nothing: it is the same evaluation.
  std::stringstream again(old.dump() + "\n");
  EXPECT_EQ(a.import_jsonl(again, "old.jsonl", {true}).evaluations, 0u);
}

// The published results (docs/results/*.jsonl.gz) are exports of schema 5 and 6: they import, and
// every evaluation's baselines come back as rows of their kinds.
TEST(ArchiveImport, ThePublishedResultsImportWithTheirBaselinesAsLists) {
  struct Published {
    const char* file;
    int64_t evaluations, eager, scripted, compiled;
  };
  for (const Published& p :
       {Published{"evolve-level1-level2-2026-12-03.jsonl.gz", 131, 131, 131, 0},
        Published{"seeds-compile-2026-12-04.jsonl.gz", 79, 79, 79, 79}}) {
    TempDir dir;
    Archive a = Archive::open((dir.path() / "a.db").string());
    std::ifstream in(kforge::test::source_dir() / "docs/results" / p.file, std::ios::binary);
    ASSERT_TRUE(in) << p.file;
    a.import_jsonl(in, p.file, {/*trust=*/true});
    EXPECT_EQ(count(a, "SELECT count(*) FROM evaluations"), p.evaluations) << p.file;
    auto kind = [&](const char* k) {
      return count(a, std::string("SELECT count(*) FROM evaluation_baselines WHERE ms > 0 "
                                  "AND kind = '") +
                          k + "'");
    };
    EXPECT_EQ(kind("eager"), p.eager) << p.file;
    EXPECT_EQ(kind("scripted"), p.scripted) << p.file;
    EXPECT_EQ(kind("compiled"), p.compiled) << p.file;
  }
  // One evaluation's numbers, as the file has them (eager_ms, scripted_ms, speedup_eager).
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  std::ifstream in(
      kforge::test::source_dir() / "docs/results/evolve-level1-level2-2026-12-03.jsonl.gz",
      std::ios::binary);
  a.import_jsonl(in, "evolve.jsonl.gz", {true});
  ArchiveSql sql(a);
  Statement c =
      sql.prepare("SELECT id FROM candidates WHERE identity = '2c11d21463b6d63515c7fc2f7f7e40db'");
  ASSERT_TRUE(c.step());
  json e = a.show(CandidateId{c.integer(0)})["evaluations"][0];
  EXPECT_EQ(e["baselines"], json({{"eager", 1.1581759452819824}, {"scripted", 1.158784031867981}}));
  EXPECT_NEAR(e["speedup"]["eager"].get<double>(), 1.2689057372775028, 1e-12);
  EXPECT_NEAR(e["speedup"]["best"].get<double>(), 1.2689057372775028, 1e-12);
}

TEST(ArchiveImport, AiCudaEngineerRowsStayRetrievalTextEvenWithTrust) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  std::stringstream in(
      R"({"Op_Name": "19_ReLU", "Level_ID": 1, "Task_ID": 19, "Kernel_Name": "relu", "CUDA_Runtime": 0.001, "CUDA_Speedup_Native": 20.0, "CUDA_Code": "__global__ void relu() {}", "Correct": true, "Max_Diff": 0.0, "Error": null})"
      "\n");
  ImportReport r = a.import_jsonl(in, "sakana.jsonl", {/*trust=*/true});
  EXPECT_EQ(r.new_candidates, 1u);
  json c = a.show(CandidateId{1});
  EXPECT_FALSE(c["verified"].get<bool>());
  EXPECT_EQ(c["task"], "imported_1/19_relu");
  EXPECT_EQ(c["imported"]["CUDA_Runtime"], 0.001);
  EXPECT_EQ(c["import"], json({{"from", "sakana.jsonl"}, {"trust", "claimed"}}));
  EXPECT_EQ(a.search("relu", 5).size(), 1u);  // retrieval text, as before
  // Its export re-imports (the placeholder identity is recomputed from the code too).
  std::stringstream out;
  a.export_jsonl(out);
  Archive b = Archive::open((dir.path() / "b.db").string());
  std::stringstream back(out.str());
  EXPECT_NO_THROW(b.import_jsonl(back, "a.jsonl", {true}));
  std::stringstream out2;
  b.export_jsonl(out2);
  EXPECT_EQ(out.str(), out2.str());
}

// Every malformed line: exit 2, and the message names the file, the line and the field.
TEST(ArchiveImport, MalformedLinesNameTheirFileLineAndField) {
  struct Case {
    std::string line, expect;
  };
  auto edit = [](auto change) {
    json l = kforge_line();
    change(l);
    return l.dump();
  };
  std::vector<Case> cases = {
      {"not json", ":2: not JSON: "},
      {"[1, 2]", ":2: must be a JSON object, not array"},
      {std::string(5000, '[') + std::string(5000, ']'), ":2: JSON nested deeper than 64 levels"},
      {R"({"Op_Name": "x"})", ":2: kforge_archive: missing"},
      {R"({"CUDA_Code": 7})", ":2: CUDA_Code: must be a string, not number"},
      {edit([](json& l) { l.erase("task"); }), ":2: task: missing"},
      {edit([](json& l) { l["kforge_archive"] = 9; }), ":2: kforge_archive: format 9 is newer"},
      {edit([](json& l) { l["task"].erase("version"); }), ":2: task.version: missing"},
      {edit([](json& l) { l["task"]["name"] = 3; }), ":2: task.name: must be a string, not number"},
      {edit([](json& l) { l["task"]["name"] = "a/b"; }),
       ":2: task.name: holds a control character or '/'"},
      {edit([](json& l) { l["candidate"].erase("source"); }), ":2: candidate.source: missing"},
      {edit([](json& l) { l["candidate"]["tunables"]["BLOCK"] = 1.5; }),
       ":2: candidate.tunables.BLOCK: must be an integer"},
      {edit([](json& l) { l["candidate"]["generation"] = -1; }),
       ":2: candidate.generation: -1 is out of range"},
      {edit([](json& l) { l["candidate"]["verified"] = "yes"; }),
       ":2: candidate.verified: must be true or false"},
      {edit([](json& l) { l["candidate"]["parents"] = {1}; }),
       ":2: candidate.parents[0]: must be a string"},
      {edit([](json& l) { l["candidate"]["run"]["status"] = "won"; }),
       ":2: candidate.run.status: 'won' is not a run status"},
      {edit([](json& l) { l["compiles"][0].erase("ok"); }), ":2: compiles[0].ok: missing"},
      {edit([](json& l) { l["evaluations"] = "many"; }),
       ":2: evaluations: must be a list, not string"},
      {edit([](json& l) { l["evaluations"][0].erase("outcome"); }),
       ":2: evaluations[0].outcome: missing"},
      {edit([](json& l) { l["evaluations"][0]["outcome"] = "excellent"; }),
       ":2: evaluations[0].outcome: 'excellent' is not an outcome"},
      {edit([](json& l) { l["evaluations"][0]["time_ms"] = "fast"; }),
       ":2: evaluations[0].time_ms: must be a number or null"},
      {edit([](json& l) { l["evaluations"][0]["time_ms"] = 0; }),
       ":2: evaluations[0].time_ms: 0 is not positive"},
      {edit([](json& l) { l["evaluations"][0]["baselines"]["eager"] = -3; }),
       ":2: evaluations[0].baselines.eager: -3 is not positive"},
      {edit([](json& l) { l["evaluations"][0]["harness_version"] = 1e300; }),
       ":2: evaluations[0].harness_version: must be an integer"},
      {edit([](json& l) { l["evaluations"][0]["device"]["sms"] = -4; }),
       ":2: evaluations[0].device.sms: -4 is out of range"},
      {edit([](json& l) { l["evaluations"][0]["created_at"] = "yesterday"; }),
       ":2: evaluations[0].created_at: 'yesterday' is not a timestamp"},
      {edit([](json& l) { l["evaluations"][0]["evidence"] = json::array(); }),
       ":2: evaluations[0].evidence: must be an object"},
  };
  std::string big_time = kforge_line().dump();
  big_time.replace(big_time.find("\"time_ms\":0.001"), 15, "\"time_ms\":1e400");
  cases.push_back(
      {big_time, ":2: evaluations[0].time_ms: not JSON: number overflow parsing '1e400'"});
  std::string cut = kforge_line().dump();
  cases.push_back(
      {cut.substr(0, cut.find("\"eager\"") + 9), ":2: evaluations[0].baselines.eager: not JSON: "});
  cases.push_back({edit([](json& l) { l["evaluations"][0]["baselines"] = json::array(); }),
                   ":2: evaluations[0].baselines: must be an object of times keyed by kind"});
  cases.push_back({edit([](json& l) {
                     l["evaluations"][0]["baselines"]["absent"] = {{"compiled", 3}};
                   }),
                   ":2: evaluations[0].baselines.absent.compiled: must be a string"});
  cases.push_back({edit([](json& l) {
                     l["evaluations"][0].erase("baselines");
                     l["evaluations"][0]["scripted_ms"] = "slow";
                   }),
                   ":2: evaluations[0].scripted_ms: must be a number or null"});
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  std::string first = kforge_line("__global__ void first() {}").dump() + "\n";
  {
    Archive a = Archive::open(db);
    for (size_t i = 0; i < cases.size(); ++i) {
      std::stringstream in(first + cases[i].line + "\n");
      try {
        a.import_jsonl(in, "case.jsonl");
        ADD_FAILURE() << "imported: " << cases[i].expect;
      } catch (const kforge::InputError& e) {  // exit 2 (cli/main.cpp)
        EXPECT_NE(std::string(e.what()).find("case.jsonl" + cases[i].expect), std::string::npos)
            << e.what();
      }
    }
    EXPECT_EQ(a.stats().candidates, 1);  // only the good first line, once
  }
  // From the command line: exit 2 (not 4), the message on standard error.
  for (size_t i : {size_t{0}, size_t{5}, size_t{21}}) {
    std::string file =
        dir.write("case" + std::to_string(i) + ".jsonl", first + cases[i].line + "\n").string();
    auto [rc, out] = kforge_cli("archive import " + file + " --db " + db);
    EXPECT_EQ(rc, 2) << cases[i].expect << "\n" << out;
    EXPECT_NE(out.find("kforge archive import: " + file + cases[i].expect), std::string::npos)
        << out;
  }
}

TEST(ArchiveImport, MigratesAVersionOneArchive) {
  TempDir dir;
  std::string path = (dir.path() / "v1.db").string();
  {
    Database raw(path, true);
    raw.exec(std::string(kforge::embedded::archive_schema_v1));
    raw.exec("PRAGMA user_version = 1");
    raw.exec("INSERT INTO tasks (suite, name, version) VALUES ('imported_1', 'relu', 'imported')");
    raw.exec(
        "INSERT INTO candidates (task_id, identity, source, origin, verified, imported) VALUES "
        "(1, 'x', 'src', 'imported', 0, '{\"source\": \"sakana.jsonl\"}'), (1, 'y', 'src2', "
        "'kforge', 1, '{}')");
  }
  // Reading never migrates; it says how.
  auto [rc, out] = kforge_cli("archive stats --db " + path);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("older than this kforge's (" + std::to_string(kSchemaVersion) + ")"),
            std::string::npos)
      << out;
  EXPECT_EQ(scalar(path, "PRAGMA user_version"), "1");
  auto [rc_m, migrated] = kforge_cli("archive migrate --db " + path);
  EXPECT_EQ(rc_m, 0) << migrated;
  EXPECT_EQ(scalar(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(scalar(path, "PRAGMA application_id"), std::to_string(kApplicationId));
  EXPECT_EQ(
      scalar(path,
             "SELECT group_concat(p, ', ') FROM (SELECT COALESCE(import_trust, '-') || ' ' || "
             "COALESCE(import_source, '-') AS p FROM candidates ORDER BY id)"),
      "claimed sakana.jsonl, - -");
}

// --- damaged and foreign files ---

TEST(ArchiveDamage, ANegativeOrAbsurdSchemaVersionIsAClearError) {
  TempDir dir;
  for (const char* version : {"-1", "-2147483648", "2147483647"}) {
    std::string path = (dir.path() / (std::string("v") + version + ".db")).string();
    {
      Archive::open(path);
      ArchiveSql(path).exec(std::string("PRAGMA user_version = ") + version);
    }
    EXPECT_THROW(Archive::open(path), ArchiveError) << version;
    EXPECT_THROW(Archive::open_read_only(path), ArchiveError) << version;
    if (version[0] == '-') {
      for (const char* cmd : {"stats", "show 1", "import /dev/null"}) {
        auto [rc, out] = kforge_cli(std::string("archive ") + cmd + " --db " + path);
        EXPECT_EQ(rc, 1) << cmd << " " << version << ": " << out;
        EXPECT_NE(out.find(path + ": the archive's schema version is " + version +
                           ", which no kforge writes"),
                  std::string::npos)
            << out;
      }
    }
    EXPECT_EQ(scalar(path, "PRAGMA user_version"), version);
  }
}

TEST(ArchiveDamage, StoredTextThatIsNotJsonNamesTheRowAndColumn) {
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  {
    Archive a = Archive::open(path);
    std::stringstream in(kforge_line().dump() + "\n");
    a.import_jsonl(in, "x.jsonl", {true});
    ArchiveSql(a).exec("UPDATE candidates SET plan = 'not json {'");
  }
  for (const char* cmd : {"show 1", "export"}) {
    auto [rc, out] = kforge_cli(std::string("archive ") + cmd + " --db " + path);
    EXPECT_EQ(rc, 1) << cmd << ": " << out;
    EXPECT_NE(
        out.find(path + ": table candidates, row 1, column plan: the stored text is not JSON"),
        std::string::npos)
        << out;
  }
  ArchiveSql(path).exec(
      "UPDATE candidates SET plan = '{}'; UPDATE evaluations SET evidence = '[1,'");
  auto [rc, out] = kforge_cli("archive export --db " + path);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("table evaluations, row 1, column evidence"), std::string::npos) << out;
  ArchiveSql(path).exec("UPDATE evaluations SET evidence = '{}', dims = 'x'");
  auto [rc_r, results] = kforge_cli("archive results level1 --db " + path);
  EXPECT_EQ(rc_r, 1) << results;
  EXPECT_NE(results.find("table evaluations, row 1, column dims"), std::string::npos) << results;
}

TEST(ArchiveDamage, ReadCommandsNeverWrite) {
  TempDir dir;
  // An empty file: no schema is created.
  std::string empty = dir.write("empty.db", "").string();
  for (const char* cmd : {"stats", "export", "show 1"}) {
    auto [rc, out] = kforge_cli(std::string("archive ") + cmd + " --db " + empty);
    EXPECT_EQ(rc, 2) << cmd << ": " << out;
    EXPECT_NE(out.find(empty + ": no archive here yet"), std::string::npos) << out;
  }
  struct stat st;
  ASSERT_EQ(::stat(empty.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  // Another program's SQLite file: not switched to WAL, no tables added, by reads or by an import.
  std::string other = (dir.path() / "other.db").string();
  {
    Database raw(other, true);
    raw.exec("CREATE TABLE notes (x); INSERT INTO notes VALUES (1)");
  }
  std::string marked = (dir.path() / "marked.db").string();
  {
    Database raw(marked, true);
    raw.exec("PRAGMA application_id = 42; PRAGMA user_version = 1; CREATE TABLE tasks (x)");
  }
  std::string line = dir.write("line.jsonl", kforge_line().dump() + "\n").string();
  for (const std::string& file : {other, marked}) {
    EXPECT_THROW(Archive::open_read_only(file), ArchiveError);
    EXPECT_THROW(Archive::open(file), ArchiveError);
    for (const std::string& cmd : {std::string("stats"), "import " + line}) {
      auto [rc, out] = kforge_cli("archive " + cmd + " --db " + file);
      EXPECT_EQ(rc, 1) << cmd << ": " << out;
      EXPECT_NE(out.find(file + ": this SQLite file is not a kforge archive"), std::string::npos)
          << out;
    }
    EXPECT_EQ(scalar(file, "PRAGMA journal_mode"), "delete") << file;
    EXPECT_EQ(scalar(file, "SELECT group_concat(name) FROM sqlite_master"),
              file == other ? "notes" : "tasks");
  }
  // A kforge archive is read without a write: its bytes do not change.
  std::string path = (dir.path() / "a.db").string();
  {
    Archive a = Archive::open(path);
    std::stringstream in(kforge_line().dump() + "\n");
    a.import_jsonl(in, "x.jsonl");
    ArchiveSql(a).exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  std::ifstream before_in(path, std::ios::binary);
  std::string before((std::istreambuf_iterator<char>(before_in)), {});
  for (const char* cmd : {"stats", "top", "export", "show 1"})
    EXPECT_EQ(kforge_cli(std::string("archive ") + cmd + " --db " + path).first, 0) << cmd;
  {
    Archive a = Archive::open_read_only(path);
    EXPECT_EQ(a.stats().candidates, 1);
    EXPECT_EQ(a.tasks_overview().size(), 1u);
    EXPECT_TRUE(a.top("", 5).empty());
    EXPECT_EQ(a.search("relu", 5).size(), 1u);
    EXPECT_EQ(a.runs().size(), 1u);
    EXPECT_EQ(a.results("level1", "").size(), 1u);
    std::stringstream out;
    a.export_jsonl(out);
    // Read-only indeed: a write through the archive's own connection is refused.
    EXPECT_THROW(a.record_llm_call({std::nullopt, std::nullopt, "m", "ok", 1, 1, 0, std::nullopt}),
                 ArchiveError);
  }
  std::ifstream after_in(path, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(after_in)), {}), before);
}

TEST(ArchiveDamage, AnExportThatCannotBeWrittenFails) {
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  {
    Archive a = Archive::open(path);
    std::stringstream in(kforge_line().dump() + "\n");
    a.import_jsonl(in, "x.jsonl");
  }
  auto [rc, out] = kforge_cli("archive export /dev/full --db " + path);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(rc, 4) << out;
  EXPECT_NE(
      out.find(
          "kforge archive export: cannot write the export to /dev/full: No space left on device"),
      std::string::npos)
      << out;
  EXPECT_EQ(out.find("exported"), std::string::npos) << out;
  auto [rc_out, to_stdout] = kforge_cli("archive export --db " + path, ">/dev/full");
  EXPECT_NE(rc_out, 0) << to_stdout;
  EXPECT_NE(to_stdout.find("kforge archive export: cannot write the export to standard output: No "
                           "space left on device"),
            std::string::npos)
      << to_stdout;
}

}  // namespace
