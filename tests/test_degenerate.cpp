// The degenerate-task detector on tasks built to be degenerate, and on their healthy twins.
#include <gtest/gtest.h>

#include "kforge/tasks/check.h"
#include "test_util.h"

namespace {

using namespace kforge::tasks;
using kforge::test::TempDir;

TaskCheck check_reference(const std::string& params, const std::string& body,
                          const std::string& inputs, const std::string& dims = "N = 256",
                          const std::string& check = "{ N = 64 }") {
  static TempDir dir;
  static int n = 0;
  std::string name = "d" + std::to_string(n++);
  std::string text = "name = \"" + name + "\"\nsummary = \"s\"\nreference = \"\"\"\ndef forward(" +
                     params + "):\n    return " + body + "\n\"\"\"\n[dims]\n" + dims + "\n" +
                     inputs + "\n[check]\ndims = [" + check + "]\n";
  Task t = load_task(dir.write("deg/" + name + ".toml", text));
  CheckOptions opt;
  opt.dims = DimsSelection::Check;
  return check_task(t, opt);
}

std::string input(const std::string& name, const std::string& init = "randn",
                  const std::string& dtype = "float32") {
  return "[[inputs]]\nname = \"" + name + "\"\ndtype = \"" + dtype +
         "\"\nshape = [\"N\"]\ninit = \"" + init + "\"\n";
}

bool mentions(const TaskCheck& c, const std::string& fragment) {
  for (const auto& p : c.problems)
    if (p.find(fragment) != std::string::npos) return true;
  return false;
}

TEST(Degenerate, HealthyTaskPasses) {
  TaskCheck c = check_reference("x: Tensor, y: Tensor", "x * y + 1", input("x") + input("y"));
  EXPECT_TRUE(c.ok()) << (c.problems.empty() ? "" : c.problems[0]);
}

TEST(Degenerate, AllZeroOutput) {
  TaskCheck c = check_reference("x: Tensor", "x * 0.0", input("x"));
  EXPECT_TRUE(mentions(c, "all zero"));
}

TEST(Degenerate, NearConstantOutput) {
  TaskCheck c = check_reference("x: Tensor", "x * 1e-9 + 5.0", input("x"));
  EXPECT_TRUE(mentions(c, "near-constant"));
}

TEST(Degenerate, SaturatedOutputIsConstant) {
  // sigmoid of huge values is exactly 1 everywhere: a kernel writing 1.0 would pass.
  TaskCheck c = check_reference("x: Tensor", "torch.sigmoid(x)", input("x", "uniform(100, 200)"));
  EXPECT_TRUE(mentions(c, "near-constant"));
}

TEST(Degenerate, UnusedInput) {
  TaskCheck c = check_reference("x: Tensor, y: Tensor", "x * 2.0", input("x") + input("y"));
  EXPECT_TRUE(mentions(c, "does not depend on input 'y'"));
  EXPECT_FALSE(mentions(c, "input 'x'"));
}

TEST(Degenerate, InputWhoseEffectVanishes) {
  TaskCheck c = check_reference("x: Tensor, y: Tensor", "x + y * 1e-12", input("x") + input("y"));
  EXPECT_TRUE(mentions(c, "does not depend on input 'y'"));
}

TEST(Degenerate, ScalarOutputIndependentOfSeed) {
  // The mean of sign(x)^2 is 1 for any draw.
  TaskCheck c =
      check_reference("x: Tensor", "torch.mean(torch.sign(x) * torch.sign(x))", input("x"));
  EXPECT_TRUE(mentions(c, "same for 3 seeds"));
}

TEST(Degenerate, ScalarOutputThatVariesPasses) {
  TaskCheck c = check_reference("x: Tensor, y: Tensor", "torch.mean((x - y) * (x - y))",
                                input("x") + input("y"));
  EXPECT_TRUE(c.ok()) << (c.problems.empty() ? "" : c.problems[0]);
}

TEST(Degenerate, NanOutput) {
  TaskCheck c = check_reference("x: Tensor", "torch.log(x)", input("x"));  // log of negative values
  EXPECT_TRUE(mentions(c, "NaN"));
}

TEST(Degenerate, InfOutput) {
  TaskCheck c = check_reference("x: Tensor", "x / 0.0", input("x"));
  EXPECT_TRUE(mentions(c, "Inf"));
}

TEST(Degenerate, ReferenceThatFailsAtRunTime) {
  // Valid TorchScript, but the shapes do not match: reported per configuration, not a crash.
  TaskCheck c = check_reference("x: Tensor", "torch.matmul(x, x.view(2, -1))", input("x"));
  EXPECT_FALSE(c.ok());
  EXPECT_TRUE(mentions(c, "the reference failed"));
}

TEST(Degenerate, JudgedOnTheLargestConfiguration) {
  // softmax over one element is exactly 1: fine at N = 1, degenerate only if that were all we saw.
  TaskCheck c = check_reference("x: Tensor", "torch.softmax(x, -1)", input("x"), "N = 256",
                                "{ N = 1 }, { N = 100 }");
  EXPECT_TRUE(c.ok()) << (c.problems.empty() ? "" : c.problems[0]);
}

TEST(Degenerate, RelativeSpread) {
  EXPECT_EQ(relative_spread(torch::zeros({5})), 0.0);
  EXPECT_DOUBLE_EQ(relative_spread(torch::tensor({1.0, 2.0})), 0.5);
  EXPECT_DOUBLE_EQ(relative_spread(torch::tensor({-4.0, 4.0})), 2.0);
}

}  // namespace
