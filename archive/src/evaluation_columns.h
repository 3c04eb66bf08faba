// The evaluation columns that an insert and an import's duplicate check bind alike (internal to
// archive/): parameters 3 to 20, from outcome to created_at in the schema's order, then schema 5's
// compiled_ms and speedup_compiled.
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
  s.bind(7, e.time_ms)
      .bind(8, e.time_iqr_ms)
      .bind(9, e.time_min_ms)
      .bind(10, e.eager_ms)
      .bind(11, e.scripted_ms);
  s.bind(12, e.speedup_eager).bind(13, e.speedup_scripted).bind(14, e.roofline_fraction);
  s.bind(15, int64_t{e.admitted})
      .bind(16, int64_t{e.harness_version})
      .bind(17, e.toolchain.dump())
      .bind(18, e.created_at);
  s.bind(19, e.compiled_ms).bind(20, e.speedup_compiled);
}

}  // namespace kforge::archive
