// The list of baselines keyed by kind (common/baseline.h): one entry per kind, the best kind, the
// speedups, and the JSON shape every layer stores.
#include <gtest/gtest.h>

#include <set>

#include "kforge/common/baseline.h"
#include "kforge/common/error.h"

using kforge::BaselineKind;
using kforge::BaselineTimes;

TEST(Baseline, EveryKindHasOneNameAndOneLabelThatReadBack) {
  std::set<std::string_view> names, labels;
  for (const kforge::BaselineKindInfo& info : kforge::baseline_kinds()) {
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_TRUE(labels.insert(info.label).second) << info.label;
    EXPECT_NE(info.label, kforge::kBestBaselineLabel);
    EXPECT_EQ(kforge::baseline_kind_from_string(info.name), info.kind);
    EXPECT_EQ(kforge::to_string(info.kind), info.name);
  }
  EXPECT_EQ(names.size(), 4u);
  EXPECT_FALSE(kforge::baseline_kind_from_string("compile").has_value());  // a label, not a name
}

TEST(Baseline, SetKeepsOneEntryPerKindInTheListsOrder) {
  BaselineTimes b;
  b.set(BaselineKind::CompiledMaxAutotune, 0.5);
  b.set(BaselineKind::Eager, 2.0);
  b.set(BaselineKind::Compiled, std::nullopt, "no Python with PyTorch");
  b.set(BaselineKind::Eager, 1.5);
  ASSERT_EQ(b.items.size(), 3u);
  EXPECT_EQ(b.items[0].kind, BaselineKind::Eager);
  EXPECT_EQ(b.items[1].kind, BaselineKind::Compiled);
  EXPECT_EQ(b.items[2].kind, BaselineKind::CompiledMaxAutotune);
  EXPECT_EQ(b.ms(BaselineKind::Eager), 1.5);
  EXPECT_FALSE(b.ms(BaselineKind::Scripted).has_value());
  EXPECT_EQ(b.absent(BaselineKind::Compiled), "no Python with PyTorch");
}

TEST(Baseline, TheBestIsTheFastestKindMeasuredAndSpeedupsDivideByTheKernelsTime) {
  BaselineTimes b;
  b.set(BaselineKind::Eager, 4.0);
  b.set(BaselineKind::Scripted, 3.0);
  b.set(BaselineKind::Compiled, std::nullopt, "absent");
  b.set(BaselineKind::CompiledMaxAutotune, 2.0);
  ASSERT_TRUE(b.best().has_value());
  EXPECT_EQ(b.best()->kind, BaselineKind::CompiledMaxAutotune);
  EXPECT_DOUBLE_EQ(*b.speedup(BaselineKind::Eager, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(*b.best_speedup(1.0), 2.0);
  EXPECT_FALSE(b.speedup(BaselineKind::Compiled, 1.0).has_value());
  EXPECT_FALSE(b.best_speedup(std::nullopt).has_value());
  EXPECT_FALSE(b.best_speedup(0.0).has_value());
  EXPECT_FALSE(BaselineTimes{}.best().has_value());
}

TEST(Baseline, JsonRoundTripsTimesAndReasonsAndNamesABadField) {
  BaselineTimes b;
  b.set(BaselineKind::Eager, 1.25);
  b.set(BaselineKind::Compiled, std::nullopt, "LibTorch 1.13 cannot load packages");
  nlohmann::json j = b.to_json();
  EXPECT_EQ(j["eager"], 1.25);
  EXPECT_EQ(j["absent"]["compiled"], "LibTorch 1.13 cannot load packages");
  BaselineTimes back = BaselineTimes::from_json(j);
  ASSERT_EQ(back.items.size(), 2u);
  EXPECT_EQ(back.ms(BaselineKind::Eager), 1.25);
  EXPECT_EQ(back.absent(BaselineKind::Compiled), "LibTorch 1.13 cannot load packages");
  // A kind a newer kforge knows is skipped; a time that is not a number names its field.
  EXPECT_EQ(BaselineTimes::from_json({{"eager", 1.0}, {"tensorrt", 0.5}}).items.size(), 1u);
  try {
    BaselineTimes::from_json({{"scripted", "fast"}});
    FAIL() << "no error";
  } catch (const kforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("baselines.scripted"), std::string::npos) << e.what();
  }
}

TEST(Baseline, SpeedupsNameEachKindMeasuredAndTheBest) {
  BaselineTimes b;
  b.set(BaselineKind::Eager, 3.0);
  b.set(BaselineKind::Compiled, std::nullopt, "absent");
  b.set(BaselineKind::CompiledMaxAutotune, 1.5);
  nlohmann::json x = b.speedups_json(0.5);
  EXPECT_DOUBLE_EQ(x["eager"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(x["compiled_max_autotune"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(x["best"].get<double>(), 3.0);
  EXPECT_FALSE(x.contains("compiled")) << x.dump();
  EXPECT_TRUE(b.speedups_json(std::nullopt).empty());
}
