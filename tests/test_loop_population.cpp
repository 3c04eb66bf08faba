// A task's population alone (evolve/src/loop/population.h): acceptance and the best, parent
// selection, the operator and crossover partner, migration between islands, the repair queue and
// depths, and families keyed by code.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "loop/population.h"

namespace kforge::evolve::loop {
namespace {

Member member(int64_t id, const std::string& family, double time_ms, const std::string& cell,
              int island) {
  Member m;
  m.id = id;
  m.family = family;
  m.time_ms = time_ms;
  m.cell = cell;
  m.island = island;
  return m;
}

// The best is the fastest winner; a non-winner joins but never becomes best; equal times keep the
// first.
TEST(LoopPopulation, AcceptKeepsTheFastestWinner) {
  Population pop(2, 1, 0);
  EXPECT_TRUE(pop.empty());
  EXPECT_FALSE(pop.accept(member(1, "f", 2, "c", 0), false));  // fast, but does not win
  EXPECT_FALSE(pop.empty());
  EXPECT_FALSE(pop.best().has_value());
  EXPECT_TRUE(pop.accept(member(2, "f", 5, "c", 0), true));
  ASSERT_TRUE(pop.best().has_value());
  EXPECT_EQ(pop.best()->id, 2);
  EXPECT_FALSE(pop.accept(member(3, "f", 1, "c", 1), false));  // faster still, not a winner
  EXPECT_EQ(pop.best()->id, 2);
  EXPECT_TRUE(pop.accept(member(4, "f", 4, "c", 1), true));
  EXPECT_EQ(pop.best()->id, 4);
  EXPECT_FALSE(pop.accept(member(5, "f", 4, "c", 0), true));  // as fast: the first stays
  EXPECT_EQ(pop.best()->id, 4);
  EXPECT_FALSE(pop.accept(member(6, "f", 9, "c", 0), true));  // slower
  EXPECT_EQ(pop.best()->id, 4);
  ASSERT_EQ(pop.members().size(), 6u);
  for (int64_t k = 0; k < 6; ++k) EXPECT_EQ(pop.members()[k].id, k + 1);
}

// With select_best = 1 the parent is the island's fastest; an empty island draws from everyone.
TEST(LoopPopulation, SelectBestGivesTheIslandsFastest) {
  Population pop(3, 1, 0);
  pop.accept(member(1, "a", 5, "c1", 0), true);
  pop.accept(member(2, "b", 2, "c2", 0), true);
  pop.accept(member(3, "c", 7, "c1", 0), true);
  pop.accept(member(4, "d", 1, "c1", 1), true);
  pop.accept(member(5, "e", 3, "c2", 1), true);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed);
    EXPECT_EQ(pop.select_parent(0, rng).id, 2);
    EXPECT_EQ(pop.select_parent(1, rng).id, 4);
    EXPECT_EQ(pop.select_parent(2, rng).id, 4);  // island 2 has no members
  }
}

// A uniform draw (select_best = select_elite = 0) stays on the island and reaches each of its
// members.
TEST(LoopPopulation, RandomSelectionStaysOnTheIsland) {
  Population pop(2, 0, 0);
  pop.accept(member(1, "a", 5, "c1", 0), true);
  pop.accept(member(2, "b", 2, "c2", 0), true);
  pop.accept(member(3, "c", 7, "c1", 0), true);
  pop.accept(member(4, "d", 1, "c1", 1), true);
  std::mt19937_64 rng(7);
  std::set<int64_t> drawn;
  for (int k = 0; k < 200; ++k) drawn.insert(pop.select_parent(0, rng).id);
  EXPECT_EQ(drawn, (std::set<int64_t>{1, 2, 3}));
}

// Crossover's second parent has other code, from another island first (over a faster one on the
// same island), and never shares the parent's family even when faster.
TEST(LoopPopulation, CrossoverPrefersOtherFamilyOnAnotherIsland) {
  Population pop(2, 1, 0);
  pop.accept(member(1, "f1", 1, "c1", 0), true);    // the parent: island 0's fastest
  pop.accept(member(2, "f2", 2, "c2", 0), true);    // other code, same island
  pop.accept(member(3, "f1", 0.5, "c3", 1), true);  // same code as the parent
  pop.accept(member(4, "f3", 9, "c1", 1), true);    // other code, other island (same cell)
  std::mt19937_64 rng(1);
  Choice c = pop.choose({0, 1, 0}, 0, rng);
  EXPECT_EQ(c.kind, PromptKind::Crossover);
  EXPECT_EQ(c.parent, 1);
  ASSERT_TRUE(c.second_parent.has_value());
  EXPECT_EQ(*c.second_parent, 4);

  // Another island and another cell comes first; among equals, the fastest.
  pop.accept(member(5, "f4", 8, "c4", 1), true);
  pop.accept(member(6, "f5", 6, "c5", 1), true);
  c = pop.choose({0, 1, 0}, 0, rng);
  EXPECT_EQ(c.kind, PromptKind::Crossover);
  ASSERT_TRUE(c.second_parent.has_value());
  EXPECT_EQ(*c.second_parent, 6);
}

// With no other island's member of other code, the second parent comes from another cell.
TEST(LoopPopulation, CrossoverFallsBackToAnotherCellOnTheIsland) {
  Population pop(2, 1, 0);
  pop.accept(member(1, "f1", 1, "c1", 0), true);
  pop.accept(member(2, "f2", 3, "c1", 0), true);  // same cell
  pop.accept(member(3, "f3", 4, "c2", 0), true);  // another cell, slower
  pop.accept(member(4, "f1", 2, "c9", 1), true);  // other island, but the parent's code
  std::mt19937_64 rng(2);
  Choice c = pop.choose({0, 1, 0}, 0, rng);
  EXPECT_EQ(c.kind, PromptKind::Crossover);
  ASSERT_TRUE(c.second_parent.has_value());
  EXPECT_EQ(*c.second_parent, 3);
}

// When every member shares the parent's family, crossover gives way to Optimize with no second
// parent.
TEST(LoopPopulation, CrossoverWithoutOtherCodeOptimizes) {
  Population pop(2, 1, 0);
  pop.accept(member(1, "f1", 3, "c1", 0), true);
  pop.accept(member(2, "f1", 1, "c2", 0), true);
  pop.accept(member(3, "f1", 2, "c1", 1), true);
  std::mt19937_64 rng(3);
  Choice c = pop.choose({0, 1, 0}, 0, rng);
  EXPECT_EQ(c.kind, PromptKind::Optimize);
  EXPECT_EQ(c.parent, 2);
  EXPECT_FALSE(c.second_parent.has_value());
}

// The weights pick the operator: {0,0,1} always Ideas, {1,0,0} always Optimize, neither with a
// second parent.
TEST(LoopPopulation, WeightsPickTheOperator) {
  Population pop(2, 1, 0);
  pop.accept(member(1, "f1", 3, "c1", 0), true);
  pop.accept(member(2, "f2", 1, "c2", 1), true);
  std::mt19937_64 rng(4);
  for (int k = 0; k < 20; ++k) {
    Choice ideas = pop.choose({0, 0, 1}, 0, rng);
    EXPECT_EQ(ideas.kind, PromptKind::Ideas);
    EXPECT_EQ(ideas.parent, 1);
    EXPECT_FALSE(ideas.second_parent.has_value());
    Choice optimize = pop.choose({1, 0, 0}, 1, rng);
    EXPECT_EQ(optimize.kind, PromptKind::Optimize);
    EXPECT_EQ(optimize.parent, 2);
    EXPECT_FALSE(optimize.second_parent.has_value());
  }
}

// Migration copies each island's best (same id, time and code) to the next island, once.
TEST(LoopPopulation, MigrateCopiesEachIslandsBestOnce) {
  Population pop(2, 1, 0);
  pop.accept(member(1, "f1", 1, "c1", 0), true);
  pop.accept(member(2, "f2", 3, "c2", 0), true);
  pop.accept(member(3, "f3", 2, "c1", 1), true);
  pop.migrate();
  ASSERT_EQ(pop.members().size(), 5u);
  std::set<std::pair<int64_t, int>> where;  // (id, island)
  for (const Member& m : pop.members()) where.emplace(m.id, m.island);
  EXPECT_EQ(where, (std::set<std::pair<int64_t, int>>{{1, 0}, {2, 0}, {3, 1}, {1, 1}, {3, 0}}));
  for (const Member& m : pop.members())
    if (m.id == 1 && m.island == 1) {
      EXPECT_EQ(m.family, "f1");
      EXPECT_DOUBLE_EQ(m.time_ms, 1);
      EXPECT_EQ(m.cell, "c1");
    }
  // The migrant is now island 1's fastest.
  std::mt19937_64 rng(5);
  EXPECT_EQ(pop.select_parent(1, rng).id, 1);
  pop.migrate();
  EXPECT_EQ(pop.members().size(), 5u);
}

// Failed children wait for a repair oldest first; taking them empties the queue; depth is 0 unless
// set.
TEST(LoopPopulation, RepairQueueAndDepth) {
  Population pop(1, 1, 0);
  EXPECT_TRUE(pop.take_repairs().empty());
  pop.wait_for_repair(7, PromptKind::RepairCompile);
  pop.wait_for_repair(3, PromptKind::RepairWrong);
  pop.wait_for_repair(9, PromptKind::RepairCompile);
  auto taken = pop.take_repairs();
  EXPECT_EQ(taken, (std::vector<std::pair<int64_t, PromptKind>>{{7, PromptKind::RepairCompile},
                                                                {3, PromptKind::RepairWrong},
                                                                {9, PromptKind::RepairCompile}}));
  EXPECT_TRUE(pop.take_repairs().empty());
  pop.wait_for_repair(4, PromptKind::RepairWrong);
  EXPECT_EQ(pop.take_repairs(),
            (std::vector<std::pair<int64_t, PromptKind>>{{4, PromptKind::RepairWrong}}));

  EXPECT_EQ(pop.repair_depth(7), 0);
  pop.set_repair_depth(7, 2);
  EXPECT_EQ(pop.repair_depth(7), 2);
  EXPECT_EQ(pop.repair_depth(3), 0);
  pop.set_repair_depth(7, 1);
  EXPECT_EQ(pop.repair_depth(7), 1);
}

// A family is made once per code (source and plan) and found again by its key; other code is
// another family.
TEST(LoopPopulation, FamiliesAreMadeOncePerCode) {
  Population pop(1, 1, 0);
  int made = 0;
  auto make = [&] {
    ++made;
    Family f;
    f.source = "made " + std::to_string(made);
    return f;
  };
  Family& first = pop.family("src", "plan A", make);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(first.source, "made 1");
  first.space.push_back({{"BLOCK", 128}});
  Family& again = pop.family("src", "plan A", make);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(&again, &first);
  EXPECT_EQ(again.space.size(), 1u);
  EXPECT_EQ(pop.family(Population::family_key("src", "plan A")), &first);

  EXPECT_NE(Population::family_key("src", "plan A"), Population::family_key("src", "plan B"));
  EXPECT_NE(Population::family_key("src", "plan A"), Population::family_key("src2", "plan A"));
  EXPECT_NE(Population::family_key("ab", "c"), Population::family_key("a", "bc"));
  EXPECT_EQ(Population::family_key("src", "plan A"), Population::family_key("src", "plan A"));
  Family& other = pop.family("src", "plan B", make);
  EXPECT_EQ(made, 2);
  EXPECT_NE(&other, &first);
  EXPECT_EQ(other.source, "made 2");
  EXPECT_EQ(pop.family("no such key"), nullptr);
}

}  // namespace
}  // namespace kforge::evolve::loop
