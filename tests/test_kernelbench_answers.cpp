// KernelBench answers (ModelNew + load_inline; tests/kernelbench/answers/, written for these
// tests) converted into kforge candidates without running them: each converts to the plan its
// host wrapper describes and compiles with NVRTC for real, or is refused naming the answer's line
// and the construct. Then the same through `kforge compile --kernelbench` and `kforge verify`.
#include <gtest/gtest.h>

#include "kernelbench_answer_util.h"
#include "kforge/common/files.h"
#include "kforge/verify/driver.h"
#include "test_util.h"

namespace kforge::test {
namespace {

using nlohmann::json;

// The candidate, compiled and checked at every dims configuration as `kforge compile` does.
compile::CandidateReport compiled(const ConvertedAnswer& a, const TempDir& dir) {
  compile::Compiler compiler(private_cache(dir));
  return compile::check_candidate(a.fixture.task, a.fixture.tensors, a.candidate.source,
                                  a.candidate.plan, std::nullopt,
                                  compile::DeviceFacts::for_arch("sm_90a"), compiler);
}

#define EXPECT_COMPILES(a)                                                             \
  do {                                                                                 \
    TempDir dir_;                                                                      \
    compile::CandidateReport r_ = compiled(a, dir_);                                   \
    EXPECT_TRUE(r_.ok()) << compile::stage_name(r_.stage) << ": "                      \
                         << (r_.errors.empty() ? r_.module.log : r_.errors[0]) << "\n" \
                         << a.candidate.source << "\n"                                 \
                         << a.candidate.plan;                                          \
  } while (0)

bool has_note(const ConvertedAnswer& a, const std::string& part) {
  for (const std::string& n : a.candidate.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(KernelBenchAnswers, ElementwiseAddIsOneLaunchOverTheInputsSizes) {
  REQUIRE_PYTHON3();
  ConvertedAnswer a = convert_answer("vector_add.py", "smoke/vector_add");
  const json& l = a.plan["launch"];
  ASSERT_EQ(l.size(), 1u) << a.candidate.plan;
  EXPECT_EQ(l[0]["kernel"], "vector_add_kernel");
  EXPECT_EQ(l[0]["grid"], json::array({"ceil_div(N, 256)"}));  // (size + 256 - 1) / 256
  EXPECT_EQ(l[0]["block"], json::array({256}));
  EXPECT_EQ(l[0]["shared_bytes"], 0);
  EXPECT_EQ(l[0]["args"], json::array({"a", "b", "out", "N"}));
  EXPECT_FALSE(a.plan.contains("workspace"));
  // Device code only: the host wrapper and torch's headers are gone, the lines kept.
  EXPECT_EQ(a.candidate.source.find("torch::"), std::string::npos) << a.candidate.source;
  EXPECT_EQ(a.candidate.source.find("\n#include <torch"), std::string::npos);
  EXPECT_NE(a.candidate.source.find("removed host function 'vector_add_cuda'"), std::string::npos);
  EXPECT_EQ(a.candidate.first_line, 8);  // the line of `vector_add_source = """`
  EXPECT_NE(a.candidate.source.find("__global__ void vector_add_kernel"), std::string::npos);
  size_t kernel_line = 1 + std::count(a.candidate.source.begin(),
                                      a.candidate.source.begin() +
                                          a.candidate.source.find("__global__ void vector_add"),
                                      '\n');
  EXPECT_EQ(kernel_line, 5u);  // as in the answer: line 8 + 5 - 1 = 12
  EXPECT_COMPILES(a);
}

TEST(KernelBenchAnswers, TwoKernelsInOrderWithSharedMemoryAndAScratchWorkspace) {
  REQUIRE_PYTHON3();
  ConvertedAnswer a = convert_answer("softmax_two_kernels.py", "level1/softmax");
  const json& l = a.plan["launch"];
  ASSERT_EQ(l.size(), 2u) << a.candidate.plan;
  EXPECT_EQ(l[0]["kernel"], "row_stats");
  EXPECT_EQ(l[0]["grid"], json::array({"B"}));  // x.size(0)
  EXPECT_EQ(l[0]["block"], json::array({256}));
  EXPECT_EQ(l[0]["shared_bytes"], 1024);  // threads * sizeof(float)
  EXPECT_EQ(l[0]["args"], json::array({"x", "stats", "N"}));
  EXPECT_EQ(l[1]["kernel"], "row_normalize");
  EXPECT_EQ(l[1]["grid"], json::array({"ceil_div(N, 256)", "B"}));  // dim3 grid(..., rows)
  EXPECT_EQ(l[1]["args"], json::array({"x", "stats", "out", "N"}));
  // torch::empty({rows, 2}, x.options()), not returned: a workspace.
  ASSERT_TRUE(a.plan.contains("workspace")) << a.candidate.plan;
  EXPECT_EQ(
      a.plan["workspace"][0],
      json({{"name", "stats"}, {"dtype", "float32"}, {"count", "2 * B"}, {"zero_init", false}}));
  EXPECT_TRUE(has_note(a, "'-O3' is not used"));
  EXPECT_EQ(a.candidate.first_line, 11);  // cuda_sources="""... given inline
  EXPECT_COMPILES(a);
}

TEST(KernelBenchAnswers, TwoDimensionalGridFromSizeZeroAndOne) {
  REQUIRE_PYTHON3();
  ConvertedAnswer a = convert_answer("relu_grid2d.py", "level1/relu");
  const json& l = a.plan["launch"];
  ASSERT_EQ(l.size(), 1u) << a.candidate.plan;
  EXPECT_EQ(l[0]["kernel"], "relu_2d");
  EXPECT_EQ(l[0]["grid"], json::array({"ceil_div(N, 32)", "ceil_div(B, 8)"}));
  EXPECT_EQ(l[0]["block"], json::array({32, 8}));  // TILE_X, TILE_Y macros
  EXPECT_EQ(l[0]["args"], json::array({"x", "out", "B", "N"}));
  // `float* x` reads the task's input: made const, as kforge's signature check wants.
  EXPECT_NE(a.candidate.source.find("relu_2d(const float* x, float* y"), std::string::npos)
      << a.candidate.source;
  EXPECT_TRUE(has_note(a, "'x' is made const"));
  EXPECT_COMPILES(a);
}

TEST(KernelBenchAnswers, SourceNamedByAVariableDispatchAndAFloatArgument) {
  REQUIRE_PYTHON3();
  ConvertedAnswer a = convert_answer("relu_dispatch_concat.py", "level1/relu");
  const json& l = a.plan["launch"];
  ASSERT_EQ(l.size(), 1u) << a.candidate.plan;
  // AT_DISPATCH_FLOATING_TYPES on a float32 input: scalar_t is float.
  EXPECT_EQ(l[0]["kernel"], "leaky_relu_kernel<float>");
  EXPECT_EQ(l[0]["grid"], json::array({"min(ceil_div(B * N, 512), 65535)"}));
  EXPECT_EQ(l[0]["block"], json::array({512}));  // constexpr int kThreads = 512
  // forward()'s self.slope (0.0) is written into the kernel: a plan passes integers only.
  EXPECT_EQ(l[0]["args"], json::array({"x", "out", "B * N"}));
  EXPECT_NE(a.candidate.source.find("const float slope = 0.0f;"), std::string::npos)
      << a.candidate.source;
  EXPECT_EQ(a.candidate.source.find("float slope,"), std::string::npos);
  EXPECT_COMPILES(a);
}

TEST(KernelBenchAnswers, ModuleParametersMapToTheTasksInputsInOrder) {
  REQUIRE_PYTHON3();
  ConvertedAnswer a = convert_answer("linear_relu_params.py", "level2/linear_bias_relu");
  const json& l = a.plan["launch"];
  ASSERT_EQ(l.size(), 1u) << a.candidate.plan;
  EXPECT_EQ(l[0]["args"], json::array({"x", "weight", "bias", "out", "M", "N", "K"}));
  EXPECT_EQ(l[0]["grid"], json::array({"ceil_div(N, 16)", "ceil_div(M, 16)"}));
  EXPECT_TRUE(has_note(a, "self.linear.weight is the task's input 'weight'"));
  EXPECT_COMPILES(a);
}

TEST(KernelBenchAnswers, AZeroedOutputGetsAZeroingLaunchFirst) {
  REQUIRE_PYTHON3();
  ConvertedAnswer a = convert_answer("sum_dim_zeros.py", "level1/sum_dim");
  const json& l = a.plan["launch"];
  ASSERT_EQ(l.size(), 2u) << a.candidate.plan;
  EXPECT_EQ(l[0]["kernel"], "kforge_zero_fill<float>");
  EXPECT_EQ(l[0]["args"], json::array({"out", "B * D"}));
  EXPECT_EQ(l[1]["kernel"], "sum_middle");
  EXPECT_EQ(l[1]["args"], json::array({"x", "out", "B", "N", "D"}));
  EXPECT_EQ(l[1]["grid"], json::array({"ceil_div(B * ceil_div(N, 64) * D, 256)"}));
  EXPECT_TRUE(has_note(a, "zeroed by kforge_zero_fill"));
  EXPECT_COMPILES(a);
}

// Refused, naming the answer's line and the construct.
struct Refusal {
  const char* file;
  const char* task;
  const char* where;  // "FILE:LINE: "
  const char* what;
};

class KernelBenchRefusals : public ::testing::TestWithParam<Refusal> {};

TEST_P(KernelBenchRefusals, NameTheLineAndTheConstruct) {
  REQUIRE_PYTHON3();
  const Refusal& r = GetParam();
  try {
    ConvertedAnswer a = convert_answer(r.file, r.task);
    ADD_FAILURE() << r.file << " converted:\n" << a.candidate.source << "\n" << a.candidate.plan;
  } catch (const compile::KernelBenchRefused& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind(r.where, 0), 0u) << m;
    EXPECT_NE(m.find(r.what), std::string::npos) << m;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Answers, KernelBenchRefusals,
    ::testing::Values(
        // The wrapper calls PyTorch: `auto c = torch::matmul(a, b);`
        Refusal{"matmul_torch_op.py", "level1/matmul_rect",
                "matmul_torch_op.py:17: ", "torch::matmul(...) is a PyTorch operation"},
        // `cublasCreate(&handle);`
        Refusal{"matmul_cublas.py", "level1/matmul_rect", "matmul_cublas.py:17: ", "cuBLAS"},
        // `while (len > 1) { ... sum_pass<<<...>>>(...); ... }`
        Refusal{"sum_loop_of_launches.py", "level1/sum_dim", "sum_loop_of_launches.py:29: ",
                "a loop whose count depends on the sizes ('while (len > 1)') repeats a kernel "
                "launch"},
        // forward() computes in Python before its call.
        Refusal{"forward_torch_op.py", "level1/relu", "forward_torch_op.py:34: ",
                "forward() computes `torch.abs(x) * torch.sign(x)` in Python"},
        // Two tensors for a task of one input.
        Refusal{"vector_add.py", "level1/relu", "vector_add.py:45: ",
                "ModelNew.forward() takes 2 arguments; task level1/relu has 1 input(s) (x)"},
        // empty_like(x) of a 3-D input for a task whose output is [B, D].
        Refusal{"softmax_two_kernels.py", "level1/sum_dim", "softmax_two_kernels.py:82: ",
                "the wrapper's result 'out' (torch::empty_like(...) at line 60) has "
                "shape [128, 4096, 1920]"}),
    [](const auto& info) { return test_name(info.param.file) + "_" + std::to_string(info.index); });

// The answer file is parsed, never run: a file that would do harm when imported converts like any
// other (its module-level code is not executed).
TEST(KernelBenchAnswers, TheAnswerIsNeverRun) {
  REQUIRE_PYTHON3();
  TempDir dir;
  std::string marker = (dir.path() / "ran").string();
  std::string text = *read_file(answer_path("vector_add.py"));
  text = "open(" + json(marker).dump() + ", 'w').write('it ran')\n" + text;
  std::string file = dir.write("answer.py", text).string();
  json parsed = tasks::read_kernelbench_answer(file);
  EXPECT_EQ(parsed["ok"], true) << parsed.dump();
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(KernelBenchAnswers, NotPythonIsAClearRefusal) {
  REQUIRE_PYTHON3();
  TempDir dir;
  std::string file = dir.write("answer.py", "class ModelNew(nn.Module:\n    pass\n").string();
  json parsed = tasks::read_kernelbench_answer(file);
  EXPECT_EQ(parsed["ok"], false);
  EXPECT_EQ(parsed["line"], 1);
  EXPECT_NE(parsed["reason"].get<std::string>().find("not Python kforge can parse"),
            std::string::npos)
      << parsed.dump();
}

// `kforge compile --kernelbench`: converted, compiled, and written out as a kforge answer that
// `kforge compile --answer` takes as it is.
TEST(KernelBenchAnswersCli, CompileConvertsWritesAndRefuses) {
  REQUIRE_PYTHON3();
  TempDir dir;
  std::string tasks = " --tasks-dir " + (source_dir() / "tasks").string();
  std::string written = (dir.path() / "candidate.md").string();
  CliResult r = run_kforge("compile --no-cache --kernelbench " + answer_path("vector_add.py") +
                           " --task smoke/vector_add -o " + written + tasks);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("converted for smoke/vector_add"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok: plan, types and limits hold"), std::string::npos) << r.out;
  std::optional<std::string> md = read_file(written);
  ASSERT_TRUE(md) << r.out;
  EXPECT_EQ(md->rfind("<!-- task: smoke/vector_add -->", 0), 0u) << *md;
  CliResult again = run_kforge("compile --no-cache --answer " + written + tasks);
  EXPECT_EQ(again.code, 0) << again.out;

  CliResult refused = run_kforge("compile --kernelbench " + answer_path("matmul_cublas.py") +
                                 " --task level1/matmul_rect" + tasks);
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_NE(refused.out.find("rejected at the answer stage"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("matmul_cublas.py:17: cublasCreate(...) is a cuBLAS call"),
            std::string::npos)
      << refused.out;

  CliResult no_task = run_kforge("compile --kernelbench " + answer_path("vector_add.py") + tasks);
  EXPECT_EQ(no_task.code, 2) << no_task.out;
  EXPECT_NE(no_task.out.find("--kernelbench needs --task"), std::string::npos) << no_task.out;
}

TEST(KernelBenchAnswersCli, VerifyWithoutAGpuSaysItNeedsOne) {
  if (verify::Driver::get().available()) GTEST_SKIP() << "a GPU is here: tests/gpu judges";
  CliResult r = run_kforge("verify --kernelbench " + answer_path("vector_add.py") +
                           " --task smoke/vector_add");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("kforge verify"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kforge::test
