// The evaluation columns that an insert and an import's duplicate check bind alike (internal to
// archive/): parameters 3 to 14, from outcome to created_at in the schema's order. The baselines
// are rows of their own (baseline_rows.h).
#pragma once

#include <nlohmann/json.hpp>

#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"

namespace kforge::archive {

inline void bind_evaluation_columns(Statement& s, const EvaluationRecord& e) {
  using nlohmann::json;
  s.bind(3, e.outcome)
      .bind(4, json(e.flags).dump())
      .bind(5, e.evidence.dump())
      .bind(6, e.dims.dump());
  s.bind(7, e.time_ms).bind(8, e.time_iqr_ms).bind(9, e.time_min_ms).bind(10, e.roofline_fraction);
  s.bind(11, int64_t{e.admitted})
      .bind(12, int64_t{e.harness_version})
      .bind(13, e.toolchain.dump())
      .bind(14, e.created_at);
}

}  // namespace kforge::archive
