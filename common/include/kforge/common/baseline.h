// The baselines a kernel is measured against, as one list keyed by kind (docs/design.md,
// "Baselines"). Every layer (the judge's timing, the GPU wire, the archive, JSONL, prompts, tables,
// the report, the web view, the export manifest) iterates baseline_kinds(): adding a kind is its
// enum value and row below, and how verify/ times it, nothing else.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kforge {

enum class BaselineKind { Eager, Scripted, Compiled, CompiledMaxAutotune };

struct BaselineKindInfo {
  BaselineKind kind;
  std::string_view name;   // stored spelling: archive rows, JSON keys, manifests ("compiled")
  std::string_view label;  // short column heading ("compile")
  std::string_view about;  // one line for docs, prompts and `--help`
};

// Every kind, in the order tables show them.
const std::vector<BaselineKindInfo>& baseline_kinds();
const BaselineKindInfo& baseline_info(BaselineKind kind);
std::string_view to_string(BaselineKind kind);  // the stored name
std::optional<BaselineKind> baseline_kind_from_string(std::string_view name);

// The label of the best baseline (the fastest kind measured): the figure a kernel has to beat.
inline constexpr std::string_view kBestBaselineLabel = "best";

// One kind's median time, or why it has none.
struct BaselineMs {
  BaselineKind kind = BaselineKind::Eager;
  std::optional<double> ms;
  std::string absent;  // why there is no time ("" when there is one, or nobody said)
};

// A list of baseline times keyed by kind (at most one entry per kind, in baseline_kinds() order).
struct BaselineTimes {
  std::vector<BaselineMs> items;

  // The kind's time; none when it was not measured.
  std::optional<double> ms(BaselineKind kind) const;
  // Why the kind has no time ("" when it has one or nobody said).
  std::string absent(BaselineKind kind) const;
  const BaselineMs* find(BaselineKind kind) const;
  // Sets the kind's entry (replacing one there), keeping the list in baseline_kinds() order.
  void set(BaselineKind kind, std::optional<double> ms, std::string absent = "");
  bool empty() const { return items.empty(); }

  // The fastest kind with a time; none when no kind has one.
  std::optional<BaselineMs> best() const;
  // baseline / time: how many times faster a kernel of `time_ms` is; none without a baseline time
  // or a positive kernel time.
  std::optional<double> speedup(BaselineKind kind, std::optional<double> time_ms) const;
  std::optional<double> best_speedup(std::optional<double> time_ms) const;
  // {"eager": x, "scripted": x, ..., "best": x}: a kernel's speedups over each kind measured and
  // over the best (kinds without a time are left out).
  nlohmann::json speedups_json(std::optional<double> time_ms) const;

  // {"eager": ms, "scripted": ms, ..., "absent": {"compiled": why}} (kinds without a time and
  // without a reason are left out); from_json reads that shape back and ignores kinds it does not
  // know (a newer kforge's), throwing kforge::Error on a time that is not a number.
  nlohmann::json to_json() const;
  static BaselineTimes from_json(const nlohmann::json& j);
};

}  // namespace kforge
