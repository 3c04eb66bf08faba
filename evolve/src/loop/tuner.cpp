#include "kforge/evolve/tuner.h"

#include <algorithm>
#include <set>

namespace kforge::evolve {
namespace {

using compile::Tunables;

// The fastest measured points, fastest first (ties in point order, for determinism).
std::vector<Tunables> elite_points(const Measured& measured, size_t n) {
  std::vector<std::pair<double, Tunables>> timed;
  for (const auto& [t, ms] : measured)
    if (ms) timed.emplace_back(*ms, t);
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Tunables> out;
  for (size_t i = 0; i < timed.size() && i < n; ++i) out.push_back(timed[i].second);
  return out;
}

// One tunable of `t` moved to a neighbouring value in the plan's list.
Tunables mutate(const compile::Plan& plan, Tunables t, std::mt19937_64& rng) {
  std::vector<size_t> movable;
  for (size_t i = 0; i < plan.tune.size(); ++i)
    if (plan.tune[i].second.size() > 1) movable.push_back(i);
  if (movable.empty()) return t;
  const auto& [name, values] = plan.tune[movable[rng() % movable.size()]];
  size_t at =
      static_cast<size_t>(std::find(values.begin(), values.end(), t.at(name)) - values.begin());
  if (at == values.size()) at = 0;
  bool up = at == 0 || (at + 1 < values.size() && rng() % 2 == 0);
  t[name] = values[up ? at + 1 : at - 1];
  return t;
}

// Every point one listed value away from `t` in one tunable.
std::vector<Tunables> neighbours(const compile::Plan& plan, const Tunables& t) {
  std::vector<Tunables> out;
  for (const auto& [name, values] : plan.tune) {
    size_t at =
        static_cast<size_t>(std::find(values.begin(), values.end(), t.at(name)) - values.begin());
    for (size_t to : {at - 1, at + 1})
      if (at < values.size() && to < values.size()) {
        Tunables n = t;
        n[name] = values[to];
        out.push_back(std::move(n));
      }
  }
  return out;
}

// Each tunable from one of two points.
Tunables cross(const Tunables& a, const Tunables& b, std::mt19937_64& rng) {
  Tunables t = a;
  for (auto& [name, value] : t)
    if (rng() % 2) value = b.at(name);
  return t;
}

}  // namespace

std::vector<Tunables> propose_points(const compile::Plan& plan, const std::vector<Tunables>& space,
                                     const Measured& measured, size_t count, std::mt19937_64& rng,
                                     const TunerOptions& options) {
  std::vector<Tunables> out;
  std::set<Tunables> in_space(space.begin(), space.end()), taken;
  auto take = [&](const Tunables& t) {
    if (out.size() < count && in_space.count(t) && !measured.count(t) && taken.insert(t).second)
      out.push_back(t);
  };
  if (space.size() <= options.exhaustive_max) {
    for (const Tunables& t : space) take(t);
    return out;
  }
  std::vector<Tunables> elite = elite_points(measured, options.elite);
  if (!elite.empty()) {
    size_t evolutionary =
        count - static_cast<size_t>(options.random_share * static_cast<double>(count));
    // First the unmeasured neighbours of the fastest point (one tunable moved one listed value),
    // in random order, then of the next fastest: a local search that follows the best.
    for (const Tunables& e : elite) {
      std::vector<Tunables> near = neighbours(plan, e);
      std::shuffle(near.begin(), near.end(), rng);
      for (const Tunables& t : near) {
        if (out.size() >= evolutionary) break;
        take(t);
      }
    }
    // Then mutations and crossovers of the elite (a bounded number of tries: most may be measured).
    for (size_t tries = 0; out.size() < evolutionary && tries < 20 * count; ++tries) {
      const Tunables& a = elite[rng() % elite.size()];
      take(elite.size() > 1 && rng() % 3 == 0 ? cross(a, elite[rng() % elite.size()], rng)
                                              : mutate(plan, a, rng));
    }
  }
  // Random points (all of the first batch): drawn without replacement from the unmeasured ones.
  std::vector<size_t> unmeasured;
  for (size_t i = 0; i < space.size(); ++i)
    if (!measured.count(space[i]) && !taken.count(space[i])) unmeasured.push_back(i);
  while (out.size() < count && !unmeasured.empty()) {
    size_t pick = rng() % unmeasured.size();
    take(space[unmeasured[pick]]);
    unmeasured[pick] = unmeasured.back();
    unmeasured.pop_back();
  }
  return out;
}

std::optional<size_t> evaluations_to_reach(const compile::Plan& plan,
                                           const std::vector<Tunables>& space,
                                           const Measured& table, const Tunables& start,
                                           int children, int islands, double within, uint64_t seed,
                                           const TunerOptions& options) {
  std::optional<double> best_known;
  for (const auto& [t, ms] : table)
    if (ms && (!best_known || *ms < *best_known)) best_known = ms;
  if (!best_known) return std::nullopt;
  Measured measured;
  std::optional<double> best;
  auto measure = [&](const Tunables& t) {
    auto it = table.find(t);
    std::optional<double> ms = it == table.end() ? std::nullopt : it->second;
    measured[t] = ms;
    if (ms && (!best || *ms < *best)) best = ms;
  };
  auto reached = [&] { return best && *best <= (1 + within) * *best_known; };
  measure(start);
  if (reached()) return measured.size();
  islands = std::max(islands, 1);
  // A generation's children are all screened before the loop looks at them: counted whole.
  for (int g = 1; measured.size() < space.size(); ++g) {
    std::vector<Tunables> generation;
    for (int i = 0; i < islands; ++i) {
      std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                        static_cast<uint32_t>(g), static_cast<uint32_t>(i)};
      std::mt19937_64 rng(seq);
      size_t count = static_cast<size_t>(children / islands + (i < children % islands ? 1 : 0));
      for (const Tunables& t : propose_points(plan, space, measured, count, rng, options)) {
        measured.emplace(t, std::nullopt);  // reserved, as the loop does
        generation.push_back(t);
      }
    }
    if (generation.empty()) break;
    for (const Tunables& t : generation) measure(t);
    if (reached()) return measured.size();
  }
  return std::nullopt;
}

}  // namespace kforge::evolve
