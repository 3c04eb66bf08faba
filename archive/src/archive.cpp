#include "kforge/archive/archive.h"

#include <unistd.h>

#include <algorithm>
#include <istream>
#include <ostream>

#include "baseline_rows.h"
#include "best.h"
#include "evaluation_columns.h"
#include "kforge/archive/lineage.h"
#include "kforge/common/files.h"
#include "stored_json.h"

#include "archive_schema.h"

namespace kforge::archive {

nlohmann::json to_json(const KernelSummary& k) {
  return {{"id", k.id.value},
          {"task", k.task},
          {"model", k.model},
          {"prompt_kind", k.prompt_kind},
          {"outcome", k.outcome},
          {"time_ms", k.time_ms ? nlohmann::json(*k.time_ms) : nlohmann::json(nullptr)},
          {"baselines", k.baselines.to_json()},
          {"speedup", detail::speedup_json(k.baselines, k.time_ms)},
          {"verified", k.verified},
          {"created_at", k.created_at},
          {"score", k.score}};
}

namespace {

using nlohmann::json;

// Migrations: entry i takes the schema from version i to i + 1. Never edit a shipped entry; add
// one.
const std::vector<std::string_view>& migrations() {
  static const std::vector<std::string_view> m = {
      embedded::archive_schema_v1, embedded::archive_schema_v2, embedded::archive_schema_v3,
      embedded::archive_schema_v4, embedded::archive_schema_v5, embedded::archive_schema_v6,
      embedded::archive_schema_v7};
  return m;
}

// The winner rule, as SQL over an evaluation `e` joined to its candidate `c`: an imported claim
// never wins (only an import the user trusted, and recorded as such, may).
const std::string kWinner = winner_condition();

// Summaries show what was measured here (or trusted): an import's claimed times are not. Column 7
// is the fastest correct time, column 8 that evaluation (its baselines are summaries').
constexpr const char* kSummaryColumns =
    "c.id, t.suite || '/' || t.name, c.model, c.prompt_kind, "
    "(SELECT outcome FROM evaluations WHERE candidate_id = c.id AND import_trust IS NOT 'claimed' "
    "ORDER BY id DESC "
    "LIMIT 1), c.created_at, "
    "(SELECT MIN(time_ms) FROM evaluations WHERE candidate_id = c.id AND outcome = 'correct' AND "
    "import_trust IS NOT "
    "'claimed'), (SELECT id FROM evaluations WHERE candidate_id = c.id AND outcome = 'correct' AND "
    "time_ms IS NOT NULL AND import_trust IS NOT 'claimed' ORDER BY time_ms, id LIMIT 1), "
    "c.verified";

std::string fts_query(const std::string& text) {
  // Words only, OR-ed: FTS5 syntax characters in a task name must not become operators.
  std::string q, word;
  auto flush = [&] {
    if (word.size() > 1) q += (q.empty() ? "" : " OR ") + std::string("\"") + word + "\"";
    word.clear();
  };
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else
      flush();
  }
  flush();
  return q;
}

}  // namespace

Archive Archive::open(const std::string& path, bool create, int busy_timeout_ms) {
  // A fresh machine has no $XDG_DATA_HOME/kforge yet.
  if (create && path.find('/') != std::string::npos)
    make_directories(path.substr(0, path.rfind('/')));
  Archive a(std::make_unique<Database>(path, create ? Access::Create : Access::ReadWrite,
                                       busy_timeout_ms));
  int version = a.check_file();  // before anything is written
  a.db_->use_wal();
  a.migrate(version);
  return a;
}

Archive Archive::open_read_only(const std::string& path, int busy_timeout_ms) {
  std::string none =
      path + ": no archive here yet (nothing has been recorded; pass --db to use another file)";
  if (::access(path.c_str(), F_OK) != 0) throw ArchiveMissing(none);
  Archive a(std::make_unique<Database>(path, Access::ReadOnly, busy_timeout_ms));
  int version = a.check_file();
  if (version == 0) throw ArchiveMissing(none);
  if (version < kSchemaVersion)
    throw ArchiveError(path + ": the archive has schema version " + std::to_string(version) +
                       ", older than this kforge's (" + std::to_string(kSchemaVersion) +
                       "); reading never writes, so upgrade it first with `kforge archive " +
                       "migrate --db " + path + "` (any command that records does it too)");
  return a;
}

// What the file is, from its own markers, before anything is changed: a kforge archive (its schema
// version), an empty file (0), or an ArchiveError.
int Archive::check_file() {
  auto pragma = [&](const char* sql) {
    Statement s = db_->prepare(sql);
    s.step();
    return s.integer(0);
  };
  int64_t application_id = pragma("PRAGMA application_id");
  int64_t version = pragma("PRAGMA user_version");
  int64_t objects = pragma("SELECT count(*) FROM sqlite_master");
  int64_t ours = pragma(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('tasks', 'candidates', "
      "'evaluations', 'compiles')");
  const std::string& path = db_->path();
  std::string unchanged = "; nothing was changed";
  if (application_id != 0 && application_id != kApplicationId)
    throw ArchiveError(path +
                       ": this SQLite file is not a kforge archive (it belongs to another program: "
                       "application id " +
                       std::to_string(application_id) + ")" + unchanged);
  if (version < 0)
    throw ArchiveError(path + ": the archive's schema version is " + std::to_string(version) +
                       ", which no kforge writes: the file is damaged or not a kforge archive" +
                       unchanged);
  if (version == 0) {
    // A non-empty file without our version is someone else's database.
    if (objects > 0)
      throw ArchiveError(path +
                         ": this SQLite file is not a kforge archive (it has tables but no kforge "
                         "schema version)" +
                         unchanged);
    return 0;
  }
  if (application_id == 0 && ours < 4)
    throw ArchiveError(path + ": this SQLite file is not a kforge archive (schema version " +
                       std::to_string(version) + " but not kforge's tables)" + unchanged);
  if (version > kSchemaVersion)
    throw ArchiveError(path + ": the archive has schema version " + std::to_string(version) +
                       ", newer than this kforge understands (" + std::to_string(kSchemaVersion) +
                       "); upgrade kforge" + unchanged);
  return static_cast<int>(version);
}

const std::string& Archive::path() const {
  return db_->path();
}

int Archive::schema_version() {
  Statement s = db_->prepare("PRAGMA user_version");
  s.step();
  return static_cast<int>(s.integer(0));
}

void Archive::migrate(int version) {
  for (int v = version; v < kSchemaVersion; ++v) {
    Transaction t(*db_);
    db_->exec(std::string(migrations()[v]));
    db_->exec("PRAGMA user_version = " + std::to_string(v + 1));
    t.commit();
  }
}

TaskId Archive::upsert_task(const tasks::Task& task) {
  Transaction t(*db_);
  Statement find =
      db_->prepare("SELECT id FROM tasks WHERE suite = ? AND name = ? AND version = ?");
  find.bind(1, task.suite).bind(2, task.name).bind(3, task.content_hash);
  if (find.step()) {
    TaskId id{find.integer(0)};
    t.commit();
    return id;
  }
  Statement ins = db_->prepare(
      "INSERT INTO tasks (suite, name, version, summary, tags, definition) VALUES (?, ?, ?, ?, ?, "
      "?)");
  ins.bind(1, task.suite)
      .bind(2, task.name)
      .bind(3, task.content_hash)
      .bind(4, task.summary)
      .bind(5, json(task.tags).dump());
  ins.bind(6, task.reference);
  ins.run();
  TaskId id{db_->last_insert_id()};
  std::string tags;
  for (const auto& tag : task.tags) tags += tag + " ";
  Statement fts =
      db_->prepare("INSERT INTO task_text (name, tags, summary, task_id) VALUES (?, ?, ?, ?)");
  fts.bind(1, task.suite + " " + task.name).bind(2, tags).bind(3, task.summary).bind(4, id.value);
  fts.run();
  t.commit();
  return id;
}

std::optional<TaskId> Archive::find_task(const std::string& spec) {
  size_t slash = spec.find('/');
  Statement s =
      slash == std::string::npos
          ? db_->prepare("SELECT id FROM tasks WHERE name = ? ORDER BY id DESC LIMIT 1")
          : db_->prepare(
                "SELECT id FROM tasks WHERE suite = ? AND name = ? ORDER BY id DESC LIMIT 1");
  if (slash == std::string::npos)
    s.bind(1, spec);
  else
    s.bind(1, spec.substr(0, slash)).bind(2, spec.substr(slash + 1));
  if (!s.step()) return std::nullopt;
  return TaskId{s.integer(0)};
}

std::optional<DeviceId> Archive::find_device(const std::string& uuid) {
  Statement s = db_->prepare("SELECT id FROM devices WHERE uuid = ?");
  s.bind(1, uuid);
  if (!s.step()) return std::nullopt;
  return DeviceId{s.integer(0)};
}

DeviceId Archive::upsert_device(const std::string& uuid, const std::string& name,
                                const std::string& arch, std::optional<int64_t> sms,
                                std::optional<int64_t> memory_bytes, const std::string& driver) {
  Statement s = db_->prepare(
      "INSERT INTO devices (uuid, name, arch, sms, memory_bytes, driver) VALUES (?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (uuid) DO UPDATE SET driver = excluded.driver RETURNING id");
  s.bind(1, uuid).bind(2, name).bind(3, arch).bind(4, sms).bind(5, memory_bytes).bind(6, driver);
  s.step();
  return DeviceId{s.integer(0)};
}

static void insert_evaluation(Database& db, CandidateId c, const EvaluationRecord& e) {
  Statement s = db.prepare(
      "INSERT INTO evaluations (candidate_id, device_id, outcome, flags, evidence, dims, time_ms, "
      "time_iqr_ms, time_min_ms, roofline_fraction, admitted, harness_version, toolchain, "
      "created_at, import_source, import_trust) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "COALESCE(?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), ?, ?)");
  s.bind(1, c.value);
  if (e.device)
    s.bind(2, e.device->value);
  else
    s.bind_null(2);
  bind_evaluation_columns(s, e);
  s.bind(15, e.import_source).bind(16, e.import_trust);
  s.run();
  detail::store_evaluation_baselines(db, db.last_insert_id(), e.baselines);
}

CandidateId Archive::add_candidate(const NewCandidate& c,
                                   const std::optional<CompileRecord>& compile,
                                   const std::vector<EvaluationRecord>& evaluations) {
  Transaction t(*db_);
  CandidateId id;
  Statement find = db_->prepare("SELECT id FROM candidates WHERE task_id = ? AND identity = ?");
  find.bind(1, c.task.value).bind(2, c.identity);
  if (find.step()) {
    id = CandidateId{find.integer(0)};
  } else {
    Statement ins = db_->prepare(
        "INSERT INTO candidates (task_id, run_id, identity, source, plan, tunables, generation, "
        "island, prompt_kind, model, "
        "origin, verified, imported, created_at, import_source, import_trust) VALUES (?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "COALESCE(?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), ?, ?)");
    ins.bind(1, c.task.value);
    if (c.run)
      ins.bind(2, c.run->value);
    else
      ins.bind_null(2);
    ins.bind(3, c.identity).bind(4, c.source).bind(5, c.plan.dump()).bind(6, c.tunables.dump());
    ins.bind(7, int64_t{c.generation})
        .bind(8, int64_t{c.island})
        .bind(9, c.prompt_kind)
        .bind(10, c.model);
    ins.bind(11, std::string(to_string(c.imported ? Origin::Imported : Origin::Kforge)))
        .bind(12, int64_t{!c.imported})
        .bind(13, c.imported_claims.dump());
    ins.bind(14, c.created_at).bind(15, c.import_source).bind(16, c.import_trust);
    ins.run();
    id = CandidateId{db_->last_insert_id()};
    for (CandidateId p : c.parents) {
      Statement par = db_->prepare(
          "INSERT OR IGNORE INTO candidate_parents (candidate_id, parent_id) VALUES (?, ?)");
      par.bind(1, id.value).bind(2, p.value).run();
    }
    Statement task =
        db_->prepare("SELECT suite || ' ' || name || ' ' || summary FROM tasks WHERE id = ?");
    task.bind(1, c.task.value);
    std::string task_text = task.step() ? task.text(0) : "";
    Statement fts =
        db_->prepare("INSERT INTO kernel_text (source, task, candidate_id) VALUES (?, ?, ?)");
    fts.bind(1, c.source).bind(2, task_text).bind(3, id.value).run();
  }
  if (compile) {
    Statement s = db_->prepare(
        "INSERT INTO compiles (candidate_id, ok, stage, errors, log, resources, compile_ms, arch, "
        "nvrtc, created_at, "
        "import_source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(?, "
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), ?)");
    s.bind(1, id.value)
        .bind(2, int64_t{compile->ok})
        .bind(3, compile->stage)
        .bind(4, json(compile->errors).dump());
    s.bind(5, compile->log)
        .bind(6, compile->resources.dump())
        .bind(7, compile->compile_ms)
        .bind(8, compile->arch);
    s.bind(9, compile->nvrtc).bind(10, compile->created_at).bind(11, compile->import_source).run();
  }
  for (const auto& e : evaluations) insert_evaluation(*db_, id, e);
  t.commit();
  return id;
}

void Archive::add_evaluation(CandidateId candidate, const EvaluationRecord& e) {
  Transaction t(*db_);
  insert_evaluation(*db_, candidate, e);
  t.commit();
}

void Archive::record_llm_call(const LlmCall& call) {
  Statement s = db_->prepare(
      "INSERT INTO llm_calls (run_id, candidate_id, model, tokens_in, tokens_out, cost_usd, "
      "latency_ms, status) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  if (call.run)
    s.bind(1, call.run->value);
  else
    s.bind_null(1);
  if (call.candidate)
    s.bind(2, call.candidate->value);
  else
    s.bind_null(2);
  s.bind(3, call.model)
      .bind(4, call.tokens_in)
      .bind(5, call.tokens_out)
      .bind(6, call.cost_usd)
      .bind(7, call.latency_ms);
  s.bind(8, call.status).run();
}

void Archive::store_baseline(TaskId task, const json& dims, DeviceId device,
                             const std::string& math_mode, const BaselineTimes& times,
                             bool replace) {
  Transaction t(*db_);
  // RETURNING gives the row's id when it was inserted or (with `replace`) re-timed; none when the
  // first timing stays.
  Statement s = db_->prepare(
      std::string("INSERT INTO baselines (task_id, dims, device_id, math_mode) VALUES (?, ?, ?, ?) "
                  "ON CONFLICT (task_id, dims, device_id, math_mode) ") +
      (replace ? "DO UPDATE SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
               : "DO NOTHING") +
      " RETURNING id");
  s.bind(1, task.value).bind(2, dims.dump()).bind(3, device.value).bind(4, math_mode);
  if (s.step()) {
    int64_t id = s.integer(0);
    s.run();
    detail::store_baseline_times(*db_, id, times);
  }
  t.commit();
}

std::optional<BaselineTimes> Archive::baseline(TaskId task, const json& dims, DeviceId device,
                                               const std::string& math_mode) {
  // The first timed on a GPU of this device's kind (the same name and arch), whichever machine
  // asks.
  Statement s = db_->prepare(
      "SELECT b.id FROM baselines b JOIN devices d ON d.id = b.device_id JOIN devices k ON k.name "
      "= d.name AND k.arch = d.arch WHERE b.task_id = ? AND b.dims = ? AND k.id = ? AND "
      "b.math_mode = ? ORDER BY b.id LIMIT 1");
  s.bind(1, task.value).bind(2, dims.dump()).bind(3, device.value).bind(4, math_mode);
  if (!s.step()) return std::nullopt;
  int64_t id = s.integer(0);
  return detail::baseline_times(*db_, {id})[id];
}

std::vector<KernelSummary> Archive::summaries(
    Statement& s, const std::function<void(KernelSummary&, Statement&)>& more) {
  std::vector<KernelSummary> out;
  std::vector<std::optional<int64_t>> evaluations;
  while (s.step()) {
    KernelSummary k;
    k.id = CandidateId{s.integer(0)};
    k.task = s.text(1);
    k.model = s.text(2);
    k.prompt_kind = s.text(3);
    k.outcome = s.is_null(4) ? "unevaluated" : s.text(4);
    k.created_at = s.text(5);
    k.time_ms = s.maybe_real(6);
    evaluations.push_back(s.is_null(7) ? std::nullopt : std::optional<int64_t>(s.integer(7)));
    k.verified = s.integer(8) != 0;
    if (more) more(k, s);
    out.push_back(std::move(k));
  }
  std::vector<BaselineTimes> baselines = detail::evaluation_baselines(*db_, evaluations);
  for (size_t i = 0; i < out.size(); ++i) out[i].baselines = std::move(baselines[i]);
  return out;
}

std::optional<KernelSummary> Archive::best(TaskId task, std::optional<DeviceId> device) {
  std::string sql = std::string("SELECT ") + kSummaryColumns +
                    " FROM evaluations e JOIN candidates c ON c.id = e.candidate_id JOIN tasks t "
                    "ON t.id = c.task_id "
                    "WHERE c.task_id = ? AND " +
                    kWinner + (device ? " AND e.device_id = ?" : "") + " ORDER BY " +
                    detail::kBestOrder + " LIMIT 1";
  Statement s = db_->prepare(sql);
  s.bind(1, task.value);
  if (device) s.bind(2, device->value);
  std::vector<KernelSummary> found = summaries(s);
  if (found.empty()) return std::nullopt;
  return found[0];
}

std::vector<KernelSummary> Archive::top(const std::string& task_or_suite, size_t limit) {
  // One task: its winners, fastest first. A suite (or everything): each task's best winner, the
  // largest speedup over its best baseline first (then the fastest).
  bool one_task = task_or_suite.find('/') != std::string::npos;
  std::string winners =
      std::string(
          "SELECT e.candidate_id, c.task_id, e.time_ms, e.id FROM evaluations e JOIN candidates c "
          "ON c.id = e.candidate_id WHERE ") +
      kWinner;
  std::string filter = task_or_suite.empty() ? "1"
                       : one_task            ? "t.suite || '/' || t.name = ?1"
                                             : "(t.suite = ?1 OR t.name = ?1)";
  std::string pick = one_task ? "c.id IN (SELECT candidate_id FROM w)"
                              : "c.id IN (SELECT (SELECT candidate_id FROM w WHERE w.task_id = "
                                "t2.id ORDER BY time_ms, id LIMIT 1) "
                                "FROM tasks t2)";
  std::string sql = "WITH w AS (" + winners + ") SELECT " + kSummaryColumns +
                    " FROM candidates c JOIN tasks t ON t.id = c.task_id WHERE " + filter +
                    " AND " + pick + " ORDER BY 7 ASC, c.id" + (one_task ? " LIMIT ?2" : "");
  Statement s = db_->prepare(sql);
  if (!task_or_suite.empty()) s.bind(1, task_or_suite);
  if (one_task) s.bind(2, static_cast<int64_t>(limit));
  std::vector<KernelSummary> out = summaries(s);
  if (one_task) return out;
  // The speedup is computed from the baselines, so a suite is ordered here (no speedup: last).
  std::stable_sort(out.begin(), out.end(), [](const KernelSummary& a, const KernelSummary& b) {
    return detail::larger_speedup_first(a.baselines.best_speedup(a.time_ms),
                                        b.baselines.best_speedup(b.time_ms));
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

nlohmann::json Archive::results(const std::string& suite, const std::string& prompt_kind,
                                bool winners_only, bool field) {
  // Winners: the winner rule; the field's rule; otherwise the fastest correct kernel measured
  // here, flags and all.
  std::string which = winners_only ? winner_condition()
                      : field      ? field_condition()
                                   : correct_condition();
  Statement s = db_->prepare(
      std::string("WITH newest AS (SELECT * FROM (") + detail::kNewestTasks +
      ") WHERE suite = ?1), "
      "best AS (SELECT c.task_id, e.*, c.tunables, c.identity, ROW_NUMBER() OVER (PARTITION BY "
      "c.task_id ORDER BY " +
      detail::kBestOrder +
      ") AS k "
      "  FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
      "  WHERE " +
      which +
      " AND (?2 = '' OR c.prompt_kind = ?2)) "
      "SELECT n.name, n.version, b.time_ms, b.time_iqr_ms, b.roofline_fraction, b.tunables, "
      "b.identity, b.flags, b.admitted, b.harness_version, d.name, b.dims, b.created_at, b.id, "
      "b.candidate_id "
      "  FROM newest n LEFT JOIN best b ON b.task_id = n.id AND b.k = 1 LEFT JOIN devices d ON "
      "d.id = b.device_id "
      "ORDER BY n.name");
  s.bind(1, suite).bind(2, prompt_kind);
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::optional<int64_t>> evaluations;
  auto real = [&](int i) {
    return s.is_null(i) ? nlohmann::json(nullptr) : nlohmann::json(s.real(i));
  };
  auto text = [&](int i) {
    return s.is_null(i) ? nlohmann::json(nullptr) : nlohmann::json(s.text(i));
  };
  auto text_json = [&](int i) {
    if (s.is_null(i)) return nlohmann::json(nullptr);
    if (i == 5) return stored_json(*db_, s, i, "candidates", "tunables", s.integer(14));
    return stored_json(*db_, s, i, "evaluations", i == 7 ? "flags" : "dims", s.integer(13));
  };
  while (s.step()) {
    evaluations.push_back(s.is_null(13) ? std::nullopt : std::optional<int64_t>(s.integer(13)));
    out.push_back(
        {{"task", suite + "/" + s.text(0)},
         {"version", s.text(1)},
         {"time_ms", real(2)},
         {"time_iqr_ms", real(3)},
         {"roofline_fraction", real(4)},
         {"tunables", text_json(5)},
         {"identity", text(6)},
         {"flags", text_json(7)},
         {"admitted", s.is_null(8) ? nlohmann::json(nullptr) : nlohmann::json(s.integer(8) != 0)},
         {"harness_version", s.is_null(9) ? nlohmann::json(nullptr) : nlohmann::json(s.integer(9))},
         {"device", text(10)},
         {"dims", text_json(11)},
         {"measured_at", text(12)}});
  }
  // A task without a kernel has null baselines and speedups, as its other columns are.
  std::vector<BaselineTimes> baselines = detail::evaluation_baselines(*db_, evaluations);
  for (size_t i = 0; i < out.size(); ++i) {
    bool kernel = evaluations[i].has_value();
    std::optional<double> time_ms = out[i]["time_ms"].is_number()
                                        ? std::optional(out[i]["time_ms"].get<double>())
                                        : std::nullopt;
    out[i]["baselines"] = kernel ? baselines[i].to_json() : nlohmann::json(nullptr);
    out[i]["speedup"] =
        kernel ? detail::speedup_json(baselines[i], time_ms) : nlohmann::json(nullptr);
  }
  return out;
}

std::vector<KernelSummary> Archive::similar(const tasks::Task& task, size_t k,
                                            std::optional<int64_t> before_run) {
  std::string tags;
  for (const auto& t : task.tags) tags += t + " ";
  std::string q = fts_query(task.name + " " + tags + " " + task.summary);
  std::vector<KernelSummary> out;
  if (q.empty()) return out;
  // Similar tasks by BM25, then each task's best kernel (winners first, then the fastest correct).
  Statement tasks = db_->prepare(
      "SELECT task_id, bm25(task_text, 5.0, 3.0, 1.0) FROM task_text WHERE task_text MATCH ? ORDER "
      "BY 2 LIMIT ?");
  tasks.bind(1, q).bind(2, static_cast<int64_t>(4 * k + 4));
  while (tasks.step() && out.size() < k) {
    Statement s =
        db_->prepare(std::string("SELECT ") + kSummaryColumns +
                     " FROM candidates c JOIN tasks t ON t.id = c.task_id WHERE c.task_id = ? "
                     "AND (?2 IS NULL OR c.run_id IS NULL OR c.run_id < ?2) "
                     "ORDER BY 7 ASC NULLS LAST, c.verified DESC, c.id DESC LIMIT 1");
    s.bind(1, tasks.integer(0)).bind(2, before_run);
    for (KernelSummary& ks : summaries(s)) {
      ks.score = tasks.real(1);
      out.push_back(std::move(ks));
    }
  }
  return out;
}

std::vector<std::pair<KernelSummary, std::string>> Archive::notable_failures(TaskId task,
                                                                             size_t k) {
  Statement s = db_->prepare(
      std::string("SELECT ") + kSummaryColumns +
      ", e.evidence FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
      "JOIN tasks t ON t.id = c.task_id WHERE c.task_id = ? AND e.outcome != 'correct' "
      "AND e.import_trust IS NOT 'claimed' "
      "ORDER BY e.id DESC LIMIT ?");
  s.bind(1, task.value).bind(2, static_cast<int64_t>(k));
  std::vector<std::string> evidence;
  std::vector<KernelSummary> failed =
      summaries(s, [&](KernelSummary&, Statement& row) { evidence.push_back(row.text(9)); });
  std::vector<std::pair<KernelSummary, std::string>> out;
  for (size_t i = 0; i < failed.size(); ++i) out.emplace_back(failed[i], evidence[i]);
  return out;
}

std::vector<KernelSummary> Archive::search(const std::string& query, size_t limit) {
  std::string q = fts_query(query);
  std::vector<KernelSummary> out;
  if (q.empty()) return out;
  Statement s = db_->prepare(
      std::string("SELECT ") + kSummaryColumns +
      ", k.rank FROM kernel_text k JOIN candidates c ON c.id = k.candidate_id "
      "JOIN tasks t ON t.id = c.task_id WHERE kernel_text MATCH ? ORDER BY k.rank LIMIT ?");
  s.bind(1, q).bind(2, static_cast<int64_t>(limit));
  return summaries(s, [](KernelSummary& ks, Statement& row) { ks.score = row.real(9); });
}

json Archive::search_tasks(const std::string& query, size_t limit) {
  std::string q = fts_query(query);
  json out = json::array();
  if (q.empty()) return out;
  Statement s = db_->prepare(
      "SELECT t.suite || '/' || t.name, t.summary FROM task_text x JOIN tasks t ON t.id = "
      "x.task_id "
      "WHERE task_text MATCH ? GROUP BY t.suite, t.name ORDER BY min(x.rank) LIMIT ?");
  s.bind(1, q).bind(2, static_cast<int64_t>(limit));
  while (s.step()) out.push_back({{"task", s.text(0)}, {"summary", s.text(1)}});
  return out;
}

json Archive::show(CandidateId id) {
  Statement c = db_->prepare(
      "SELECT c.id, t.suite || '/' || t.name, t.version, c.run_id, c.identity, c.source, c.plan, "
      "c.tunables, c.generation, "
      "c.island, c.prompt_kind, c.model, c.origin, c.verified, c.imported, c.created_at, "
      "c.import_source, c.import_trust "
      "FROM candidates c JOIN tasks t ON t.id = c.task_id WHERE c.id = ?");
  c.bind(1, id.value);
  if (!c.step()) return nullptr;
  // Where an imported row came from and whether its claims were trusted; null when made here.
  auto provenance = [](Statement& s, int source, int trust) {
    if (s.is_null(source) && (trust < 0 || s.is_null(trust))) return json(nullptr);
    json p = {{"from", s.is_null(source) ? json(nullptr) : json(s.text(source))}};
    if (trust >= 0) p["trust"] = s.is_null(trust) ? json(nullptr) : json(s.text(trust));
    return p;
  };
  auto stored = [&](Statement& s, int col, const char* table, const char* column, int64_t row) {
    return stored_json(*db_, s, col, table, column, row);
  };
  json j = {{"id", c.integer(0)},
            {"task", c.text(1)},
            {"task_version", c.text(2)},
            {"run", c.is_null(3) ? json(nullptr) : json(c.integer(3))},
            {"identity", c.text(4)},
            {"source", c.text(5)},
            {"plan", stored(c, 6, "candidates", "plan", id.value)},
            {"tunables", stored(c, 7, "candidates", "tunables", id.value)},
            {"generation", c.integer(8)},
            {"island", c.integer(9)},
            {"prompt_kind", c.text(10)},
            {"model", c.text(11)},
            {"origin", c.text(12)},
            {"verified", c.integer(13) != 0},
            {"imported", stored(c, 14, "candidates", "imported", id.value)},
            {"created_at", c.text(15)},
            {"import", provenance(c, 16, 17)}};
  j["parents"] = json::array();
  Statement p = db_->prepare(
      "SELECT parent_id FROM candidate_parents WHERE candidate_id = ? ORDER BY parent_id");
  p.bind(1, id.value);
  while (p.step()) j["parents"].push_back(p.integer(0));
  j["compiles"] = json::array();
  Statement cs = db_->prepare(
      "SELECT ok, stage, errors, log, resources, compile_ms, arch, nvrtc, created_at, "
      "import_source, id "
      "FROM compiles WHERE candidate_id = ? ORDER BY id");
  cs.bind(1, id.value);
  while (cs.step())
    j["compiles"].push_back({{"ok", cs.integer(0) != 0},
                             {"stage", cs.text(1)},
                             {"errors", stored(cs, 2, "compiles", "errors", cs.integer(10))},
                             {"log", cs.text(3)},
                             {"resources", stored(cs, 4, "compiles", "resources", cs.integer(10))},
                             {"compile_ms", cs.is_null(5) ? json(nullptr) : json(cs.real(5))},
                             {"arch", cs.text(6)},
                             {"nvrtc", cs.text(7)},
                             {"created_at", cs.text(8)},
                             {"import", provenance(cs, 9, -1)}});
  j["evaluations"] = json::array();
  Statement es = db_->prepare(
      "SELECT d.uuid, e.outcome, e.flags, e.evidence, e.dims, e.time_ms, e.time_iqr_ms, "
      "e.time_min_ms, e.roofline_fraction, e.admitted, e.harness_version, e.toolchain, "
      "e.created_at, e.import_source, e.import_trust, e.id FROM evaluations e LEFT JOIN devices d "
      "ON d.id = e.device_id WHERE e.candidate_id = ? ORDER BY e.id");
  es.bind(1, id.value);
  auto real = [&](int col) { return es.is_null(col) ? json(nullptr) : json(es.real(col)); };
  std::vector<std::optional<int64_t>> rows;
  while (es.step()) {
    int64_t row = es.integer(15);
    rows.push_back(row);
    j["evaluations"].push_back({{"device", es.is_null(0) ? json(nullptr) : json(es.text(0))},
                                {"outcome", es.text(1)},
                                {"flags", stored(es, 2, "evaluations", "flags", row)},
                                {"evidence", stored(es, 3, "evaluations", "evidence", row)},
                                {"dims", stored(es, 4, "evaluations", "dims", row)},
                                {"time_ms", real(5)},
                                {"time_iqr_ms", real(6)},
                                {"time_min_ms", real(7)},
                                {"roofline_fraction", real(8)},
                                {"admitted", es.integer(9) != 0},
                                {"harness_version", es.integer(10)},
                                {"toolchain", stored(es, 11, "evaluations", "toolchain", row)},
                                {"created_at", es.text(12)},
                                {"import", provenance(es, 13, 14)}});
  }
  std::vector<BaselineTimes> baselines = detail::evaluation_baselines(*db_, rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    json& e = j["evaluations"][i];
    std::optional<double> time_ms =
        e["time_ms"].is_number() ? std::optional(e["time_ms"].get<double>()) : std::nullopt;
    e["baselines"] = baselines[i].to_json();
    e["speedup"] = detail::speedup_json(baselines[i], time_ms);
  }
  j["profiles"] = json::array();
  Statement ps = db_->prepare(
      "SELECT d.uuid, d.name, p.profile, p.created_at FROM profiles p JOIN devices d ON d.id = "
      "p.device_id "
      "WHERE p.candidate_id = ? ORDER BY p.id");
  ps.bind(1, id.value);
  while (ps.step())
    j["profiles"].push_back({{"device", ps.text(0)},
                             {"device_name", ps.text(1)},
                             {"profile", json::parse(ps.text(2), nullptr, false)},
                             {"created_at", ps.text(3)}});
  return j;
}

void Archive::add_profile(CandidateId c, int64_t device_id, const json& profile) {
  Statement s = db_->prepare(
      "INSERT OR IGNORE INTO profiles (candidate_id, device_id, profile) VALUES (?, ?, ?)");
  s.bind(1, c.value).bind(2, device_id).bind(3, profile.dump()).run();
}

std::optional<json> Archive::profile(CandidateId c, std::optional<int64_t> device_id) {
  Statement s = db_->prepare(
      "SELECT p.profile FROM profiles p WHERE p.candidate_id = ?1 AND (?2 IS NULL OR p.device_id "
      "IN "
      "(SELECT k.id FROM devices d JOIN devices k ON k.name = d.name AND k.arch = d.arch WHERE "
      "d.id = ?2)) "
      "ORDER BY p.id LIMIT 1");
  s.bind(1, c.value).bind(2, device_id);
  if (!s.step()) return std::nullopt;
  return json::parse(s.text(0));
}

int64_t Archive::review(CandidateId id, bool accept, const std::string& note) {
  Transaction t(*db_);
  Statement s = db_->prepare(
      "SELECT id, flags, evidence FROM evaluations WHERE candidate_id = ? AND EXISTS (SELECT 1 "
      "FROM "
      "json_each(evaluations.flags) WHERE value = 'suspicious') ORDER BY id DESC LIMIT 1");
  s.bind(1, id.value);
  if (!s.step())
    throw UsageError("candidate " + std::to_string(id.value) +
                     " has no evaluation flagged suspicious to review");
  int64_t evaluation = s.integer(0);
  json flags = stored_json(*db_, s, 1, "evaluations", "flags", evaluation);
  json evidence = stored_json(*db_, s, 2, "evaluations", "evidence", evaluation);
  std::string suspicion =
      evidence.contains("timing") ? evidence["timing"].value("suspicion", "") : "";
  if (accept && suspicion.rfind("faster than the roofline floor", 0) == 0)
    throw UsageError("candidate " + std::to_string(id.value) + " cannot be accepted: its time is " +
                     suspicion);
  json kept = json::array();
  for (const auto& f : flags)
    if (!(accept && f == "suspicious") && f != "rejected") kept.push_back(f);
  if (!accept) kept.push_back("rejected");
  evidence["review"] = {{"decision", accept ? "accepted" : "rejected"}, {"note", note}};
  Statement u = db_->prepare("UPDATE evaluations SET flags = ?, evidence = ? WHERE id = ?");
  u.bind(1, kept.dump()).bind(2, evidence.dump()).bind(3, evaluation).run();
  t.commit();
  return evaluation;
}

std::vector<CandidateId> Archive::lineage(CandidateId id) {
  Statement s = db_->prepare(
      "WITH RECURSIVE up(id, depth) AS (SELECT ?, 0 UNION SELECT p.parent_id, up.depth + 1 FROM "
      "candidate_parents p "
      "JOIN up ON p.candidate_id = up.id WHERE up.depth < 1000) SELECT id FROM up GROUP BY id "
      "ORDER BY MIN(depth), id");
  s.bind(1, id.value);
  std::vector<CandidateId> out;
  while (s.step()) out.push_back(CandidateId{s.integer(0)});
  return out;
}

json Archive::tasks_overview() {
  Statement s = db_->prepare(
      std::string("SELECT t.suite || '/' || t.name, t.version, t.summary, (SELECT count(*) FROM "
                  "candidates c WHERE c.task_id = t.id), "
                  "(SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
                  "WHERE c.task_id = t.id AND "
                  "e.outcome = 'correct' AND e.import_trust IS NOT 'claimed'), (SELECT "
                  "MIN(e.time_ms) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
                  "WHERE c.task_id = t.id AND ") +
      kWinner + ") FROM tasks t ORDER BY t.suite, t.name, t.id");
  json out = json::array();
  while (s.step())
    out.push_back({{"task", s.text(0)},
                   {"version", s.text(1)},
                   {"summary", s.text(2)},
                   {"candidates", s.integer(3)},
                   {"correct_evaluations", s.integer(4)},
                   {"best_ms", s.is_null(5) ? json(nullptr) : json(s.real(5))}});
  return out;
}

json Archive::runs() {
  Statement s = db_->prepare(
      "SELECT r.id, r.started_at, r.finished_at, r.status, r.config, r.budgets_used, "
      "(SELECT count(*) FROM candidates c WHERE c.run_id = r.id), "
      "(SELECT count(*) FROM llm_calls l WHERE l.run_id = r.id), "
      "(SELECT COALESCE(SUM(cost_usd), 0) FROM llm_calls l WHERE l.run_id = r.id) FROM runs r "
      "ORDER BY r.id");
  json out = json::array();
  while (s.step())
    out.push_back({{"id", s.integer(0)},
                   {"started_at", s.text(1)},
                   {"finished_at", s.is_null(2) ? json(nullptr) : json(s.text(2))},
                   {"status", s.text(3)},
                   {"config", stored_json(*db_, s, 4, "runs", "config", s.integer(0))},
                   {"budgets_used", stored_json(*db_, s, 5, "runs", "budgets_used", s.integer(0))},
                   {"candidates", s.integer(6)},
                   {"llm_calls", s.integer(7)},
                   {"llm_cost_usd", s.real(8)}});
  return out;
}

Stats Archive::stats() {
  Stats st;
  Statement s = db_->prepare(
      std::string("SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM candidates), "
                  "(SELECT count(*) FROM candidates WHERE origin = 'imported'), (SELECT count(*) "
                  "FROM compiles), "
                  "(SELECT count(*) FROM evaluations), "
                  "(SELECT count(*) FROM evaluations WHERE outcome = 'correct' AND import_trust IS "
                  "NOT 'claimed'), "
                  "(SELECT count(DISTINCT c.id) FROM evaluations e JOIN candidates c ON c.id = "
                  "e.candidate_id WHERE ") +
      kWinner +
      "), (SELECT count(*) FROM runs), (SELECT count(*) FROM llm_calls), (SELECT "
      "COALESCE(SUM(cost_usd), 0) FROM llm_calls), "
      "(SELECT count(*) FROM evaluations WHERE import_trust = 'claimed')");
  s.step();
  st.tasks = s.integer(0);
  st.candidates = s.integer(1);
  st.imported = s.integer(2);
  st.compiles = s.integer(3);
  st.evaluations = s.integer(4);
  st.correct = s.integer(5);
  st.winners = s.integer(6);
  st.runs = s.integer(7);
  st.llm_calls = s.integer(8);
  st.llm_cost_usd = s.real(9);
  st.claimed = s.integer(10);
  return st;
}

}  // namespace kforge::archive
