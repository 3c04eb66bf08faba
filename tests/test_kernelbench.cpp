// `kforge tasks import-kernelbench`: the real kforge binary and the real Python helper with PyTorch
// (Debian's python3-torch on the CPU) on KernelBench-format problems written for these tests
// (tests/kernelbench/; KernelBench itself is not shipped). Tests that need PyTorch skip, saying
// so, where no Python has it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "kforge/tasks/reference.h"
#include "kforge/tasks/task.h"
#include "test_util.h"

namespace kforge::test {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

#define REQUIRE_TORCH()                                                                        \
  if (torch_python().empty())                                                                  \
  GTEST_SKIP() << "no Python with PyTorch (python3 or /usr/bin/python3 cannot import torch); " \
                  "install python3-torch (scripts/deps.sh does)"

bool has_line(const std::string& out, const std::string& pattern) {
  return std::regex_search(out, std::regex(pattern, std::regex::multiline));
}

// One import of every test problem (tests/kernelbench/*.py, 15 files): what converts, what is
// listed with its reason, and what `kforge tasks check` says of the written suite.
TEST(KernelBenchImport, ConvertsTheTestProblemsAndListsTheRest) {
  REQUIRE_TORCH();
  TempDir dir;
  std::string problems = (source_dir() / "tests/kernelbench").string();
  // An earlier import's task for a problem that no longer converts must not stay behind.
  dir.write("kb/kb_11_gemm_dropout.toml",
            "# Converted from the KernelBench problem 11_Gemm_Dropout.py\n");
  dir.write("kb/mine.toml", "# not the importer's\n");
  CliResult r = run_kforge("tasks import-kernelbench " + problems + " --suite kb --out " +
                           dir.path().string());
  SCOPED_TRACE(r.out);
  // Converted: several inputs, int targets, tuple outputs, buffers, in-place ops, submodules...
  for (const char* name :
       {"1_relu", "2_matmul_rectangular", "3_crossentropy_classtargets", "4_max_values_and_indices",
        "5_conv2d_batchnorm_relu", "6_batchnorm_inference", "7_gemm_inplace_ops",
        "8_mlp_submodules", "9_conv3d_groupnorm_min", "10_gemm_sum_softmax",
        "14_linear_attention_scale", "15_gemm_scaled_by_width"}) {
    EXPECT_TRUE(has_line(r.out, std::string("^converted  .*-> kb/kb_") + name +
                                    ": dims .*matches the Model at [1-9] "
                                    "check size\\(s\\) and the timed sizes$"))
        << name;
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "kb" / ("kb_" + std::string(name) + ".toml")))
        << name;
  }
  // A size the Model turned into a Python number in __init__ matches nowhere else: fixed, and said.
  EXPECT_TRUE(has_line(r.out,
                       "^converted  .*15_Gemm_Scaled_By_Width.py -> kb/kb_15_gemm_scaled_by_width: "
                       "dims batch_size; fixed features=256;"));
  EXPECT_TRUE(has_line(read(dir.path() / "kb" / "kb_15_gemm_scaled_by_width.toml"),
                       "^# features = 256 cannot vary: the Model runs and matches its reference "
                       "only at this value \\(of those tried\\)$"));
  // ...and what cannot be converted is listed, one line each, with the reason.
  EXPECT_TRUE(has_line(r.out,
                       "^failed     .*11_Gemm_Dropout.py: nn.Dropout\\(p=0.5\\) in training mode: "
                       "the output is random$"));
  EXPECT_TRUE(has_line(r.out,
                       "^failed     .*12_Data_Dependent_Branch.py: torch.fx cannot trace "
                       "forward\\(\\) \\(control flow"));
  EXPECT_TRUE(has_line(
      r.out, "^failed     .*13_KLDiv_Probabilities.py: input 1 \\('predictions'\\) is computed"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "kb" / "kb_11_gemm_dropout.toml"));
  EXPECT_TRUE(has_line(r.out, "^ +removed .*kb_11_gemm_dropout.toml \\(an earlier import's\\)$"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "kb" / "mine.toml"));
  // The written suite is checked (`kforge tasks check`): degenerate problems are reported, not
  // hidden.
  for (const char* name :
       {"1_relu", "2_matmul_rectangular", "3_crossentropy_classtargets", "4_max_values_and_indices",
        "6_batchnorm_inference", "7_gemm_inplace_ops", "8_mlp_submodules", "9_conv3d_groupnorm_min",
        "14_linear_attention_scale"})
    EXPECT_TRUE(has_line(r.out, std::string("^ok +kb/kb_") + name + " ")) << name;
  // A softmax over one element is 1 whatever the inputs...
  EXPECT_TRUE(has_line(r.out, "^FAIL +kb/kb_10_gemm_sum_softmax "));
  EXPECT_TRUE(has_line(r.out, "^ +degenerate: output 'out' is near-constant"));
  // ...and batch normalisation with batch statistics cancels the convolution's bias.
  EXPECT_TRUE(has_line(r.out, "^FAIL +kb/kb_5_conv2d_batchnorm_relu "));
  EXPECT_TRUE(has_line(r.out, "^ +degenerate: the output does not depend on input 'conv_bias'"));
  EXPECT_TRUE(has_line(r.out,
                       "^imported 12 of 15 KernelBench problem\\(s\\) \\(80%\\) into .*kb; 3 could "
                       "not be converted; "
                       "some converted tasks fail `kforge tasks check`"));
  EXPECT_EQ(r.code, 1);
  // Problems in KernelBench's order (by number), not the file system's.
  EXPECT_LT(r.out.find("1_ReLU.py"), r.out.find("2_Matmul"));
  EXPECT_LT(r.out.find("9_Conv3d"), r.out.find("10_Gemm"));

  // The tasks: weights and buffers are inputs with their layers' init; sizes are dims.
  tasks::Task conv = tasks::load_task(dir.path() / "kb" / "kb_5_conv2d_batchnorm_relu.toml");
  std::vector<std::string> names;
  for (const auto& in : conv.inputs) names.push_back(in.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"x", "conv_weight", "conv_bias", "bn_weight", "bn_bias"}));
  EXPECT_EQ(conv.inputs[1].init.text,
            "uniform(-1.0 / sqrt(in_channels * 3 * 3), 1.0 / sqrt(in_channels * 3 * 3))");
  EXPECT_EQ(tasks::shape_expressions(conv.inputs[1]), "[out_channels, in_channels, 3, 3]");
  EXPECT_NE(conv.summary.find("fixed sizes: kernel_size=3"), std::string::npos) << conv.summary;
  EXPECT_NE(conv.reference.find("F.batch_norm(conv, None, None, bn_weight, bn_bias, training=True"),
            std::string::npos);
  tasks::Task bn = tasks::load_task(dir.path() / "kb" / "kb_6_batchnorm_inference.toml");
  ASSERT_GE(bn.inputs.size(), 3u);
  EXPECT_EQ(bn.inputs[1].name, "bn_running_mean");  // read in inference mode: an input
  EXPECT_EQ(bn.inputs[2].init.text, "uniform(0.5, 1.5)");
  tasks::Task ce = tasks::load_task(dir.path() / "kb" / "kb_3_crossentropy_classtargets.toml");
  EXPECT_EQ(ce.inputs[1].dtype, tasks::Dtype::Int64);
  EXPECT_EQ(ce.inputs[1].init.text, "randint(0, num_classes)");
  EXPECT_EQ(tasks::Reference::compile(
                tasks::load_task(dir.path() / "kb" / "kb_4_max_values_and_indices.toml"))
                .output_count(),
            2u);
  tasks::Task inplace = tasks::load_task(dir.path() / "kb" / "kb_7_gemm_inplace_ops.toml");
  EXPECT_FALSE(std::regex_search(inplace.reference, std::regex("\\w_\\(|inplace")))
      << inplace.reference;
  tasks::Task mlp = tasks::load_task(dir.path() / "kb" / "kb_8_mlp_submodules.toml");
  // A Model without a docstring: the summary names the problem, never nn.Module's docstring.
  EXPECT_EQ(mlp.summary.rfind("KernelBench problem 8_MLP_Submodules.py", 0), 0u) << mlp.summary;
  EXPECT_EQ(mlp.summary.find("Base class"), std::string::npos) << mlp.summary;
  EXPECT_EQ(mlp.inputs.back().name, "scale");
  EXPECT_EQ(mlp.inputs.back().init.text, "normal(0.0, 0.02)");  // torch.randn(features) * 0.02
  EXPECT_EQ(tasks::shape_expressions(mlp.inputs[1]), "[4 * features, features]");
  tasks::Task g = tasks::load_task(dir.path() / "kb" / "kb_9_conv3d_groupnorm_min.toml");
  std::vector<std::string> constraints;
  for (const auto& c : g.constraints) constraints.push_back(c.text());
  EXPECT_NE(std::find(constraints.begin(), constraints.end(), "out_channels % 8 == 0"),
            constraints.end());
  EXPECT_NE(std::find(constraints.begin(), constraints.end(), "depth >= 3"), constraints.end());
  tasks::Task attn = tasks::load_task(dir.path() / "kb" / "kb_14_linear_attention_scale.toml");
  EXPECT_EQ(tasks::shape_expressions(attn.inputs[0]), "[batch_size * seq_len, features]");
  EXPECT_NE(attn.reference.find("view(k.size(0), k.size(1), 64)"), std::string::npos)
      << attn.reference;
  // Check dims: size 1 and small odd sizes, so candidates must generalise.
  tasks::Task relu = tasks::load_task(dir.path() / "kb" / "kb_1_relu.toml");
  ASSERT_GE(relu.check_dims.size(), 2u);
  EXPECT_EQ(relu.check_dims[0], (tasks::Dims{{"batch_size", 1}, {"dim", 1}}));
  EXPECT_EQ(relu.check_dims[1].at("dim") % 2, 1);
  // The original source stays in the file, as comments.
  std::string relu_file = read(dir.path() / "kb" / "kb_1_relu.toml");
  EXPECT_NE(relu_file.find("# Converted from the KernelBench problem 1_ReLU.py"),
            std::string::npos);
  EXPECT_NE(relu_file.find("\n#       def forward(self, x: torch.Tensor) -> torch.Tensor:\n#       "
                           "    return torch.relu(x)\n"),
            std::string::npos)
      << relu_file;
}

TEST(KernelBenchImport, NonPythonFileAndFileWithoutModelAreListed) {
  REQUIRE_TORCH();
  TempDir dir;
  std::string errors = (source_dir() / "tests/kernelbench/errors").string();
  CliResult r = run_kforge("tasks import-kernelbench " + errors + "/notes.txt " + errors +
                           "/no_model.py --suite bad --out " + dir.path().string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(
      has_line(r.out, "^failed     .*notes.txt: not a Python file: invalid syntax \\(line 1\\)$"))
      << r.out;
  EXPECT_TRUE(has_line(
      r.out, "^failed     .*no_model.py: not a KernelBench problem: it defines no class Model$"))
      << r.out;
  EXPECT_TRUE(has_line(r.out, "^imported 0 of 2 KernelBench problem\\(s\\) \\(0%\\)")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "bad"));
}

TEST(KernelBenchImport, WithoutPyTorchSaysWhatIsMissing) {
  TempDir dir;
  std::string problem = (source_dir() / "tests/kernelbench/1_ReLU.py").string();
  // A real Python whose site-packages are off (-S), so `import torch` fails as it does without it.
  std::string python = ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "";
  if (!python.empty()) {
    auto wrapper = dir.write("python-without-torch", "#!/bin/sh\nexec " + python + " -S \"$@\"\n");
    ::chmod(wrapper.c_str(), 0755);
    CliResult r = run_kforge(
        "tasks import-kernelbench " + problem + " --suite kb --out " + dir.path().string(),
        "KFORGE_PYTHON=" + wrapper.string());
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("needs a Python 3 with PyTorch"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(wrapper.string() + ": ModuleNotFoundError: No module named 'torch'"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("apt install python3-torch"), std::string::npos) << r.out;
  }
  CliResult r = run_kforge("tasks import-kernelbench " + problem +
                           " --suite kb --python /no/such/python3 --out " + dir.path().string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/no/such/python3: not found"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "kb"));
}

TEST(KernelBenchImport, BadArgumentsExit2) {
  TempDir dir;
  std::string problem = (source_dir() / "tests/kernelbench/1_ReLU.py").string();
  CliResult r = run_kforge("tasks import-kernelbench /no/such/problem.py --suite kb --out " +
                           dir.path().string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/no/such/problem.py: no such file or folder"), std::string::npos) << r.out;
  r = run_kforge("tasks import-kernelbench " + problem + " --suite 'a/b' --out " +
                 dir.path().string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--suite: must be a folder name"), std::string::npos) << r.out;
  r = run_kforge("tasks import-kernelbench " + dir.path().string() + " --suite kb --out " +
                 dir.path().string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("holds no .py problem files"), std::string::npos) << r.out;
  r = run_kforge("tasks import-kernelbench " + problem + " --out " + dir.path().string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--suite is required"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kforge::test
