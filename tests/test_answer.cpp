// LLM answers split into source and plan; every malformed answer gets a message fit to send back.
#include <gtest/gtest.h>

#include "kforge/compile/answer.h"

namespace {

using kforge::compile::AnswerError;
using kforge::compile::parse_answer;

const std::string kCuda = "```cuda\n__global__ void k(const float* x, float* out, int n) {}\n```\n";
const std::string kPlan =
    "```json\n{\"launch\": [{\"kernel\": \"k\", \"grid\": [1], \"block\": [32], \"args\": [\"x\", "
    "\"out\", \"N\"]}]}\n```\n";

TEST(Answer, SplitsSourceAndPlanAmidProse) {
  auto a =
      parse_answer("Here is my kernel.\n\n" + kCuda + "\nAnd the plan:\n" + kPlan + "Thanks!\n");
  EXPECT_NE(a.source.find("__global__ void k"), std::string::npos);
  EXPECT_NE(a.plan.find("\"launch\""), std::string::npos);
  EXPECT_EQ(a.source_first_line, 4);
}

TEST(Answer, AcceptsTheUsualFenceTags) {
  for (const char* tag : {"cuda", "cu", "cpp", "c++", "CUDA", "", "cuda title=kernel.cu"}) {
    std::string cuda = std::string("```") + tag + "\n__global__ void k() {}\n```\n";
    EXPECT_NO_THROW(parse_answer(cuda + kPlan)) << tag;
  }
  // An untagged block holding a plan counts as the plan; ~~~ fences work too.
  EXPECT_NO_THROW(parse_answer(kCuda + "```\n{\"launch\": []}\n```\n"));
  EXPECT_NO_THROW(parse_answer("~~~cuda\n__global__ void k() {}\n~~~\n" + kPlan));
  // Other languages are ignored (a shell snippet in the prose).
  EXPECT_NO_THROW(parse_answer("```bash\nmake\n```\n" + kCuda + kPlan));
}

void expect_error(const std::string& answer, const std::string& fragment) {
  try {
    parse_answer(answer);
    ADD_FAILURE() << "accepted: " << answer;
  } catch (const AnswerError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Answer, ErrorsSayWhatToFix) {
  expect_error("I think you should use shared memory.", "no code blocks");
  expect_error(kPlan, "no CUDA code block");
  expect_error(kCuda + kCuda + kPlan, "2 CUDA code blocks (opened at lines 1 and 4)");
  expect_error(kCuda, "no launch plan");
  expect_error(kCuda + kPlan + kPlan, "2 JSON blocks");
  expect_error("```cuda\n__global__ void k() {}\n", "opened at line 1 is never closed");
  expect_error("```cuda\n\n```\n" + kPlan, "is empty");
  expect_error("```cuda\n__device__ float f() { return 1; }\n```\n" + kPlan,
               "defines no __global__ kernel");
}

}  // namespace
