// The rows a JSONL export carries besides candidates, compiles and evaluations (jsonl.cpp), so that
// export and import round-trip every table: on a candidate's line, its screens, Nsight Compute
// profiles and LLM calls, and (on its task's first line) the task's baselines; after the
// candidates, a line of its own for each row no candidate line carries (a task without candidates,
// with its baselines; a run without candidates; a GPU nothing was measured on; an LLM call for no
// candidate). Like evaluations they are claims: checked field by field. Measurements (screens,
// profiles, baselines, LLM calls) are kept only from a file the user trusts (`import --trust`,
// their own export): the table has no place to mark them as claims, and the loop would read a
// screen back in place of measuring it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "import_check.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"

namespace kforge::archive::detail {

// Adds the candidate's screens, profiles and LLM calls, and with `baselines` its task's baselines
// (task.baselines: on the task's first line only), to its line: only the keys that have rows, so a
// line without them reads as before.
void add_line_records(Database& db, CandidateId candidate, TaskId task, bool baselines,
                      nlohmann::json& line);
// The lines of the rows no candidate line carries: tasks, runs, devices, then LLM calls.
std::vector<nlohmann::json> other_lines(Database& db);

// A line's records, checked.
struct LineRecords {
  struct Screen {
    ImportedLine::Device device;
    int64_t harness_version = 0;
    std::optional<ImportedLine::Run> run;
    std::string outcome, summary, created_at;
    std::optional<double> median_ms;
  };
  struct Profile {
    ImportedLine::Device device;
    nlohmann::json profile;
    std::string created_at;
  };
  struct Baseline {
    nlohmann::json dims;
    ImportedLine::Device device;
    std::string math_mode, created_at;
    BaselineTimes times;
  };
  struct LlmCall {
    std::optional<ImportedLine::Run> run;
    std::string model, status, created_at;
    int64_t tokens_in = 0, tokens_out = 0;
    double cost_usd = 0;
    std::optional<double> latency_ms;
  };
  std::vector<Screen> screens;
  std::vector<Profile> profiles;
  std::vector<Baseline> baselines;
  std::vector<LlmCall> llm_calls;
};

// The records of a candidate's line (screens, profiles, llm_calls, task.baselines), checked.
LineRecords check_line_records(const nlohmann::json& j, const LineChecker& f);
// Stores them for the line's candidate (found by its task and identity), inside the caller's
// transaction; none that is there already. Without `trust` they are counted as skipped.
void store_line_records(Archive& archive, const ImportedLine& line, const LineRecords& records,
                        bool trust, ImportReport& report);
// A line without a candidate (other_lines' kinds): checked, then stored in one transaction.
void import_other_line(Archive& archive, const nlohmann::json& j, const LineChecker& f, bool trust,
                       ImportReport& report);

}  // namespace kforge::archive::detail
