// The offline proposer's search over one kernel's tune space (docs/evolve.md, "The tuner"): which
// points to screen next, given the points measured so far. Exhaustive when the space is small;
// otherwise random points first, then an evolutionary search around the fastest (each child
// changes one tunable of a good point to a neighbouring value, or mixes two good points), topped
// up with random points. Never proposes a point already measured. Deterministic in its random
// stream, so a resumed run proposes what the uninterrupted run would have.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "kforge/compile/plan.h"

namespace kforge::evolve {

struct TunerOptions {
  size_t exhaustive_max =
      16;  // spaces up to this many points (two generations) are measured in order, all of them
  size_t elite = 4;            // the fastest points the evolutionary step works from
  double random_share = 0.25;  // of each batch past the first, random points (exploration)
};

// A measured point: its screen median, or none when it did not screen correct.
using Measured = std::map<compile::Tunables, std::optional<double>>;

// Up to `count` points of `space` (tune_space's list, in order) not in `measured`.
std::vector<compile::Tunables> propose_points(const compile::Plan& plan,
                                              const std::vector<compile::Tunables>& space,
                                              const Measured& measured, size_t count,
                                              std::mt19937_64& rng,
                                              const TunerOptions& options = {});

// The loop's tuning of one kernel replayed against a table of measured points (docs/benchmarks.md,
// "The tuner"): the start point first, then per generation `islands` batches of `children /
// islands` points from propose_points, each "measured" by looking it up in `table` (a point not in
// the table did not screen correct). Returns how many points were measured, the start included,
// until the fastest measured was within `within` (0.03: 3 %) of the table's fastest; nullopt if
// never.
std::optional<size_t> evaluations_to_reach(const compile::Plan& plan,
                                           const std::vector<compile::Tunables>& space,
                                           const Measured& table, const compile::Tunables& start,
                                           int children, int islands, double within, uint64_t seed,
                                           const TunerOptions& options = {});

}  // namespace kforge::evolve
