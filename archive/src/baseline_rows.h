// The baselines' rows (schema 7, archive/ only): an evaluation's in evaluation_baselines, a task's
// reference times in baseline_times, one row per kind with its time or why it has none. Every
// write stores a BaselineTimes here and every read model loads them here, one query per set of
// rows, so no query names a kind.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "kforge/archive/sqlite.h"
#include "kforge/common/baseline.h"

namespace kforge::archive::detail {

// Replaces the rows of one evaluation (an evaluations id) or one baselines row by `times`: a row
// per kind with a time or a reason.
void store_evaluation_baselines(Database& db, int64_t evaluation, const BaselineTimes& times);
void store_baseline_times(Database& db, int64_t baseline, const BaselineTimes& times);

// The baselines of each of a list of evaluations, in its order (none, or an evaluation without
// rows: an empty list), in one query. Kinds this kforge does not know (a newer one's rows) are
// skipped.
std::vector<BaselineTimes> evaluation_baselines(
    Database& db, const std::vector<std::optional<int64_t>>& evaluations);
// The reference times of each baselines row, in one query; a row without times maps to an empty
// list.
std::map<int64_t, BaselineTimes> baseline_times(Database& db,
                                                const std::vector<int64_t>& baselines);

// The order of lists by speedup over the best baseline: the larger first, none last.
inline bool larger_speedup_first(std::optional<double> x, std::optional<double> y) {
  return x && (!y || *x > *y);
}

// How many times faster than each kind a kernel of `time_ms` is, and than the best baseline:
// {"eager": x, "scripted": x, ..., "best": x}, every kind of baseline_kinds() (null where it has
// no time, or there is no kernel time).
nlohmann::json speedup_json(const BaselineTimes& times, std::optional<double> time_ms);

}  // namespace kforge::archive::detail
