// Writing a judged candidate to the archive: what `kforge verify` and `kforge corpus` share.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kforge/compile/candidate.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/outcome.h"

namespace kforge::cli {

// The admission verdict as stored in the evaluation's evidence and printed by --json.
nlohmann::json admission_json(const verify::Verdict& admission);

// The candidate, its compile report and its evaluation (with its admission, when there was
// one), in one transaction of the archive at `db` (default location when empty). `prompt_kind`:
// how the candidate was made (manual, seed, ...: the archive's candidates.prompt_kind).
void store_verdict(const std::string& db, const tasks::Task& task, const std::string& source, const std::string& plan,
                   const compile::CandidateReport& r, const verify::Verdict& v,
                   const std::optional<verify::Verdict>& admission, const std::string& prompt_kind = "manual");

}  // namespace kforge::cli
