// `kforge tasks import-kernelbench`: the real kforge binary and the real Python helper with PyTorch
// (Debian's python3-torch on the CPU) on KernelBench-format problems written for these tests
// (tests/kernelbench/; KernelBench itself is not shipped). Tests that need PyTorch skip, saying
// so, where no Python has it.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "kforge/tasks/generator.h"
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

bool has_line(const std::string& out, const std::string& pattern) {
  return std::regex_search(out, std::regex(pattern, std::regex::multiline));
}

// One import of every test problem (tests/kernelbench/*.py): what converts, what is
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
  // Inputs computed from draws (softmax rows) convert as computed inputs (issue 38).
  EXPECT_TRUE(has_line(r.out,
                       "^converted  .*13_KLDiv_Probabilities.py -> kb/kb_13_kldiv_probabilities: "
                       "dims .*matches the Model at [1-9] check size\\(s\\)"));
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
  // ...and stay, marked in their files (`degenerate = [...]`), which `kforge tasks list` shows.
  EXPECT_TRUE(has_line(r.out, "^marked +.*kb_10_gemm_sum_softmax.toml degenerate"));
  std::vector<std::string> marked =
      tasks::load_task(dir.path() / "kb" / "kb_5_conv2d_batchnorm_relu.toml").degenerate;
  ASSERT_EQ(marked.size(), 1u);
  EXPECT_TRUE(std::regex_search(marked[0],
                                std::regex("^the output does not depend on input 'conv_bias' .* at "
                                           "check dims \\(.*\\) and at the timed dims \\(")))
      << marked[0];
  EXPECT_TRUE(tasks::load_task(dir.path() / "kb" / "kb_1_relu.toml").degenerate.empty());
  std::filesystem::remove(dir.path() / "kb" / "mine.toml");  // not a task: `list` would refuse it
  CliResult list = run_kforge("tasks list kb --tasks-dir " + dir.path().string());
  EXPECT_TRUE(has_line(list.out, "^kb/kb_10_gemm_sum_softmax .*\\[degenerate\\] ")) << list.out;
  EXPECT_FALSE(has_line(list.out, "^kb/kb_1_relu .*\\[degenerate\\]")) << list.out;
  CliResult show =
      run_kforge("tasks show kb/kb_10_gemm_sum_softmax --tasks-dir " + dir.path().string());
  EXPECT_TRUE(has_line(show.out, "^  DEGENERATE +output 'out' is near-constant")) << show.out;
  CliResult shown_json =
      run_kforge("tasks show kb/kb_10_gemm_sum_softmax --json --tasks-dir " + dir.path().string());
  EXPECT_EQ(nlohmann::json::parse(shown_json.out).at("degenerate").size(), 4u) << shown_json.out;
  CliResult check =
      run_kforge("tasks check kb/kb_10_gemm_sum_softmax --tasks-dir " + dir.path().string());
  EXPECT_TRUE(has_line(check.out,
                       "^ +marked degenerate: output 'out' is near-constant at check "
                       "dims \\(.*\\) and at the timed dims \\("))
      << check.out;
  // A finding at the check sizes that the timed sizes refute is a note, not a failure: a row sum
  // of values in [0, 1) above 100 is zero for the short rows of the check sizes only.
  EXPECT_TRUE(has_line(r.out, "^ok +kb/kb_27_zero_only_when_small "));
  EXPECT_TRUE(has_line(r.out,
                       "^ +note: not degenerate at the timed dims \\(batch_size=16, dim=1024\\), "
                       "so not reported: output 'out' is all zero at check dims"));
  // The count holds every problem of the folder (other tests add theirs): each is accounted for.
  EXPECT_TRUE(has_line(r.out,
                       "^imported [0-9]+ of [0-9]+ KernelBench problem\\(s\\) \\([0-9]+%\\) into "
                       ".*kb; [0-9]+ could not be converted; some converted tasks fail `kforge "
                       "tasks check`"));
  // Then the next command, with the folder the suite went to (issue 40).
  EXPECT_TRUE(
      has_line(r.out, "^next: kforge evolve kb --tasks-dir " + dir.path().string() + " --dry-run "))
      << r.out;
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

// What used to stop the import (issue 38): sizes read in forward(), functions newer than the
// Python's PyTorch, Transformer modules, a missing module, a reference over kforge's limits, an
// init bound whose fan-in is a sum; each problem converts or says why not, and never exit 4.
TEST(KernelBenchImport, ShapesNewFunctionsTransformersAndLimits) {
  REQUIRE_TORCH();
  TempDir dir;
  std::string problems;
  for (const char* f :
       {"20_Shape_Unpacking.py", "21_RMSNorm_New.py", "22_Tensor_Control_Flow_Model.py",
        "23_Einops_Needed.py", "24_Transformer_Layer.py", "25_Nested_Init_Bound.py",
        "26_Too_Large_Reference.py", "28_LSTM_GRU_Given_State.py", "errors/future_function.py"})
    problems += " " + (source_dir() / "tests/kernelbench" / f).string();
  CliResult r = run_kforge("tasks import-kernelbench" + problems + " --suite kb --out " +
                           dir.path().string());
  SCOPED_TRACE(r.out);
  EXPECT_EQ(r.code, 1);  // some problems are not converted; never 4
  auto task = [&](const std::string& name) {
    return tasks::load_task(dir.path() / "kb" / ("kb_" + name + ".toml"));
  };
  // `B, C, H, W = x.shape`, `x.size()` unpacked, `x.shape[0]` in arithmetic, math.sqrt of a size:
  // read from the argument at run time, so every size still varies.
  EXPECT_TRUE(has_line(r.out,
                       "^converted  .*20_Shape_Unpacking.py -> kb/kb_20_shape_unpacking: dims "
                       "batch_size, channels, height, width; matches the Model at [2-9] check"));
  tasks::Task shapes = task("20_shape_unpacking");
  EXPECT_NE(shapes.reference.find("= x.shape\n"), std::string::npos) << shapes.reference;
  EXPECT_NE(shapes.reference.find(" ** 0.5\n"), std::string::npos) << shapes.reference;
  EXPECT_TRUE(has_line(r.out, "^ok +kb/kb_20_shape_unpacking "));
  // nn.RMSNorm and F.rms_norm (PyTorch 2.4) become the prelude's F.rms_norm, on any PyTorch.
  EXPECT_TRUE(has_line(r.out, "^converted  .*21_RMSNorm_New.py -> kb/kb_21_rmsnorm_new: "));
  tasks::Task rms = task("21_rmsnorm_new");
  EXPECT_NE(rms.reference.find("F.rms_norm(x, [x.size(1)], norm_weight, eps=1e-06)"),
            std::string::npos)
      << rms.reference;
  EXPECT_EQ(rms.inputs[1].init.text, "uniform(0.5, 1.5)");  // the weight's ones, spread
  // A branch on tensor values: the reason names the line.
  EXPECT_TRUE(
      has_line(r.out,
               "^failed     .*22_Tensor_Control_Flow_Model.py: torch.fx cannot trace "
               "forward\\(\\) \\(control flow on tensor values at line 9 \\(`if x.mean\\(\\) > "
               "0:`\\)\\)"));
  // A module the Python lacks: install it (where einops is installed, its functions are what
  // torch.fx cannot trace, and the reason names the line).
  EXPECT_TRUE(has_line(r.out,
                       "^failed     .*23_Einops_Needed.py: (it imports the Python module 'einops', "
                       "which .* lacks: install einops for that Python \\(pip install einops\\)|"
                       "torch.fx cannot trace forward\\(\\) at line 16 )"));
  // nn.TransformerEncoder(Layer) and nn.MultiheadAttention in functional form.
  EXPECT_TRUE(has_line(r.out,
                       "^converted  .*24_Transformer_Layer.py -> kb/kb_24_transformer_layer: dims "
                       "batch_size, d_model, dim_feedforward, seq_len; matches"));
  EXPECT_TRUE(has_line(r.out, "^ok +kb/kb_24_transformer_layer "));
  tasks::Task tf = task("24_transformer_layer");
  for (const char* call : {"F.layer_norm(", "F.gelu(", "torch.bmm(", "torch.softmax("})
    EXPECT_NE(tf.reference.find(call), std::string::npos) << call;
  std::vector<std::string> names;
  for (const auto& in : tf.inputs) names.push_back(in.name);
  for (const char* name :
       {"encoder_layers_1_self_attn_in_proj_weight", "encoder_norm_weight", "pool_out_proj_bias"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  // An init bound keeps the parentheses of its fan-in, (a + b) * 3 * 3.
  EXPECT_EQ(task("25_nested_init_bound").inputs[2].init.text,
            "uniform(-1.0 / sqrt((channels_a + channels_b) * 3 * 3), 1.0 / sqrt((channels_a + "
            "channels_b) * 3 * 3))");
  // A task that would not load is not written; the reason says which limit.
  EXPECT_TRUE(
      has_line(r.out,
               "^failed     .*26_Too_Large_Reference.py: the converted reference is too "
               "large for a kforge task: [0-9]+ bytes; a reference may have at most 32768"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "kb" / "kb_26_too_large_reference.toml"));
  // A function no PyTorch has: named, with what it needs.
  EXPECT_TRUE(has_line(r.out,
                       "^failed     .*future_function.py: it uses F.softmax_of_the_future, which "
                       "PyTorch [0-9.a-z+]+ \\(.*\\) lacks: it needs a newer PyTorch"));
  // nn.LSTM and nn.GRU as the aten ops their forward() calls; the LSTM's (h_n, c_n) unpacked.
  EXPECT_TRUE(has_line(r.out, "^ok +kb/kb_28_lstm_gru_given_state "));
  tasks::Task rnn = task("28_lstm_gru_given_state");
  EXPECT_NE(rnn.reference.find("= torch.lstm(x, [h0, c0], [lstm_weight_ih_l0, "), std::string::npos)
      << rnn.reference;
  EXPECT_NE(rnn.reference.find("= torch.gru("), std::string::npos) << rnn.reference;
  EXPECT_TRUE(has_line(r.out, "^imported 5 of 9 KernelBench problem\\(s\\) \\(56%\\)"));
}

// Issue 38, what KernelBench's level 3 needs: a causal mask computed in __init__ is computed by the
// reference (not drawn, which would no longer mask), at check sizes that keep the Model's own
// assertion (the heads split the embedding); a reference too long to write out step by step is
// written as a TorchScript loop, with chained concatenations, or with a helper function per
// repeated layer; state the Model keeps but overwrites from its inputs before reading converts.
// State carried over to the next call, random values drawn in forward() and a buffer filled in
// place are listed, each with its reason.
TEST(KernelBenchImport, ComputedBuffersLoopsHelpersAndKeptState) {
  REQUIRE_TORCH();
  TempDir dir;
  std::string problems;
  for (const char* f :
       {"29_Causal_Mask_Buffer.py", "30_Rnn_Cell_Steps.py", "31_Growing_Concat_Layers.py",
        "32_Kept_Hidden_State.py", "33_Deep_Alike_Blocks.py", "errors/state_carried_over.py",
        "errors/random_in_forward.py", "errors/buffer_changed_in_place.py"})
    problems += " " + (source_dir() / "tests/kernelbench" / f).string();
  CliResult r = run_kforge("tasks import-kernelbench" + problems + " --suite kb --out " +
                           dir.path().string());
  SCOPED_TRACE(r.out);
  EXPECT_EQ(r.code, 1);  // some problems are not converted; never 4
  auto task = [&](const std::string& name) {
    return tasks::load_task(dir.path() / "kb" / ("kb_" + name + ".toml"));
  };
  auto input_names = [](const tasks::Task& t) {
    std::vector<std::string> names;
    for (const auto& in : t.inputs) names.push_back(in.name);
    return names;
  };
  // The mask: computed at the start of forward() as __init__ computes it, never an input.
  EXPECT_TRUE(
      has_line(r.out,
               "^converted  .*29_Causal_Mask_Buffer.py -> kb/kb_29_causal_mask_buffer: dims "
               "batch_size, embed_dim, seq_len; matches the Model at [1-9] check size"));
  EXPECT_TRUE(has_line(r.out,
                       "^ +note: 'allowed' is computed in the reference as __init__ "
                       "computes it \\(it is not an input"));
  EXPECT_TRUE(has_line(r.out, "^ok +kb/kb_29_causal_mask_buffer "));
  tasks::Task mask = task("29_causal_mask_buffer");
  EXPECT_NE(mask.reference.find("torch.ones([64, 64], device="), std::string::npos)
      << mask.reference;
  EXPECT_NE(mask.reference.find("torch.tril("), std::string::npos) << mask.reference;
  EXPECT_EQ(input_names(mask),
            (std::vector<std::string>{"x", "qkv_weight", "qkv_bias", "out_weight", "out_bias"}));
  // 8 heads: the small sizes (embed_dim 12) break `assert embed_dim % n_heads == 0`, so the Model
  // is built at larger ones, and every size checked keeps the assertion.
  std::vector<std::string> constraints;
  for (const auto& c : mask.constraints) constraints.push_back(c.text());
  EXPECT_NE(std::find(constraints.begin(), constraints.end(), "embed_dim % 8 == 0"),
            constraints.end());
  ASSERT_FALSE(mask.check_dims.empty());
  for (const auto& d : mask.check_dims) EXPECT_EQ(d.at("embed_dim") % 8, 0);
  // 300 steps of a cell: a loop over the steps, each step's output collected for torch.stack.
  EXPECT_TRUE(has_line(r.out,
                       "^converted  .*30_Rnn_Cell_Steps.py -> kb/kb_30_rnn_cell_steps: dims "
                       "batch_size, hidden_size, input_size, output_size; fixed steps=300;"));
  EXPECT_TRUE(has_line(r.out,
                       "^ +note: the reference is written compactly \\(repeated steps "
                       "written as loops\\): written out step by step, as traced, it is "
                       "over a task's limits \\([0-9]+ bytes"));
  EXPECT_TRUE(has_line(r.out, "^ok +kb/kb_30_rnn_cell_steps "));
  tasks::Task rnn = task("30_rnn_cell_steps");
  for (const char* text : {"    tanh = h0\n", "    to_output_steps: List[Tensor] = []\n",
                           "    for step in range(300):\n", "        getitem = x[step]\n",
                           "        to_output_steps.append(to_output)\n",
                           "    stack = torch.stack(to_output_steps, dim=0)\n"})
    EXPECT_NE(rnn.reference.find(text), std::string::npos) << text << rnn.reference;
  // Growing feature lists: each concatenation extends the one before.
  EXPECT_TRUE(has_line(r.out, "^ok +kb/kb_31_growing_concat_layers "));
  tasks::Task dense = task("31_growing_concat_layers");
  EXPECT_NE(dense.reference.find("    cat_80 = torch.cat([cat_79, relu_79], 1)\n"),
            std::string::npos)
      << dense.reference;
  EXPECT_LE(dense.reference.size(), 32768u);
  // The Model keeps self.hidden, but copies h0 into it before reading it.
  EXPECT_TRUE(
      has_line(r.out, "^converted  .*32_Kept_Hidden_State.py -> kb/kb_32_kept_hidden_state"));
  EXPECT_TRUE(has_line(r.out,
                       "^ +note: forward\\(\\) keeps self.hidden from one call to the next, "
                       "but overwrites what it kept from its inputs before reading it"));
  EXPECT_TRUE(has_line(r.out, "^ok +kb/kb_32_kept_hidden_state "));
  EXPECT_EQ(input_names(task("32_kept_hidden_state")),
            (std::vector<std::string>{"x", "h0", "cell_weight", "cell_bias", "readout_weight",
                                      "readout_bias"}));
  // 200 alike blocks, each with its weight: one helper function, called once per block.
  EXPECT_TRUE(has_line(r.out,
                       "^ +note: the reference is written compactly \\(repeated layers "
                       "written as helper functions\\)"));
  EXPECT_TRUE(has_line(r.out, "^ok +kb/kb_33_deep_alike_blocks "));
  tasks::Task deep = task("33_deep_alike_blocks");
  EXPECT_EQ(deep.reference.rfind("def block1(a0: Tensor, a1: Tensor, a2: Tensor) -> Tensor:\n", 0),
            0u)
      << deep.reference;
  EXPECT_NE(deep.reference.find("    add = block1(x, blocks_0_proj_weight, x)\n"),
            std::string::npos)
      << deep.reference;
  EXPECT_EQ(deep.inputs.size(), 201u);
  // What cannot be converted, and why.
  EXPECT_TRUE(
      has_line(r.out,
               "^failed     .*state_carried_over.py: forward\\(\\) sets self.total and reads "
               "it at the next call: the Model keeps state from one call to the next"));
  EXPECT_TRUE(has_line(r.out,
                       "^failed     .*random_in_forward.py: forward\\(\\) draws random values "
                       "\\(torch.randn at line 13 \\(`noise = torch.randn\\(x.size\\(0\\), "
                       "x.size\\(1\\), device=x.device\\)`\\)\\): its output differs from call to "
                       "call"));
  EXPECT_TRUE(has_line(r.out,
                       "^failed     .*buffer_changed_in_place.py: the buffer 'pattern' is computed "
                       "in __init__ with an in-place operation \\(__setitem__\\), which kforge "
                       "cannot write into the reference"));
  EXPECT_TRUE(has_line(r.out, "^imported 5 of 8 KernelBench problem\\(s\\) \\(63%\\)"));
}

// Issue 38: a prompt for an imported level-2 problem gives the output's shape at the timed sizes
// (the reference's, found without a GPU: conv3d and group_norm have no meta kernel in LibTorch
// 1.13) and lists the dims in the order of the inputs' shapes, not alphabetically.
TEST(KernelBenchImport, PromptGivesTheOutputShapeAndDimsInShapeOrder) {
  REQUIRE_TORCH();
  TempDir dir;
  std::string problems = (source_dir() / "tests/kernelbench").string();
  CliResult r =
      run_kforge("tasks import-kernelbench " + problems + "/9_Conv3d_GroupNorm_Min.py " + problems +
                 "/5_Conv2d_BatchNorm_ReLU.py --suite kb --out " + dir.path().string());
  ASSERT_TRUE(std::filesystem::exists(dir.path() / "kb" / "kb_9_conv3d_groupnorm_min.toml"))
      << r.out;
  CliResult p = run_kforge(
      "prompt render translate --task kb/kb_9_conv3d_groupnorm_min "
      "--tasks-dir " +
      dir.path().string());
  ASSERT_EQ(p.code, 0) << p.out;
  // x: [batch_size, in_channels, depth, height, width]; conv_weight: [out_channels, ...]. A 3x3x3
  // convolution without padding: 8 x 16 x 16 becomes 6 x 14 x 14.
  EXPECT_NE(p.out.find("Inputs and outputs at the timed sizes (batch_size=4, in_channels=3, "
                       "depth=8, height=16, width=16, out_channels=16):\n"),
            std::string::npos)
      << p.out;
  EXPECT_NE(p.out.find("- output `out`: float32 [4, 16, 6, 14, 14]\n"), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("(rank"), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("batch_size=4, depth=8"), std::string::npos) << "not alphabetical";
  // Conv2d (padding 1) + BatchNorm + ReLU: 8 x 3 x 32 x 32 with 16 3x3 filters.
  ASSERT_TRUE(std::filesystem::exists(dir.path() / "kb" / "kb_5_conv2d_batchnorm_relu.toml"))
      << r.out;
  p = run_kforge("prompt render translate --task kb/kb_5_conv2d_batchnorm_relu --tasks-dir " +
                 dir.path().string());
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("- output `out`: float32 [8, 16, 32, 32]\n"), std::string::npos) << p.out;
}

// Issue 38, computed inputs: a get_inputs() value computed from draws (softmax rows, triangular and
// symmetric matrices, a random 0-dim scale, integer draws cast to float) becomes its draw and a
// transform; the task's inputs, drawn by kforge at any seed and size, have the problem's structure,
// and the reference matches the Model on them (the import checks it at every check size).
TEST(KernelBenchImport, ComputedInputsBecomeADrawAndATransform) {
  REQUIRE_TORCH();
  TempDir dir;
  std::string problems;
  for (const char* f : {"13_KLDiv_Probabilities.py", "16_Softmax_Of_Draw_Loss.py",
                        "17_Tril_Matmul.py", "18_Symmetric_Matmul.py", "19_Randint_Cast_Targets.py",
                        "errors/computed_from_one_draw.py", "errors/changed_in_place.py"})
    problems += " " + (source_dir() / "tests/kernelbench" / f).string();
  CliResult r = run_kforge("tasks import-kernelbench" + problems + " --suite kb --out " +
                           dir.path().string());
  SCOPED_TRACE(r.out);
  for (const char* name : {"13_kldiv_probabilities", "16_softmax_of_draw_loss", "17_tril_matmul",
                           "18_symmetric_matmul", "19_randint_cast_targets"}) {
    EXPECT_TRUE(has_line(r.out, std::string("^converted  .*-> kb/kb_") + name +
                                    ": dims .*matches the Model at [1-9] check size\\(s\\)"))
        << name;
    EXPECT_TRUE(has_line(r.out, std::string("^ok +kb/kb_") + name + " ")) << name;
  }
  // Two inputs from one draw, and a draw changed after the Recorder saw it: listed, not guessed.
  EXPECT_TRUE(has_line(r.out,
                       "^failed     .*computed_from_one_draw.py: inputs 1 and 2 are computed from "
                       "the same draw; kforge draws each input on its own$"));
  EXPECT_TRUE(has_line(r.out,
                       "^failed     .*changed_in_place.py: input 1 \\('x'\\) is changed in place "
                       "\\(mul_\\) after it is drawn"));
  EXPECT_TRUE(has_line(r.out, "^imported 5 of 7 KernelBench problem\\(s\\) \\(71%\\)"));
  EXPECT_EQ(r.code, 1);

  auto task = [&](const std::string& name) {
    return tasks::load_task(dir.path() / "kb" / ("kb_" + name + ".toml"));
  };
  // What the files declare: the draw with the input's shape, the computation as a transform.
  tasks::Task soft = task("16_softmax_of_draw_loss");
  EXPECT_EQ(soft.inputs[0].init.text, "randn");
  EXPECT_EQ(soft.inputs[0].transform, "probs.softmax(dim=-1)");
  EXPECT_EQ(tasks::shape_expressions(soft.inputs[0]), "[rows, classes]");
  EXPECT_TRUE(soft.inputs[1].transform.empty());  // a plain draw stays one
  tasks::Task tril = task("17_tril_matmul");
  EXPECT_EQ(tril.inputs[0].transform, "torch.tril(L)");  // `L = torch.tril(L)`, reassigned
  EXPECT_EQ(tril.inputs[1].transform, "torch.tril(B)");
  tasks::Task sym = task("18_symmetric_matmul");
  EXPECT_EQ(sym.inputs[0].transform, "(S + S.t()) / 2");
  EXPECT_EQ(sym.inputs[1].transform, "(T.abs() + T.abs().transpose(-2, -1)) * factor");
  ASSERT_EQ(sym.inputs[1].draws.size(), 1u);  // `factor = torch.rand(())`, named as the problem did
  EXPECT_EQ(sym.inputs[1].draws[0].name, "factor");
  EXPECT_TRUE(sym.inputs[1].draws[0].shape.empty());
  EXPECT_EQ(sym.inputs[1].draws[0].init.text, "rand");
  tasks::Task hinge = task("19_randint_cast_targets");
  EXPECT_EQ(hinge.inputs[0].init.text, "uniform(-1.0, 1.0)");  // rand * 2 - 1 stays a plain draw
  EXPECT_TRUE(hinge.inputs[0].transform.empty());
  EXPECT_EQ(hinge.inputs[1].dtype, tasks::Dtype::Float32);
  EXPECT_EQ(hinge.inputs[1].draw_dtype, tasks::Dtype::Int64);
  EXPECT_EQ(hinge.inputs[1].init.text, "randint(0, 2)");
  EXPECT_EQ(hinge.inputs[1].transform, "signs.float() * 2 - 1");
  EXPECT_EQ(hinge.inputs[2].transform, "counts.float()");
  std::string file = read(dir.path() / "kb" / "kb_18_symmetric_matmul.toml");
  EXPECT_NE(file.find("transform = \"(S + S.t()) / 2\"\n"), std::string::npos) << file;
  EXPECT_NE(file.find("[[inputs.draws]]\nname = \"factor\"\n"), std::string::npos) << file;

  // The inputs kforge draws have the problem's structure at every seed and size: each of these
  // fails if a transform is dropped.
  auto at = [](const tasks::Task& t, size_t i, const tasks::Dims& d, uint64_t seed) {
    return tasks::generate_cpu(t, i, d, seed, 0);
  };
  tasks::Task kl = task("13_kldiv_probabilities");
  for (uint64_t seed : {1, 2, 3}) {
    for (const tasks::Dims& d : soft.all_dims()) {
      torch::Tensor p = at(soft, 0, d, seed);
      EXPECT_TRUE(torch::allclose(p.sum(-1), torch::ones({p.size(0)}), 1e-4, 1e-5));
      EXPECT_GT(p.min().item<float>(), 0.0f);
    }
    for (size_t i : {0, 1}) {
      torch::Tensor p = at(kl, i, kl.dims, seed);
      EXPECT_TRUE(torch::allclose(p.sum(-1), torch::ones({p.size(0)}), 1e-4, 1e-5));
    }
    for (size_t i : {0, 1}) {
      torch::Tensor m = at(tril, i, tril.dims, seed);
      EXPECT_EQ(torch::triu(m, 1).abs().max().item<float>(), 0.0f);  // lower-triangular
      EXPECT_GT(m.abs().sum().item<float>(), 0.0f);
    }
    for (size_t i : {0, 1}) {
      torch::Tensor m = at(sym, i, sym.dims, seed);
      EXPECT_TRUE(torch::equal(m, m.t()));  // symmetric
      EXPECT_GT(m.abs().max().item<float>(), 0.0f);
    }
    EXPECT_GE(at(sym, 1, sym.dims, seed).min().item<float>(), 0.0f);  // |T| + |T|^T, scaled >= 0
    torch::Tensor signs = at(hinge, 1, hinge.dims, seed);
    EXPECT_EQ(signs.scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::equal(signs.abs(), torch::ones_like(signs)));  // -1 and +1 only
    torch::Tensor counts = at(hinge, 2, hinge.dims, seed);
    EXPECT_TRUE(torch::equal(counts, counts.round()));
    EXPECT_GE(counts.min().item<float>(), 1.0f);
    EXPECT_LE(counts.max().item<float>(), 4.0f);
  }
  // `kforge tasks show` says how each input is made.
  CliResult show =
      run_kforge("tasks show " + (dir.path() / "kb/kb_19_randint_cast_targets.toml").string());
  EXPECT_NE(show.out.find("randint(0, 2) (int64), then signs.float() * 2 - 1"), std::string::npos)
      << show.out;
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

// --json: each problem's outcome and the next command as JSON on stdout, the progress on stderr.
TEST(KernelBenchImport, JsonGivesEachProblemsOutcome) {
  REQUIRE_TORCH();
  TempDir dir;
  std::string kb = (source_dir() / "tests/kernelbench").string();
  CliResult r = run_command("{ " + std::string(KFORGE_BINARY) + " tasks import-kernelbench " + kb +
                            "/1_ReLU.py " + kb + "/11_Gemm_Dropout.py --suite kb --json --out " +
                            dir.path().string() + " 2>/dev/null; }");
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(r.code, 1) << r.out;  // one problem could not be converted
  EXPECT_EQ(j["converted"], 1) << r.out;
  EXPECT_EQ(j["failed"], 1) << r.out;
  std::map<std::string, std::string> outcomes;
  for (const auto& p : j["problems"]) outcomes[p["name"]] = p["outcome"];
  EXPECT_EQ(outcomes["kb_1_relu"], "converted") << r.out;
  EXPECT_EQ(outcomes["kb_11_gemm_dropout"], "failed") << r.out;
  EXPECT_EQ(j["next"], "kforge evolve kb --tasks-dir " + dir.path().string() + " --dry-run");
}

}  // namespace
}  // namespace kforge::test
