// Every shipped task loads, its reference runs on every check configuration on the CPU, and it is
// not degenerate (the same as `kforge tasks check tasks/<suite> --device cpu --dims check`).
#include <gtest/gtest.h>

#include "kforge/tasks/check.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace kforge::tasks;

std::vector<fs::path> shipped_tasks() {
  std::vector<fs::path> out;
  for (const char* suite : {"smoke", "level1", "level2"})
    for (const auto& f : resolve_tasks(suite, kforge::test::source_dir() / "tasks"))
      out.push_back(f);
  return out;
}

TEST(ShippedSuites, HaveThePromisedSize) {
  fs::path root = kforge::test::source_dir() / "tasks";
  EXPECT_GE(resolve_tasks("smoke", root).size(), 3u);
  EXPECT_LE(resolve_tasks("smoke", root).size(), 5u);
  EXPECT_GE(resolve_tasks("level1", root).size(), 40u);
  EXPECT_GE(resolve_tasks("level2", root).size(), 15u);
}

class ShippedTask : public ::testing::TestWithParam<fs::path> {};

TEST_P(ShippedTask, ChecksCleanOnTheCpu) {
  Task t = load_task(GetParam());
  EXPECT_FALSE(t.check_dims.empty()) << "every task needs [check].dims with awkward sizes";
  for (const auto& d : t.all_dims())
    EXPECT_LE(t.input_bytes(d), int64_t{4500} * 1000 * 1000)
        << "input set over ~4 GB at " << format_dims(d);
  CheckOptions opt;
  opt.dims = DimsSelection::Check;
  TaskCheck c = check_task(t, opt);
  for (const auto& p : c.problems) ADD_FAILURE() << t.id() << ": " << p;
  EXPECT_EQ(c.configs.size(), t.check_dims.size());
  // The generator draws the same inputs twice (a pure function of the seed).
  for (size_t k = 0; k < t.inputs.size(); ++k)
    EXPECT_TRUE(torch::equal(generate_cpu(t, k, t.check_dims[0], 5, 0),
                             generate_cpu(t, k, t.check_dims[0], 5, 0)));
}

INSTANTIATE_TEST_SUITE_P(All, ShippedTask, ::testing::ValuesIn(shipped_tasks()),
                         [](const auto& info) {
                           return kforge::test::test_name(
                               info.param.parent_path().filename().string() + "_" +
                               info.param.stem().string());
                         });

}  // namespace
