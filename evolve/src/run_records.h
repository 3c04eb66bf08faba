// The loop's records in the archive (evolve/src/run.cpp's replay reads them back): a run's row,
// its candidates' screens and judgments per GPU and harness version.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/run.h"

namespace kforge::evolve::records {

struct Screen {
  verify::Outcome outcome = verify::Outcome::HarnessError;
  std::optional<double> median_ms;
  std::string summary;
};

struct Judgment {
  verify::Outcome outcome = verify::Outcome::HarnessError;
  std::optional<double> time_ms, eager_ms, scripted_ms, compiled_ms, speedup_eager,
      roofline_fraction;
  bool admitted = false;
  bool flagged = false;
  std::string summary;
};

// A screen or judgment already recorded for a candidate on this GPU at this harness version: read
// back instead of measured (resume is replay).
std::optional<int64_t> find_candidate(archive::Database& db, archive::TaskId task,
                                      const std::string& identity);
std::optional<Screen> find_screen(archive::Database& db, int64_t candidate, int64_t device);
void add_screen(archive::Database& db, int64_t candidate, int64_t device, int64_t run,
                const Screen& r);
std::optional<Judgment> find_judgment(archive::Database& db, int64_t candidate, int64_t device);
Judgment judgment_of(const Evaluation& e);
// The run's row: created with its config, updated with its status and what it spent.
int64_t start_run(archive::Database& db, const RunConfig& config);
void finish_run(archive::Database& db, int64_t run, const std::string& status,
                const nlohmann::json& used);
double recorded_wall_s(archive::Database& db, int64_t run);

}  // namespace kforge::evolve::records
