#include "kforge/common/baseline.h"

#include <algorithm>

#include "kforge/common/error.h"

namespace kforge {

const std::vector<BaselineKindInfo>& baseline_kinds() {
  static const std::vector<BaselineKindInfo> kinds = {
      {BaselineKind::Eager, "eager", "eager", "the reference run by LibTorch op by op"},
      {BaselineKind::Scripted, "scripted", "scripted",
       "the reference as TorchScript, its graph fuser on"},
      {BaselineKind::Compiled, "compiled", "compile",
       "torch.compile (TorchInductor, default mode) as an AOTInductor package"},
      {BaselineKind::CompiledMaxAutotune, "compiled_max_autotune", "max-autotune",
       "torch.compile with mode=\"max-autotune\" (GEMMs autotuned over ATen and Triton "
       "templates, CUDA graphs off) as an AOTInductor package"},
  };
  return kinds;
}

const BaselineKindInfo& baseline_info(BaselineKind kind) {
  for (const BaselineKindInfo& info : baseline_kinds())
    if (info.kind == kind) return info;
  throw Error("unknown baseline kind " + std::to_string(static_cast<int>(kind)));
}

std::string_view to_string(BaselineKind kind) {
  return baseline_info(kind).name;
}

std::optional<BaselineKind> baseline_kind_from_string(std::string_view name) {
  for (const BaselineKindInfo& info : baseline_kinds())
    if (info.name == name) return info.kind;
  return std::nullopt;
}

namespace {

size_t order(BaselineKind kind) {
  const auto& kinds = baseline_kinds();
  for (size_t i = 0; i < kinds.size(); ++i)
    if (kinds[i].kind == kind) return i;
  return kinds.size();
}

}  // namespace

const BaselineMs* BaselineTimes::find(BaselineKind kind) const {
  for (const BaselineMs& b : items)
    if (b.kind == kind) return &b;
  return nullptr;
}

std::optional<double> BaselineTimes::ms(BaselineKind kind) const {
  const BaselineMs* b = find(kind);
  return b ? b->ms : std::nullopt;
}

std::string BaselineTimes::absent(BaselineKind kind) const {
  const BaselineMs* b = find(kind);
  return b ? b->absent : "";
}

void BaselineTimes::set(BaselineKind kind, std::optional<double> ms, std::string absent) {
  items.erase(std::remove_if(items.begin(), items.end(),
                             [&](const BaselineMs& b) { return b.kind == kind; }),
              items.end());
  auto at = std::find_if(items.begin(), items.end(),
                         [&](const BaselineMs& b) { return order(b.kind) > order(kind); });
  items.insert(at, BaselineMs{kind, ms, std::move(absent)});
}

std::optional<BaselineMs> BaselineTimes::best() const {
  std::optional<BaselineMs> best;
  for (const BaselineMs& b : items)
    if (b.ms && *b.ms > 0 && (!best || *b.ms < *best->ms)) best = b;
  return best;
}

std::optional<double> BaselineTimes::speedup(BaselineKind kind,
                                             std::optional<double> time_ms) const {
  std::optional<double> base = ms(kind);
  if (!base || !time_ms || *time_ms <= 0) return std::nullopt;
  return *base / *time_ms;
}

std::optional<double> BaselineTimes::best_speedup(std::optional<double> time_ms) const {
  std::optional<BaselineMs> b = best();
  if (!b || !time_ms || *time_ms <= 0) return std::nullopt;
  return *b->ms / *time_ms;
}

nlohmann::json BaselineTimes::speedups_json(std::optional<double> time_ms) const {
  nlohmann::json out = nlohmann::json::object();
  for (const BaselineKindInfo& info : baseline_kinds())
    if (std::optional<double> x = speedup(info.kind, time_ms)) out[std::string(info.name)] = *x;
  if (std::optional<double> x = best_speedup(time_ms)) out[std::string(kBestBaselineLabel)] = *x;
  return out;
}

nlohmann::json BaselineTimes::to_json() const {
  nlohmann::json j = nlohmann::json::object(), absent = nlohmann::json::object();
  for (const BaselineMs& b : items) {
    if (b.ms) j[std::string(to_string(b.kind))] = *b.ms;
    if (!b.absent.empty()) absent[std::string(to_string(b.kind))] = b.absent;
  }
  if (!absent.empty()) j["absent"] = absent;
  return j;
}

BaselineTimes BaselineTimes::from_json(const nlohmann::json& j) {
  BaselineTimes out;
  if (j.is_null()) return out;
  if (!j.is_object()) throw Error("baselines: expected an object of times keyed by kind");
  const nlohmann::json* absent = j.contains("absent") ? &j.at("absent") : nullptr;
  if (absent && !absent->is_object())
    throw Error("baselines.absent: expected an object of reasons keyed by kind");
  for (const BaselineKindInfo& info : baseline_kinds()) {
    std::string name(info.name);
    std::optional<double> ms;
    std::string why;
    if (auto it = j.find(name); it != j.end() && !it->is_null()) {
      if (!it->is_number()) throw Error("baselines." + name + ": expected a time in ms");
      ms = it->get<double>();
    }
    if (absent)
      if (auto it = absent->find(name); it != absent->end()) {
        if (!it->is_string()) throw Error("baselines.absent." + name + ": expected a reason");
        why = it->get<std::string>();
      }
    if (ms || !why.empty()) out.items.push_back({info.kind, ms, why});
  }
  return out;
}

}  // namespace kforge
