// An imported kforge line is a claim: checked field by field before anything is stored (types,
// ranges, known names), and its identity must be the hash of its own source, plan and tunables.
// Every problem is an InputError naming the file, the line and the field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"

namespace kforge::archive::detail {

struct ImportedLine {
  struct Run {
    std::string started_at, status;
    std::optional<std::string> finished_at;
    nlohmann::json config, budgets_used;
  };
  struct Device {
    std::string uuid, name, arch, driver;
    std::optional<int64_t> sms, memory_bytes;
  };
  struct Evaluation {
    EvaluationRecord record;
    std::optional<Device> device;
  };
  tasks::Task task;
  std::optional<std::string> task_created_at;
  NewCandidate candidate;            // task, run and parents are resolved when stored
  std::vector<std::string> parents;  // by identity
  std::optional<Run> run;
  std::vector<CompileRecord> compiles;
  std::vector<Evaluation> evaluations;
};

// Reads the fields of one line. `at` is the path of the object holding `key` ("" for the line,
// "evaluations[2]", ...); a field that is absent takes the fallback unless it is required.
class LineChecker {
 public:
  LineChecker(std::string file, int line) : file_(std::move(file)), line_(line) {}
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const;
  nlohmann::json parse(const std::string& text) const;  // one JSON object, nested at most 64 deep

  const nlohmann::json* get(const nlohmann::json& o, const std::string& at, const char* key,
                            bool required) const;
  std::string text(const nlohmann::json& o, const std::string& at, const char* key, bool required,
                   const std::string& fallback = "") const;
  std::string name(const nlohmann::json& o, const std::string& at,
                   const char* key) const;  // required, one short line
  bool boolean(const nlohmann::json& o, const std::string& at, const char* key, bool required,
               bool fallback = false) const;
  int64_t integer(const nlohmann::json& o, const std::string& at, const char* key, bool required,
                  int64_t fallback, int64_t min, int64_t max) const;
  std::optional<int64_t> maybe_count(const nlohmann::json& o, const std::string& at,
                                     const char* key) const;  // null or > 0
  std::optional<double> measure(const nlohmann::json& o, const std::string& at, const char* key,
                                bool zero_ok) const;
  nlohmann::json object(const nlohmann::json& o, const std::string& at, const char* key,
                        bool required = false) const;
  std::vector<std::string> strings(const nlohmann::json& o, const std::string& at,
                                   const char* key) const;
  std::optional<std::string> timestamp(const nlohmann::json& o, const std::string& at,
                                       const char* key, bool required) const;
  // The object's "baselines" (BaselineTimes::to_json's shape: positive times keyed by kind, and
  // "absent": reasons keyed by kind), or where it has none an older kforge's columns (eager_ms,
  // scripted_ms, compiled_ms, compiled_absent). Kinds this kforge does not know are skipped.
  BaselineTimes baselines(const nlohmann::json& o, const std::string& at) const;

 private:
  std::string file_;
  int line_;
};

// One of the outcomes kforge records (docs/design.md, Outcomes).
bool known_outcome(const std::string& outcome);

ImportedLine check_kforge_line(const nlohmann::json& j, const LineChecker& f,
                               const std::string& source_name, const ImportOptions& options);

}  // namespace kforge::archive::detail
