#include "baseline_rows.h"

#include <string>

namespace kforge::archive::detail {
namespace {

using nlohmann::json;

// A table of baseline rows and the column naming the row they belong to.
struct Rows {
  const char* table;
  const char* owner;
};
constexpr Rows kEvaluationRows{"evaluation_baselines", "evaluation_id"};
constexpr Rows kBaselineRows{"baseline_times", "baseline_id"};

void store(Database& db, const Rows& rows, int64_t owner, const BaselineTimes& times) {
  Statement clear =
      db.prepare(std::string("DELETE FROM ") + rows.table + " WHERE " + rows.owner + " = ?");
  clear.bind(1, owner).run();
  for (const BaselineMs& b : times.items) {
    if (!b.ms && b.absent.empty()) continue;  // nothing to say about this kind
    Statement s = db.prepare(std::string("INSERT INTO ") + rows.table + " (" + rows.owner +
                             ", kind, ms, absent) VALUES (?, ?, ?, ?)");
    s.bind(1, owner).bind(2, std::string(to_string(b.kind))).bind(3, b.ms);
    if (b.absent.empty())
      s.bind_null(4);
    else
      s.bind(4, b.absent);
    s.run();
  }
}

std::map<int64_t, BaselineTimes> load(Database& db, const Rows& rows,
                                      const std::vector<int64_t>& ids) {
  std::map<int64_t, BaselineTimes> out;
  if (ids.empty()) return out;
  for (int64_t id : ids) out[id];
  Statement s =
      db.prepare(std::string("SELECT ") + rows.owner + ", kind, ms, absent FROM " + rows.table +
                 " WHERE " + rows.owner + " IN (SELECT value FROM json_each(?))");
  s.bind(1, json(ids).dump());
  while (s.step())
    if (std::optional<BaselineKind> kind = baseline_kind_from_string(s.text(1)))
      out[s.integer(0)].set(*kind, s.maybe_real(2), s.is_null(3) ? "" : s.text(3));
  return out;
}

}  // namespace

void store_evaluation_baselines(Database& db, int64_t evaluation, const BaselineTimes& times) {
  store(db, kEvaluationRows, evaluation, times);
}

void store_baseline_times(Database& db, int64_t baseline, const BaselineTimes& times) {
  store(db, kBaselineRows, baseline, times);
}

std::vector<BaselineTimes> evaluation_baselines(
    Database& db, const std::vector<std::optional<int64_t>>& evaluations) {
  std::vector<int64_t> ids;
  for (const std::optional<int64_t>& id : evaluations)
    if (id) ids.push_back(*id);
  std::map<int64_t, BaselineTimes> loaded = load(db, kEvaluationRows, ids);
  std::vector<BaselineTimes> out;
  for (const std::optional<int64_t>& id : evaluations)
    out.push_back(id ? loaded[*id] : BaselineTimes{});
  return out;
}

std::map<int64_t, BaselineTimes> baseline_times(Database& db,
                                                const std::vector<int64_t>& baselines) {
  return load(db, kBaselineRows, baselines);
}

json speedup_json(const BaselineTimes& times, std::optional<double> time_ms) {
  json out = times.speedups_json(time_ms);
  for (const BaselineKindInfo& info : baseline_kinds())  // every kind named, null where unmeasured
    if (!out.contains(std::string(info.name))) out[std::string(info.name)] = nullptr;
  if (!out.contains(std::string(kBestBaselineLabel)))
    out[std::string(kBestBaselineLabel)] = nullptr;
  return out;
}

}  // namespace kforge::archive::detail
