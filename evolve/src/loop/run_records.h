// The loop's records as it reads them (evolve/src/run.cpp's replay): the archive's run log
// (kforge/archive/run_log.h) in the verify outcomes the loop decides with, at this harness version.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kforge/archive/run_log.h"
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
  std::optional<double> time_ms, roofline_fraction;
  BaselineTimes baselines;  // medians by kind, absent kinds with their reason
  bool admitted = false;
  bool flagged = false;
  std::string summary;
};

// A screen or judgment already recorded for a candidate on this GPU's kind at this harness
// version: read back instead of measured (resume is replay).
std::optional<Screen> find_screen(archive::RunLog& log, int64_t candidate, int64_t device);
void add_screen(archive::RunLog& log, int64_t candidate, int64_t device, int64_t run,
                const Screen& r);
std::optional<Judgment> find_judgment(archive::RunLog& log, int64_t candidate, int64_t device);
Judgment judgment_of(const Evaluation& e);

}  // namespace kforge::evolve::records
