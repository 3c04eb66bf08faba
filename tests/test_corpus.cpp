// The candidate corpora compile and plan-check on the CPU (their GPU verdicts are in tests/gpu).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "corpus_util.h"
#include "kforge/verify/judge.h"
#include "kforge/verify/outcome.h"

using namespace kforge;
using namespace kforge::test;

TEST(Corpus, ExploitsCompileAndTheirManifestNamesRealOutcomes) {
  TempDir dir;
  compile::Compiler compiler(private_cache(dir));
  std::string folder = (source_dir() / "tests/gpu/exploits").string();
  nlohmann::json manifest = nlohmann::json::parse(read_file(folder + "/manifest.json").value());
  std::vector<std::string> files = answers_in(folder);
  EXPECT_EQ(files.size(), manifest["kernels"].size())
      << "every exploit is in the manifest, and only those";
  for (const std::string& path : files) {
    std::string name = path.substr(path.rfind('/') + 1);
    ASSERT_TRUE(manifest["kernels"].contains(name)) << name << " is not in manifest.json";
    for (const auto& section : {"kernels", "without_sanitizer"}) {
      if (!manifest[section].contains(name)) continue;
      for (const auto& o : manifest[section][name])
        EXPECT_TRUE(verify::outcome_from_string(o.get<std::string>()))
            << name << ": unknown outcome " << o;
    }
    CheckedAnswer c = check_answer_file(path, compile::DeviceFacts::for_arch("sm_90a"), compiler);
    // Exploits meant to stop before the GPU must stop here, with that outcome; the rest must pass.
    auto expected = manifest["kernels"][name].get<std::vector<std::string>>();
    std::string before_gpu =
        std::string(verify::to_string(verify::verdict_from_report(c.report).outcome));
    bool stops_here = expected == std::vector<std::string>{"compile_error"} ||
                      expected == std::vector<std::string>{"plan_error"};
    if (stops_here) {
      EXPECT_FALSE(c.report.ok()) << name << " should be stopped before the GPU";
      EXPECT_EQ(before_gpu, expected.front()) << name;
    } else {
      EXPECT_TRUE(c.report.ok()) << name << ": "
                                 << (c.report.errors.empty() ? "" : c.report.errors.front());
    }
  }
  for (const auto& name : manifest["screen_passes"])  // read by tests/gpu/test_loop_exploits.cpp
    EXPECT_TRUE(manifest["kernels"].contains(name.get<std::string>()))
        << name << " (screen_passes) is not an exploit";
}
