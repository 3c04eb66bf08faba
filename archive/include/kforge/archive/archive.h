// The kernel archive: one SQLite file (WAL) holding every candidate, failures included, with its
// lineage, compile report and evaluations. The only module that talks to SQLite.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/error.h"
#include "kforge/archive/sqlite.h"
#include "kforge/archive/winner.h"
#include "kforge/common/baseline.h"
#include "kforge/tasks/task.h"

namespace kforge::archive {

namespace detail {
struct ImportedLine;    // a kforge JSONL line, checked (jsonl.cpp)
struct DatabaseAccess;  // the read models' way to the database (archive/src/database_of.h)
}  // namespace detail

// Distinct id types: a candidate id cannot be passed where a task id is expected.
struct TaskId {
  int64_t value = 0;
};
struct CandidateId {
  int64_t value = 0;
};
struct RunId {
  int64_t value = 0;
};
struct DeviceId {
  int64_t value = 0;
};

inline constexpr int kSchemaVersion = 7;
// PRAGMA application_id of a kforge archive ("kfor"); version 1 files have 0 and kforge's tables.
inline constexpr int64_t kApplicationId = 0x6B666F72;

struct CompileRecord {
  bool ok = false;
  std::string stage;
  std::vector<std::string> errors;
  std::string log;
  nlohmann::json resources = nlohmann::json::object();
  std::optional<double> compile_ms;
  std::string arch, nvrtc;
  std::optional<std::string> created_at;     // default: now (imports keep the original)
  std::optional<std::string> import_source;  // the file it was imported from; none: made here
};

struct EvaluationRecord {
  std::optional<DeviceId> device;
  std::string outcome;  // docs/design.md, Outcomes
  std::vector<std::string> flags;
  nlohmann::json evidence = nlohmann::json::object();
  nlohmann::json dims = nlohmann::json::object();
  std::optional<double> time_ms, time_iqr_ms, time_min_ms, roofline_fraction;
  // The baselines' medians by kind, each with why it is absent where the judge said (schema 7's
  // evaluation_baselines rows); speedups are baselines.speedup(kind, time_ms).
  BaselineTimes baselines;
  bool admitted = false;
  int harness_version = 0;
  nlohmann::json toolchain = nlohmann::json::object();
  std::optional<std::string> created_at;
  // Imported evaluations: the file, and "claimed" (never a winner) or "trusted" (import --trust).
  std::optional<std::string> import_source, import_trust;
};

// A task's reference times at some dims on a GPU kind, in one math mode are a kforge::BaselineTimes
// (common/baseline.h): one entry per kind, with why a kind has no time.
using kforge::BaselineTimes;

struct NewCandidate {
  TaskId task;
  std::optional<RunId> run;
  std::string identity, source;
  nlohmann::json plan = nlohmann::json::object();
  nlohmann::json tunables = nlohmann::json::object();
  std::vector<CandidateId> parents;
  int generation = 0, island = 0;
  std::string prompt_kind, model;
  bool imported = false;  // imported rows are unverified retrieval text
  nlohmann::json imported_claims = nlohmann::json::object();
  std::optional<std::string> created_at;
  std::optional<std::string> import_source, import_trust;  // as for evaluations
};

struct LlmCall {
  std::optional<RunId> run;
  std::optional<CandidateId> candidate;
  std::string model, status;
  int64_t tokens_in = 0, tokens_out = 0;
  double cost_usd = 0;
  std::optional<double> latency_ms;
};

struct KernelSummary {
  CandidateId id;
  std::string task;  // suite/name
  std::string model, prompt_kind, outcome, created_at;
  std::optional<double> time_ms;
  BaselineTimes baselines;  // of the evaluation of time_ms (its fastest correct, not a claim)
  bool verified = true;
  double score = 0;  // retrieval rank (lower BM25 is better) where it applies
};
nlohmann::json to_json(const KernelSummary& k);

struct Stats {
  int64_t tasks = 0, candidates = 0, imported = 0, compiles = 0, evaluations = 0, correct = 0,
          winners = 0, runs = 0, llm_calls = 0,
          claimed = 0;  // claimed: imported evaluations kept as unverified claims
  double llm_cost_usd = 0;
};

struct ImportOptions {
  // The user's own export: its evaluations count as if made here (winners possible); recorded on
  // every row as import_trust = 'trusted'. Evaluations a file already marks as claims stay claims.
  bool trust = false;
};

struct ImportReport {
  size_t lines = 0;  // lines read: a candidate each, or a row no candidate carries
  size_t new_candidates = 0, known_candidates = 0;
  size_t compiles = 0, evaluations = 0, claimed = 0, trusted = 0;  // rows added
  size_t duplicates = 0;  // rows already in the archive (a re-run adds nothing)
  // Screens, profiles, baselines and LLM calls: added, and left out of a file not trusted.
  size_t records = 0, skipped = 0;
};

class Archive {
 public:
  // Opens the archive, creating and migrating as needed. A file from a newer kforge, a damaged
  // file, another program's SQLite file or a locked one is an ArchiveError naming the file; nothing
  // is changed (the file is recognised before the journal mode or anything else is touched).
  static Archive open(const std::string& path, bool create = true, int busy_timeout_ms = 5000);
  // For reading only: never writes, creates or migrates. A missing or empty file says there is no
  // archive yet; an older schema says how to upgrade it (`kforge archive migrate`).
  static Archive open_read_only(const std::string& path, int busy_timeout_ms = 5000);
  int schema_version();

  TaskId upsert_task(const tasks::Task& task);
  std::optional<TaskId> find_task(
      const std::string& spec);  // "suite/name" or "name": newest version
  std::optional<DeviceId> find_device(const std::string& uuid);  // a GPU this archive has seen
  DeviceId upsert_device(const std::string& uuid, const std::string& name, const std::string& arch,
                         std::optional<int64_t> sms, std::optional<int64_t> memory_bytes,
                         const std::string& driver);

  // One transaction: the candidate, its parents, compile report and evaluations, and its text
  // index. A candidate already stored for the task (same identity) gets the new reports added.
  CandidateId add_candidate(const NewCandidate& c, const std::optional<CompileRecord>& compile,
                            const std::vector<EvaluationRecord>& evaluations);
  void add_evaluation(CandidateId candidate, const EvaluationRecord& e);
  void record_llm_call(const LlmCall& call);

  // Baselines per (task version, dims, device, math mode): the first timing stays (what prompts
  // quote, so a resumed run renders the same prompts) unless `replace` (`kforge baseline`
  // re-timing). baseline() reads the first one timed on a GPU of the device's kind (same name and
  // arch), on whichever machine of the kind asks.
  void store_baseline(TaskId task, const nlohmann::json& dims, DeviceId device,
                      const std::string& math_mode, const BaselineTimes& times,
                      bool replace = false);
  std::optional<BaselineTimes> baseline(TaskId task, const nlohmann::json& dims, DeviceId device,
                                        const std::string& math_mode);

  // A winner: correct, admitted, unflagged, kforge-verified; the fastest for the task (and device).
  std::optional<KernelSummary> best(TaskId task, std::optional<DeviceId> device = std::nullopt);
  std::vector<KernelSummary> top(const std::string& task_or_suite, size_t limit);
  // Retrieval for prompts: kernels of tasks like this one (BM25 over names, tags and summary), the
  // best first per task; and failures of this task with their evidence.
  // `before_run`: only candidates made outside that run and the ones after it (a run's prompts then
  // read the same retrieval when it is resumed).
  std::vector<KernelSummary> similar(const tasks::Task& task, size_t k,
                                     std::optional<int64_t> before_run = std::nullopt);
  std::vector<std::pair<KernelSummary, std::string>> notable_failures(TaskId task, size_t k);
  std::vector<KernelSummary> search(const std::string& query, size_t limit);
  // Tasks whose name, tags or summary hold a word of `query`, best match first: [{task, summary}].
  nlohmann::json search_tasks(const std::string& query, size_t limit);
  nlohmann::json show(CandidateId id);  // everything about one candidate; null when absent
  // Nsight Compute profiles (schema 4): one per candidate and GPU (a second is ignored).
  void add_profile(CandidateId c, int64_t device_id, const nlohmann::json& profile);
  // The candidate's first profile on a GPU of the same kind (name and arch) as `device_id`, or on
  // any GPU when none is given: the first, so a resumed run quotes the same numbers.
  std::optional<nlohmann::json> profile(CandidateId c, std::optional<int64_t> device_id);
  // A person's decision on the candidate's newest evaluation flagged "suspicious" (`kforge archive
  // review`). Accepted: the flag goes and the evaluation may win; rejected: "rejected" joins the
  // flag. The decision and `note` stay in its evidence ("review"). Returns the evaluation's id.
  // UsageError when nothing is flagged, or when acceptance is asked of a time below the roofline
  // floor (impossible, so never accepted).
  int64_t review(CandidateId id, bool accept, const std::string& note);
  std::vector<CandidateId> lineage(
      CandidateId id);  // the candidate and its ancestors, nearest first
  nlohmann::json tasks_overview();
  // docs/results.md's rows: per task of `suite` (its newest version in the archive), the fastest
  // correct evaluation of a candidate made as `prompt_kind` (empty: any), with its baselines
  // ("baselines": BaselineTimes::to_json, absent kinds with their reason), speedups by kind and
  // over the best baseline ("speedup": {"eager": x, ..., "best": x}, every kind of
  // baseline_kinds(), null where it has no time), roofline fraction, tunables, device and harness
  // version; tasks without one too (nulls), so a table shows what is missing. `winners_only`:
  // admitted and unflagged evaluations only (what `kforge evolve` and export count as a winner).
  // `field`: the field's metrics' rule instead (winner.h, field_condition).
  nlohmann::json results(const std::string& suite, const std::string& prompt_kind,
                         bool winners_only = false, bool field = false);
  nlohmann::json runs();
  Stats stats();

  // JSONL, one candidate per line with its task, compile and evaluations; round-trips losslessly
  // (import --trust). Stored text that is not JSON is an ArchiveError naming the row and column; a
  // stream that fails (a full disk) is an Error naming `destination`.
  size_t export_jsonl(std::ostream& out, const std::string& destination = "the output");
  // Lines in kforge's own form, or rows of the public AI CUDA Engineer archive (Op_Name, Level_ID,
  // Task_ID, Kernel_Name, CUDA_Runtime, PyTorch_Native_Runtime, CUDA_Speedup_Native, CUDA_Code,
  // Correct, Max_Diff, Error): those become unverified retrieval text, never winners.
  // kforge lines are claims: every field is checked, the identity is recomputed, and evaluations
  // are stored as unverified claims unless options.trust. Each line is one transaction, and rows
  // already present are not added again, so a re-run (after an interruption) adds nothing twice.
  // The first bad line stops the import with an InputError naming the file, line and field; the
  // lines before it stay imported, nothing of the bad line does. A stream that starts with gzip's
  // magic bytes (1f 8b) is decompressed as it is read; damaged gzip is an InputError too.
  ImportReport import_jsonl(std::istream& in, const std::string& source_name,
                            const ImportOptions& options = {});

  const std::string& path() const;  // the archive's file, for messages

 private:
  friend struct detail::DatabaseAccess;
  explicit Archive(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  int check_file();  // the schema version of a kforge archive (0: an empty file), before any write
  void migrate(int from);
  void store_imported(const detail::ImportedLine& line, ImportReport& report);
  // The rows of a query over kSummaryColumns, each with its evaluation's baselines (one query for
  // all); `more` reads a row's columns after them.
  std::vector<KernelSummary> summaries(
      Statement& s, const std::function<void(KernelSummary&, Statement&)>& more = {});
  std::unique_ptr<Database> db_;
};

}  // namespace kforge::archive
