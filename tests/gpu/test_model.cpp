// `kforge model profile` and `kforge model check` on a GPU (docs/model.md), on the GPT-2 block of
// tests/models/: every chain's kernels timed and counted to it (their sum and the kernels outside
// the chains make the traced graph's GPU time), the top chains imported as a suite checked on the
// GPU, and the model checked and timed end to end with each chain replaced by its task's
// reference (a `kforge export --fallback` package): correct, every op called, none falling back,
// against eager and torch.compile.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../test_util.h"
#include "gpu_test_util.h"

using namespace kforge::test;
using nlohmann::json;

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str(), nullptr, false);
}

}  // namespace

TEST(GpuModel, ProfileTimesEveryChainAndCheckTimesTheModelEndToEnd) {
  KFORGE_REQUIRE_GPU();
  REQUIRE_TORCH();
  TempDir dir;
  std::string model = (source_dir() / "tests/models/transformer_block.py").string();
  std::string k = KFORGE_BINARY;
  CliResult p = run_command(
      "(" + k + " model profile " + model + " --device cuda --suite gm --top 7 " + "--tasks-dir " +
      dir.path().string() + " --json > " + dir.path().string() + "/profile.json)");
  std::cout << p.out << std::endl;
  ASSERT_EQ(p.code, 0) << p.out;
  json j = read_json(dir.path().string() + "/profile.json");
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j["chains"].size(), 7u) << j.dump(1);
  double sum = j["other_gpu_ms"].get<double>();
  for (const json& c : j["chains"]) {
    EXPECT_GT(c["gpu_ms"].get<double>(), 0) << c["name"];
    sum += c["gpu_ms"].get<double>();
  }
  double total = j["traced_gpu_ms"].get<double>();
  EXPECT_NEAR(sum, total, 1e-6 * total + 1e-9);
  // The kernels' time is within the forward's (launch gaps aside), and counted once: a profiler
  // that repeated a mark's kernels would put it near twice the forward's.
  double forward = j["forward_ms"].get<double>();
  EXPECT_GT(forward, 0);
  EXPECT_LT(total, 1.15 * forward) << "traced " << total << " ms, forward " << forward << " ms";
  EXPECT_GT(total, 0.3 * forward) << "traced " << total << " ms, forward " << forward << " ms";
  EXPECT_EQ(j["problems_written"].size(), 7u);

  std::ofstream(dir.path().string() + "/empty.jsonl").close();
  CliResult e = run_command(k + " export --suite gm --tasks-dir " + dir.path().string() +
                            " --fallback --out " + dir.path().string() + "/pkg --from " +
                            dir.path().string() + "/empty.jsonl");
  ASSERT_EQ(e.code, 0) << e.out;
  CliResult c =
      run_command("(" + k + " model check " + model + " --package " + dir.path().string() +
                  "/pkg --reference-ops --device cuda --runs 30 --json > " + dir.path().string() +
                  "/check.json)");
  std::cout << c.out << std::endl;
  ASSERT_EQ(c.code, 0) << c.out;
  json r = read_json(dir.path().string() + "/check.json");
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["replaced"], 7) << r.dump(1);
  EXPECT_EQ(r["correct"], true) << r.dump(1);
  for (const json& row : r["rows"]) {
    EXPECT_EQ(row["calls"], 1) << row.dump();
    EXPECT_EQ(row["fallbacks"], 0) << row.dump();
    EXPECT_TRUE(row["share"].is_number()) << row.dump();
  }
  EXPECT_GT(r["eager_ms"].get<double>(), 0);
  EXPECT_GT(r["kforge_ms"].get<double>(), 0);
  ASSERT_TRUE(r["compiled_ms"].contains("default")) << r.dump(1);
  EXPECT_TRUE(r["compiled_ms"]["default"].is_number()) << r.dump(1);  // not "failed here: ..."
}
