// `kforge model profile` and `kforge model check` on the CPU (docs/model.md), on the level-3 style
// models in tests/models/: the chains a model is cut into, the suite written from them (imported
// and checked like any KernelBench problem), and the model rewritten with a package's ops in place
// of its chains (each op its task's reference, --reference-ops): equal to the model, an op that
// computes something else caught inside it, and sizes the ops were never judged at falling back.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "test_util.h"

using namespace kforge::test;
using nlohmann::json;

namespace {

std::string model_file(const std::string& name) {
  return (source_dir() / "tests/models" / name).string();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// kforge with `args` and --json, its JSON result (stdout) parsed; the run's code and its stderr.
json kforge_json(const std::string& args, const TempDir& dir, CliResult& r) {
  std::string out = dir.path().string() + "/result.json";
  // In a subshell: its stdout to the file, its stderr (the table) to run_command's output.
  r = run_command("(" + std::string(KFORGE_BINARY) + " " + args + " --json > " + out + ")");
  return json::parse(read_text(out), nullptr, false);
}

// The end of the small model files the bad-input test writes: a batch of 4 rows of 10, no
// constructor arguments.
const std::string kSmallInputs = R"(
batch_size = 4

def get_inputs():
    return [torch.randn(batch_size, 10)]

def get_init_inputs():
    return []
)";

// The chains of the profile in graph order (their "index").
std::vector<std::string> chain_names(const json& profile) {
  std::vector<std::pair<int, std::string>> by_index;
  for (const json& c : profile["chains"])
    by_index.push_back({c["index"].get<int>(), c["name"].get<std::string>()});
  std::sort(by_index.begin(), by_index.end());
  std::vector<std::string> out;
  for (const auto& [i, name] : by_index) out.push_back(name);
  return out;
}

// The resnet block profiled into a suite and exported with every op its task's reference: the
// package `kforge model check --reference-ops` reads. Made once (10 s).
class ModelPackage : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    if (torch_python().empty()) return;
    dir_ = new TempDir();
    CliResult p =
        run_kforge("model profile " + model_file("resnet_block.py") +
                   " --device cpu --suite rb --top 5 --tasks-dir " + dir_->path().string());
    profile_out_ = new std::string(p.out);
    profile_code_ = p.code;
    std::ofstream(dir_->path().string() + "/empty.jsonl").close();
    CliResult e =
        run_kforge("export --suite rb --tasks-dir " + dir_->path().string() + " --fallback --out " +
                   dir_->path().string() + "/pkg --from " + dir_->path().string() + "/empty.jsonl");
    export_out_ = new std::string(e.out);
    export_code_ = e.code;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete profile_out_;
    delete export_out_;
  }
  void SetUp() override {
    REQUIRE_TORCH();
    ASSERT_EQ(profile_code_, 0) << *profile_out_;
    ASSERT_EQ(export_code_, 0) << *export_out_;
  }
  static std::string package() { return dir_->path().string() + "/pkg"; }

  static TempDir* dir_;
  static std::string *profile_out_, *export_out_;
  static int profile_code_, export_code_;
};
TempDir* ModelPackage::dir_ = nullptr;
std::string* ModelPackage::profile_out_ = nullptr;
std::string* ModelPackage::export_out_ = nullptr;
int ModelPackage::profile_code_ = -1;
int ModelPackage::export_code_ = -1;

}  // namespace

TEST(Model, ProfileCutsTheTransformerBlockIntoItsChains) {
  REQUIRE_TORCH();
  TempDir dir;
  CliResult r;
  std::string tasks_dir = dir.path().string() + "/tasks";
  json j = kforge_json("model profile " + model_file("transformer_block.py") +
                           " --device cpu --suite gpt2 --top 7 --tasks-dir " + tasks_dir,
                       dir, r);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(j.is_object()) << r.out;
  // Layer norm, QKV, attention (matmul, scale, causal mask, softmax, matmul), the output
  // projection with its residual add, layer norm, the MLP's linear with GELU written out, and its
  // second linear with the residual add.
  EXPECT_EQ(chain_names(j), (std::vector<std::string>{
                                "ln_1", "attn_c_attn", "matmul_mul_masked_fill_softmax",
                                "attn_c_proj_add", "ln_2", "c_fc_mul_pow_add", "c_proj_add"}));
  for (const json& c : j["chains"]) {
    EXPECT_TRUE(c.contains("problem")) << c.dump();
    EXPECT_FALSE(c.contains("gpu_ms")) << "no times without a GPU: " << c.dump();
    if (c["name"] == "c_fc_mul_pow_add") {
      // 2 * (16 * 512) * 768 * 3072 for the GEMM, and the GELU's elementwise operations.
      EXPECT_GE(c["flops"].get<double>(), 2.0 * 16 * 512 * 768 * 3072);
      EXPECT_LT(c["flops"].get<double>(), 2.0 * 16 * 512 * 768 * 3072 * 1.01);
      EXPECT_EQ(c["ops"], 9);  // linear, then 0.5 * x * (1 + tanh(c * (x + 0.044715 * x^3)))
    }
    if (c["name"] == "matmul_mul_masked_fill_softmax") {
      EXPECT_EQ(c["what"], "matmul + mul + masked_fill + softmax + matmul");
    }
  }
  EXPECT_EQ(j["model"]["inputs"][0]["shape"], json({16, 512, 768}));
  EXPECT_FALSE(j.contains("traced_gpu_ms"));
  // The table says how it ranks without a GPU.
  EXPECT_NE(r.out.find("ranked by FLOPs, without times"), std::string::npos) << r.out;

  // The answers scripts/gpu-model.sh judges on a GPU for this suite (tests/models/answers/gpt2:
  // CHAIN.md, and CHAIN.VARIANT.md) compile against the tasks written here, for sm_90a, and pass
  // the plan checks at every configuration, without spills.
  int answers = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(source_dir() / "tests/models/answers/gpt2")) {
    std::string name = e.path().filename().string();
    std::string chain = name.substr(0, name.find('.'));
    SCOPED_TRACE(name);
    CliResult c;
    json k = kforge_json("compile --answer " + e.path().string() + " --task gpt2/" + chain +
                             " --tasks-dir " + tasks_dir + " --arch sm_90a",
                         dir, c);
    ASSERT_EQ(c.code, 0) << c.out;
    EXPECT_EQ(k["ok"], true) << k.dump(1);
    for (const json& kernel : k["kernels"]) EXPECT_EQ(kernel["spill_store_bytes"], 0) << kernel;
    EXPECT_GE(k["configurations"].size(), 4u) << "the timed size and the check sizes";
    ++answers;
  }
  EXPECT_GE(answers, 7) << "one answer a chain at least";
}

// KernelBench's ResNet-101 (a graph hundreds of operations deep) once failed as "nesting too deeply
// to trace", and Swin V2 (relative position tables filled in place in __init__) could not be
// profiled at all. The stack here is deeper, and its gate is filled in place: the profile has every
// chain, and the one reading the gate says why it cannot be written as a problem.
TEST(Model, ProfileWalksADeepModelAndNamesTheChainsItCannotWrite) {
  REQUIRE_TORCH();
  TempDir dir;
  CliResult r;
  json j = kforge_json("model profile " + model_file("deep_stack.py") + " --device cpu", dir, r);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_EQ(j["chains"].size(), 300u);
  int unwritable = 0;
  for (const json& c : j["chains"]) {
    if (!c.contains("why_not")) {
      EXPECT_TRUE(c.contains("problem")) << c.dump();
      continue;
    }
    ++unwritable;
    EXPECT_EQ(c["name"], "layers_598_relu_mul");
    EXPECT_NE(c["why_not"].get<std::string>().find("it reads gate, computed in __init__ with an "
                                                   "in-place operation (__setitem__)"),
              std::string::npos)
        << c.dump();
  }
  EXPECT_EQ(unwritable, 1);
  EXPECT_NE(r.out.find("'gate' is computed in __init__ with an in-place operation"),
            std::string::npos)
      << r.out;
}

// An LSTM's result is a nested tuple, (output, (h_n, c_n)): its chain is a task with three outputs
// (the importer's form), and model check nests the op's outputs again where the model reads them.
TEST(Model, AnLstmIsAChainATaskAndAnOpInTheModel) {
  REQUIRE_TORCH();
  TempDir dir;
  const std::string d = dir.path().string();
  CliResult r;
  json j = kforge_json("model profile " + model_file("lstm.py") +
                           " --device cpu --suite ls --top 2 --tasks-dir " + d,
                       dir, r);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_EQ(j["chains"].size(), 2u) << j.dump(1);
  const json& c = j["chains"][0];
  EXPECT_EQ(c["name"], "lstm");
  // Per step (4 x 16), layer and gate (4): 2 * hidden * (its input + hidden).
  EXPECT_EQ(c["flops"], 64 * 2 * 4 * 48 * (32 + 48) + 64 * 2 * 4 * 48 * (48 + 48));
  EXPECT_NE(r.out.find("out0[1, 1, 1] out1[2, 1, 1] out2[2, 1, 1]"), std::string::npos) << r.out;
  // The projection's chain reads items of the LSTM's result: its output, and h_n of (h_n, c_n).
  const json& fc = j["chains"][1];
  EXPECT_EQ(fc["name"], "fc_add");
  EXPECT_FALSE(fc.contains("why_not") && !fc["why_not"].is_null()) << fc.dump(1);
  ASSERT_EQ(fc["inputs"].size(), 2u) << fc.dump(1);
  EXPECT_EQ(fc["inputs"][0]["shape"], json({4, 16, 48}));
  EXPECT_EQ(fc["inputs"][1]["shape"], json({2, 4, 48}));
  EXPECT_NE(r.out.find("imported 2 of 2"), std::string::npos) << r.out;

  std::ofstream(d + "/empty.jsonl").close();
  CliResult e = run_kforge("export --suite ls --tasks-dir " + d + " --fallback --out " + d +
                           "/pkg --from " + d + "/empty.jsonl");
  ASSERT_EQ(e.code, 0) << e.out;
  json k = kforge_json("model check " + model_file("lstm.py") + " --package " + d +
                           "/pkg --reference-ops --device cpu",
                       dir, r);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(k.is_object()) << r.out;
  EXPECT_EQ(k["correct"], true) << k.dump(1);
  EXPECT_EQ(k["replaced"], 2) << k.dump(1);
  for (int row : {0, 1}) {
    EXPECT_EQ(k["rows"][row]["calls"], 1) << k.dump(1);
    EXPECT_EQ(k["rows"][row]["fallbacks"], 0) << k.dump(1);
  }
}

namespace {

void TheTopChainsBecomeASuiteThatChecks() {
  // conv + batch norm on the skip path, conv + batch norm + ReLU, conv + batch norm + the residual
  // add + ReLU: each written as a problem and imported, its reference checked against the chain.
  for (const char* name :
       {"downsample_0_batchnorm2d", "conv1_batchnorm2d_relu", "conv2_batchnorm2d_add_relu"}) {
    EXPECT_TRUE(std::ifstream(ModelPackage::dir_->path().string() + "/rb/" + name + ".toml").good())
        << name;
    EXPECT_TRUE(
        std::ifstream(ModelPackage::dir_->path().string() + "/rb/model/" + name + ".py").good())
        << name;
  }
  EXPECT_NE(ModelPackage::profile_out_->find("imported 3 of 3"), std::string::npos)
      << *ModelPackage::profile_out_;
  EXPECT_NE(ModelPackage::profile_out_->find("3 of 3 task(s) ok"), std::string::npos)
      << *ModelPackage::profile_out_;
  EXPECT_NE(ModelPackage::profile_out_->find("next: kforge evolve rb --tasks-dir " +
                                             ModelPackage::dir_->path().string()),
            std::string::npos)
      << *ModelPackage::profile_out_;
  // The sizes are the model's constants, so the suite can be judged at other sizes.
  std::string task =
      read_text(ModelPackage::dir_->path().string() + "/rb/conv1_batchnorm2d_relu.toml");
  EXPECT_NE(task.find("in_channels = 64"), std::string::npos) << task;
  EXPECT_NE(task.find("out_channels = 128"), std::string::npos) << task;
}

void TheRewriteWithReferenceOpsEqualsTheModel() {
  TempDir dir;
  CliResult r;
  json j = kforge_json("model check " + model_file("resnet_block.py") + " --package " +
                           ModelPackage::package() + " --reference-ops --device cpu",
                       dir, r);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(j["replaced"], 3) << j.dump(1);
  EXPECT_EQ(j["chains"], 3);
  EXPECT_EQ(j["correct"], true);
  for (const json& row : j["rows"]) {
    EXPECT_EQ(row["calls"], 1) << row.dump();
    EXPECT_EQ(row["fallbacks"], 0) << row.dump();
    EXPECT_EQ(row["stand_in"], "reference");
  }
  EXPECT_LT(j["error"].get<double>(), 1e-5) << j.dump(1);
  EXPECT_NE(r.out.find("correct yes"), std::string::npos) << r.out;
}

void AnOpThatComputesSomethingElseIsCaughtInsideTheModel() {
  // The package's last op scaled by 1.01: inside the model, its error shows at the output.
  json manifest = json::parse(read_text(ModelPackage::package() + "/manifest.json"));
  bool changed = false;
  for (json& op : manifest["ops"]) {
    if (op["op"] != "conv2_batchnorm2d_add_relu") continue;
    std::string ref = op["reference_torchscript"];
    size_t at = ref.rfind("    return ");
    ASSERT_NE(at, std::string::npos) << ref;
    op["reference_torchscript"] = ref.substr(0, at) + "    return 1.01 * " + ref.substr(at + 11);
    changed = true;
  }
  ASSERT_TRUE(changed);
  TempDir dir;
  ASSERT_EQ(
      run_command("cp -r " + ModelPackage::package() + " " + dir.path().string() + "/pkg").code, 0);
  std::ofstream(dir.path().string() + "/pkg/manifest.json") << manifest.dump(1);
  CliResult r;
  json j = kforge_json("model check " + model_file("resnet_block.py") + " --package " +
                           dir.path().string() + "/pkg --reference-ops --device cpu",
                       dir, r);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(j["correct"], false) << j.dump(1);
  EXPECT_GT(j["error"].get<double>(), 1e-3);
  EXPECT_NE(r.out.find("correct NO"), std::string::npos) << r.out;
}

void SizesTheOpsWereNeverJudgedAtFallBackToTheModel() {
  // The same model at batch 8: no op was judged there, so every call runs the chain as the model
  // does, and says so.
  TempDir dir;
  std::string text = read_text(model_file("resnet_block.py"));
  text = std::regex_replace(text, std::regex("batch_size = 16"), "batch_size = 8");
  std::string file = dir.write("resnet_block_8.py", text).string();
  CliResult r;
  json j = kforge_json("model check " + file + " --package " + ModelPackage::package() +
                           " --reference-ops --device cpu",
                       dir, r);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(j["replaced"], 3);
  for (const json& row : j["rows"]) {
    EXPECT_EQ(row["calls"], 1) << row.dump();
    EXPECT_EQ(row["fallbacks"], 1) << row.dump();
  }
  EXPECT_EQ(j["correct"], true);
}

}  // namespace

// The four steps above in one process: the package they share is made once (the profile, the
// import and the export take 20 s; ctest runs each test in a process of its own).
TEST_F(ModelPackage, FromTheProfileToTheModelChecked) {
  {
    SCOPED_TRACE("TheTopChainsBecomeASuiteThatChecks");
    TheTopChainsBecomeASuiteThatChecks();
  }
  if (HasFatalFailure()) return;
  {
    SCOPED_TRACE("TheRewriteWithReferenceOpsEqualsTheModel");
    TheRewriteWithReferenceOpsEqualsTheModel();
  }
  if (HasFatalFailure()) return;
  {
    SCOPED_TRACE("AnOpThatComputesSomethingElseIsCaughtInsideTheModel");
    AnOpThatComputesSomethingElseIsCaughtInsideTheModel();
  }
  if (HasFatalFailure()) return;
  {
    SCOPED_TRACE("SizesTheOpsWereNeverJudgedAtFallBackToTheModel");
    SizesTheOpsWereNeverJudgedAtFallBackToTheModel();
  }
  if (HasFatalFailure()) return;
}

TEST(Model, BadInputSaysWhatIsWrong) {
  REQUIRE_TORCH();
  TempDir dir;
  // A file that is no model: the file and what a model file defines.
  std::string no_model = dir.write("no_model.py", "import torch\nx = 1\n").string();
  CliResult r = run_kforge("model profile " + no_model + " --device cpu");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(no_model), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("class Model"), std::string::npos) << r.out;
  // A model whose forward fails: the error, with the file and the line (found through a decorator).
  std::string failing = dir.write("failing.py", R"(import torch
import torch.nn as nn

class Model(nn.Module):
    @torch.no_grad()
    def forward(self, x):
        return x.view(3, -1, 7) @ torch.ones(5, 5)

)" + kSmallInputs)
                            .string();
  r = run_kforge("model profile " + failing + " --device cpu");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("kforge cannot profile this model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("forward() fails at line 7 (`return x.view(3, -1, 7)"), std::string::npos)
      << "where it failed\n"
      << r.out;
  EXPECT_EQ(r.out.find("class Model"), std::string::npos) << "it defines one\n" << r.out;
  // A package folder without a manifest, and a package whose ops are not built.
  std::string empty = dir.path().string() + "/empty";
  ::mkdir(empty.c_str(), 0755);
  r = run_kforge("model check " + model_file("resnet_block.py") + " --package " + empty +
                 " --reference-ops --device cpu");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(empty + "/manifest.json"), std::string::npos) << r.out;
  std::string unbuilt = dir.path().string() + "/unbuilt";
  ::mkdir(unbuilt.c_str(), 0755);
  std::ofstream(unbuilt + "/manifest.json") << R"({"name": "k", "ops": []})";
  r = run_kforge("model check " + model_file("resnet_block.py") + " --package " + unbuilt);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not built"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--reference-ops"), std::string::npos) << r.out;
  // A model that draws random values in forward() (KernelBench's 35_LSTM draws its initial state):
  // the profile times it and says which draw keeps its chains from being tasks; a check cannot
  // compare two runs of it, and says so.
  std::string random = dir.write("random.py", R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 10)

    def forward(self, x):
        return self.fc(x) + torch.randn(x.shape[0], 10)

)" + kSmallInputs)
                           .string();
  r = run_kforge("model profile " + random + " --device cpu");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forward() draws random values (torch.randn at line 11"), std::string::npos)
      << r.out;
  r = run_kforge("model check " + random + " --package " + unbuilt +
                 " --reference-ops --device cpu");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot be compared with its rewrite"), std::string::npos) << r.out;
  // A missing model file.
  r = run_kforge("model profile " + dir.path().string() + "/nosuch.py");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no such model file"), std::string::npos) << r.out;
}
