#include "kforge/archive/lineage.h"

#include <utility>

namespace kforge::archive {
namespace {

constexpr std::pair<LineageKind, std::string_view> kKinds[] = {
    {LineageKind::Manual, "manual"},
    {LineageKind::Seed, "seed"},
    {LineageKind::Archive, "archive"},
    {LineageKind::Tune, "tune"},
    {LineageKind::Import, "import"},
    {LineageKind::Translate, "translate"},
    {LineageKind::Optimize, "optimize"},
    {LineageKind::Crossover, "crossover"},
    {LineageKind::RepairCompile, "repair_compile"},
    {LineageKind::RepairWrong, "repair_wrong"},
    {LineageKind::Idea, "idea"}};

constexpr std::pair<Origin, std::string_view> kOrigins[] = {{Origin::Kforge, "kforge"},
                                                            {Origin::Imported, "imported"}};

}  // namespace

const std::vector<LineageKind>& lineage_kinds() {
  static const std::vector<LineageKind> all = [] {
    std::vector<LineageKind> v;
    for (const auto& [kind, name] : kKinds) v.push_back(kind);
    return v;
  }();
  return all;
}

std::string_view to_string(LineageKind kind) {
  for (const auto& [k, name] : kKinds)
    if (k == kind) return name;
  return "?";
}

std::optional<LineageKind> lineage_kind_from_string(std::string_view name) {
  for (const auto& [k, n] : kKinds)
    if (n == name) return k;
  return std::nullopt;
}

std::string lineage_kinds_text() {
  std::string out;
  for (const auto& [k, name] : kKinds) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

std::string_view to_string(Origin origin) {
  for (const auto& [o, name] : kOrigins)
    if (o == origin) return name;
  return "?";
}

std::optional<Origin> origin_from_string(std::string_view name) {
  for (const auto& [o, n] : kOrigins)
    if (n == name) return o;
  return std::nullopt;
}

}  // namespace kforge::archive
