// A task's population (issue 37): its families (kernels that share code and differ in tunables,
// each with its tune space and the points screened), its members (correct kernels judged in full,
// spread over islands and cells), its best, and the failed model children waiting for a repair.
// Parent selection, crossover partners, migration and acceptance are here; when to do them is the
// loop's. Pure logic over the loop's records: no GPU, no archive, no threads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kforge/compile/plan.h"
#include "kforge/evolve/prompt.h"
#include "kforge/evolve/tuner.h"

namespace kforge::evolve::loop {

// Kernels that share code (source and plan) and differ in tunables: one tune space.
struct Family {
  std::string source, plan;
  compile::Plan parsed;
  std::vector<compile::Tunables> space;
  Measured measured;  // screened points (median, or none when not correct); reserved when proposed
};

struct Member {
  int64_t id = 0;  // the candidate's archive id
  std::string family;
  compile::Tunables tunables;
  double time_ms = 0;  // judged in full
  std::string cell;
  int island = 0;
};

// The operator weights for a child that is not a repair or a translation.
struct OperatorWeights {
  double optimize = 0.5, crossover = 0.25, ideas = 0.25;
};

// What the model is asked for one child: the operator and its parents.
struct Choice {
  PromptKind kind = PromptKind::Optimize;
  int64_t parent = 0;
  std::optional<int64_t> second_parent;
};

class Population {
 public:
  // Selection: the island's fastest with probability `best`, a random cell's elite with `elite`,
  // else a random member of the island (all members when the island has none).
  Population(int islands, double select_best, double select_elite)
      : islands_(std::max(islands, 1)), select_best_(select_best), select_elite_(select_elite) {}

  static std::string family_key(const std::string& source, const std::string& plan);
  Family* family(const std::string& key);
  // The family of this code, made with `make` when it is new.
  template <typename Make>
  Family& family(const std::string& source, const std::string& plan, Make&& make) {
    std::string key = family_key(source, plan);
    auto it = families_.find(key);
    if (it == families_.end()) it = families_.emplace(key, make()).first;
    return it->second;
  }

  int islands() const { return islands_; }
  const std::vector<Member>& members() const { return members_; }
  const std::optional<Member>& best() const { return best_; }
  bool empty() const { return members_.empty(); }

  // A correct kernel judged in full joins; it becomes the best when it `wins` (archive/winner.h)
  // and is faster than the best so far (on equal times the first stays). Returns whether it did.
  bool accept(const Member& m, bool wins);

  // select_parent and choose need a member (!empty()).
  const Member& select_parent(int island, std::mt19937_64& rng) const;
  // Optimize, crossover or ideas, drawn by the weights. Crossover needs a second parent of other
  // code (from another island first, else another cell, the fastest among equals); without one
  // the child optimizes.
  Choice choose(const OperatorWeights& weights, int island, std::mt19937_64& rng) const;
  // Each island's best is copied to the next island (where it is not already): a ring, so the
  // best travels one island further each time.
  void migrate();

  // The model's failed children waiting for a repair (their id and which repair), oldest first,
  // and how deep in repairs each child is (a repair of a repair: 2).
  void wait_for_repair(int64_t id, PromptKind kind) { repairs_.emplace_back(id, kind); }
  std::vector<std::pair<int64_t, PromptKind>> take_repairs() { return std::exchange(repairs_, {}); }
  int repair_depth(int64_t id) const;
  void set_repair_depth(int64_t id, int depth) { repair_depth_[id] = depth; }

 private:
  int islands_;
  double select_best_, select_elite_;
  std::map<std::string, Family> families_;
  std::vector<Member> members_;
  std::optional<Member> best_;
  std::vector<std::pair<int64_t, PromptKind>> repairs_;
  std::map<int64_t, int> repair_depth_;
};

}  // namespace kforge::evolve::loop
