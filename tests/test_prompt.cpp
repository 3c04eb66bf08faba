// Prompt templates: loaded at run time, checked at start, filled from the task and the archive.
#include <gtest/gtest.h>

#include "archive_sql.h"
#include "compile_test_util.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/strings.h"
#include "kforge/compile/candidate.h"
#include "kforge/evolve/prompt.h"
#include "kforge/tasks/check.h"
#include "kforge/tasks/reference.h"
#include "test_util.h"

namespace {

using namespace kforge::evolve;
using kforge::BaselineKind;
using kforge::BaselineTimes;
using kforge::test::TempDir;

// Baseline times by kind: eager's, then the others where given (compiled's reason when it has
// none).
BaselineTimes times(double eager, std::optional<double> scripted = std::nullopt,
                    std::optional<double> compiled = std::nullopt,
                    const std::string& compiled_absent = "") {
  BaselineTimes b;
  b.set(BaselineKind::Eager, eager);
  if (scripted) b.set(BaselineKind::Scripted, scripted);
  if (compiled || !compiled_absent.empty())
    b.set(BaselineKind::Compiled, compiled, compiled_absent);
  return b;
}

// The prompt's line of baselines, from "PyTorch baselines: " to the end of the line.
std::string baselines_line(const std::string& prompt) {
  size_t at = prompt.find("PyTorch baselines: ");
  return at == std::string::npos ? "" : prompt.substr(at, prompt.find('\n', at) - at);
}

std::string printed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string about(BaselineKind kind) {
  return std::string(kforge::baseline_info(kind).about);
}

std::string prompts_dir() {
  return (kforge::test::source_dir() / "prompts").string();
}

struct Fixture {
  kforge::tasks::Task task;
  kforge::tasks::Reference ref;
  static Fixture load(const std::string& spec) {
    auto t = kforge::tasks::load_task(
        kforge::tasks::resolve_tasks(spec, kforge::test::source_dir() / "tasks").at(0));
    return {t, kforge::tasks::Reference::compile(t)};
  }
};

PromptInputs inputs(const Fixture& f, kforge::archive::Archive* ar = nullptr) {
  PromptInputs in;
  in.task = &f.task;
  in.reference = &f.ref;
  in.archive = ar;
  in.device = "NVIDIA H200 (sm_90a)";
  in.answer_format = load_answer_format(prompts_dir());
  return in;
}

TEST(Prompt, ShippedTemplatesLoadAndUseOnlyKnownPlaceholders) {
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  ASSERT_TRUE(t.has_context());
  // The context holds what every prompt about one task on one GPU shares, the answer format first.
  for (const char* shared :
       {"answer_format", "device", "gpu_facts", "eager_time", "roofline_floor", "task_id",
        "task_summary", "task_reference", "task_tensors", "timed_dims", "check_dims", "judging"})
    EXPECT_TRUE(t.placeholders_in_context().count(shared))
        << "context.md must quote {{" << shared << "}}";
  for (const std::string& p : t.placeholders_in_context())
    EXPECT_TRUE(context_placeholders().count(p)) << p;
  // Each kind's own part refers to the answer format above instead of repeating it.
  for (auto kind :
       {PromptKind::Translate, PromptKind::Optimize, PromptKind::Crossover,
        PromptKind::RepairCompile, PromptKind::RepairWrong, PromptKind::Ideas, PromptKind::Idea})
    for (const char* shared : {"answer_format", "task_reference", "gpu_facts", "judging"})
      EXPECT_FALSE(t.placeholders(kind).count(shared))
          << prompt_kind_name(kind) << " repeats {{" << shared << "}}";
  EXPECT_TRUE(t.placeholders(PromptKind::Crossover).count("second_parent_source"));
  EXPECT_TRUE(t.placeholders(PromptKind::RepairWrong).count("failure_evidence"));
  EXPECT_TRUE(t.placeholders(PromptKind::RepairCompile).count("failure_evidence"));
  EXPECT_TRUE(t.placeholders(PromptKind::Idea).count("idea"));
  EXPECT_TRUE(t.placeholders(PromptKind::Ideas).count("idea_count"));
  // The prompts that write new code carry the task's earlier failures.
  for (auto kind : {PromptKind::Translate, PromptKind::Optimize, PromptKind::Crossover})
    EXPECT_TRUE(t.placeholders(kind).count("failures")) << prompt_kind_name(kind);
}

TEST(Prompt, TranslateIsFilledFromTheTask) {
  Fixture f = Fixture::load("smoke/softmax");
  std::string p =
      render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Translate, inputs(f));
  EXPECT_NE(p.find("torch.softmax(x, dim=-1)"), std::string::npos);
  EXPECT_NE(p.find("input `x`: float32 [4096, 4096]"), std::string::npos) << p.substr(0, 800);
  EXPECT_NE(p.find("B=37, N=1000"), std::string::npos);
  EXPECT_NE(p.find("# Answer format"), std::string::npos);
  // What the model is held to: the tolerance, the math mode, the compile flags, what is timed, the
  // inputs' values.
  EXPECT_NE(
      p.find("max(tol * rms(reference), 8 * eager's own largest error); here `out` tol = 0.0001"),
      std::string::npos)
      << p;
  EXPECT_NE(p.find("TF32 is off"), std::string::npos);
  // The precision rule (docs/protocol.md): accuracy decides, so 3xTF32 is allowed, plain TF32 not.
  EXPECT_NE(p.find("judged by its accuracy, not by the instructions it uses"), std::string::npos);
  EXPECT_NE(p.find("3xTF32"), std::string::npos);
  EXPECT_EQ(p.find("no fp16/TF32 shortcuts"), std::string::npos);
  EXPECT_NE(p.find("without --use_fast_math"), std::string::npos);
  EXPECT_NE(p.find("L2 cache flushed"), std::string::npos);
  EXPECT_NE(p.find("values randn"), std::string::npos);
  EXPECT_EQ(p.find("{{"), std::string::npos) << "an unfilled placeholder";
}

TEST(Prompt, KindsThatNeedAParentSaySo) {
  Fixture f = Fixture::load("smoke/softmax");
  try {
    render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Optimize, inputs(f));
    FAIL();
  } catch (const kforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs --parent"), std::string::npos) << e.what();
  }
}

TEST(Prompt, UnknownPlaceholderAndMissingTemplateFailAtLoad) {
  TempDir dir;
  for (const char* k :
       {"translate", "optimize", "crossover", "repair_compile", "repair_wrong", "ideas", "idea"})
    dir.write(std::string("p/") + k + ".md", "Task {{task_id}}\n");
  EXPECT_NO_THROW(PromptTemplates::load((dir.path() / "p").string()));
  auto bad = dir.write("p/optimize.md", "line one\nTask {{task_id}} with {{parent_sauce}}\n");
  try {
    PromptTemplates::load((dir.path() / "p").string());
    FAIL();
  } catch (const kforge::InputError& e) {
    EXPECT_EQ(e.file(), bad.string());
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.field(), "{{parent_sauce}}");
  }
  ::unlink(bad.c_str());
  try {
    PromptTemplates::load((dir.path() / "p").string());
    FAIL();
  } catch (const kforge::InputError& e) {
    EXPECT_NE(e.file().find("optimize.md"), std::string::npos);
    EXPECT_NE(e.problem().find("missing prompt template"), std::string::npos);
  }
}

// A kernel of `task` in the archive with one evaluation (of run `run`, when given).
kforge::archive::CandidateId add_kernel(kforge::archive::Archive& ar, kforge::archive::TaskId task,
                                        const std::string& name,
                                        kforge::archive::EvaluationRecord e,
                                        std::optional<int64_t> run = std::nullopt) {
  kforge::archive::NewCandidate c;
  c.task = task;
  c.source = "__global__ void " + name + "() {}\n";
  c.identity = kforge::content_hash(c.source);
  if (run) c.run = kforge::archive::RunId{*run};
  e.harness_version = 1;
  return ar.add_candidate(c, std::nullopt, {e});
}

TEST(Prompt, OptimizeAndRepairUseTheParentAndRetrieval) {
  TempDir dir;
  Fixture softmax = Fixture::load("smoke/softmax");
  Fixture logsm = Fixture::load("level1/log_softmax");
  auto ar = kforge::archive::Archive::open((dir.path() / "a.db").string());
  auto t1 = ar.upsert_task(softmax.task);
  auto t2 = ar.upsert_task(logsm.task);
  kforge::archive::EvaluationRecord wrong;
  wrong.outcome = "wrong_result";
  wrong.evidence = {{"first_bad_index", 4095}, {"max_abs_error", 0.5}};
  auto pid = add_kernel(ar, t1, "softmax_rows_parent", wrong);
  kforge::archive::EvaluationRecord ok;
  ok.outcome = "correct";
  ok.time_ms = 2.0;
  add_kernel(ar, t2, "log_softmax_rows", ok);
  PromptInputs in = inputs(softmax, &ar);
  in.parent = pid;
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  std::string opt = render_prompt(t, PromptKind::Optimize, in);
  EXPECT_NE(opt.find("softmax_rows_parent"), std::string::npos);
  EXPECT_NE(opt.find("log_softmax_rows"), std::string::npos)
      << "a similar task's kernel is retrieved";
  std::string fix = render_prompt(t, PromptKind::RepairWrong, in);
  EXPECT_NE(fix.find("first_bad_index"), std::string::npos);
  EXPECT_NE(fix.find("wrong_result"), std::string::npos);
  // Before any candidate of the task was timed, a translation says so; after one was (any
  // candidate of this task version), it quotes its baselines and the roofline floor.
  in.parent.reset();
  EXPECT_NE(render_prompt(t, PromptKind::Translate, in).find("PyTorch baselines: not measured yet"),
            std::string::npos);
  kforge::archive::EvaluationRecord measured;
  measured.outcome = "correct";
  measured.time_ms = 0.05, measured.baselines = times(0.08, 0.07);
  measured.roofline_fraction = 0.5;
  auto tid = add_kernel(ar, t1, "softmax_timed", measured);
  std::string tr = render_prompt(t, PromptKind::Translate, in);
  EXPECT_NE(
      tr.find("PyTorch baselines: eager 0.08 ms, scripted 0.07 ms (measured beside candidate " +
              std::to_string(tid.value)),
      std::string::npos)
      << tr.substr(0, 1500);
  EXPECT_NE(tr.find("Roofline floor: 0.025 ms"), std::string::npos);
  // A run's own measurements are left out of its prompts (a resumed run asks the same).
  kforge::test::ArchiveSql sql(ar);
  sql.prepare("INSERT INTO runs (config) VALUES ('{}')").run();
  int64_t run = sql.last_insert_id();
  measured.baselines.set(BaselineKind::Eager, 0.5);
  add_kernel(ar, t1, "softmax_this_run", measured, run);
  in.run = run;
  EXPECT_NE(render_prompt(t, PromptKind::Translate, in).find("PyTorch baselines: eager 0.08 ms"),
            std::string::npos);
  in.run.reset();
  EXPECT_NE(render_prompt(t, PromptKind::Translate, in).find("PyTorch baselines: eager 0.5 ms"),
            std::string::npos);
}

// Dims in the order of the tensors' shapes (a matmul's M, K, N), not alphabetical (K, M, N).
TEST(Prompt, DimsFollowTheShapesNotTheAlphabet) {
  Fixture f = Fixture::load("level1/matmul_rect");
  std::string p =
      render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Translate, inputs(f));
  EXPECT_NE(p.find("at the timed sizes (M=2048, K=8192, N=4096)"), std::string::npos)
      << p.substr(0, 900);
  EXPECT_NE(p.find("handle exactly: M=1, K=1, N=1; M=37, K=1000, N=61"), std::string::npos);
  EXPECT_EQ(p.find("K=8192, M=2048"), std::string::npos);
}

// A hand-written convolution: dims named out of alphabetical order, and timed inputs (50 MB) past
// what kforge runs on the CPU for a shape, so the output's sizes come without a run (the meta
// device, or LibTorch's shape functions where it lacks a convolution).
std::string conv_task(const std::string& outputs = "") {
  return R"(name = "conv_relu"
summary = "A 3x3 convolution and a ReLU"
reference = """
def forward(x: Tensor, w: Tensor) -> Tensor:
    return torch.relu(F.conv2d(x, w))
"""

[dims]
N = 256
C_in = 3
H = 128
W = 128
C_out = 64

[[inputs]]
name = "x"
dtype = "float32"
shape = ["N", "C_in", "H", "W"]
init = "randn"

[[inputs]]
name = "w"
dtype = "float32"
shape = ["C_out", "C_in", 3, 3]
init = "randn"

[check]
dims = [{ N = 1, C_in = 1, H = 3, W = 3, C_out = 1 }, { N = 3, C_in = 2, H = 17, W = 9, C_out = 5 }]
)" + outputs;
}

// Issue 38: every output's shape at the timed sizes, not its rank; dims in the shapes' order.
TEST(Prompt, OutputsShowTheirShapeAtTheTimedSizes) {
  TempDir dir;
  auto t = kforge::tasks::load_task(dir.write("hand/conv_relu.toml", conv_task()));
  Fixture f{t, kforge::tasks::Reference::compile(t)};
  std::string p =
      render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Translate, inputs(f));
  EXPECT_NE(p.find("Inputs and outputs at the timed sizes (N=256, C_in=3, H=128, W=128, "
                   "C_out=64):\n"
                   "- input `x`: float32 [256, 3, 128, 128] (shape [N, C_in, H, W]), values randn\n"
                   "- input `w`: float32 [64, 3, 3, 3] (shape [C_out, C_in, 3, 3]), values randn\n"
                   "- output `out`: float32 [256, 64, 126, 126]\n"),
            std::string::npos)
      << p.substr(p.find("Inputs and outputs"), 600);
  EXPECT_NE(p.find("handle exactly: N=1, C_in=1, H=3, W=3, C_out=1; N=3, C_in=2, H=17, W=9, "
                   "C_out=5"),
            std::string::npos);
  EXPECT_EQ(p.find("(rank"), std::string::npos);
  EXPECT_EQ(p.find("C_in=3, C_out=64"), std::string::npos) << "not alphabetical";

  // A declared shape is shown beside the sizes...
  TempDir dir2;
  t = kforge::tasks::load_task(dir2.write(
      "hand/conv_relu.toml",
      conv_task(
          "\n[[outputs]]\nname = \"y\"\nshape = [\"N\", \"C_out\", \"H - 2\", \"W - 2\"]\n")));
  Fixture declared{t, kforge::tasks::Reference::compile(t)};
  p = render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Translate, inputs(declared));
  EXPECT_NE(p.find("- output `y`: float32 [256, 64, 126, 126] (shape [N, C_out, H - 2, W - 2])\n"),
            std::string::npos)
      << p.substr(p.find("Inputs and outputs"), 600);
  // ...and `tasks check` holds it to the reference.
  TempDir dir3;
  t = kforge::tasks::load_task(dir3.write(
      "hand/conv_relu.toml",
      conv_task(
          "\n[[outputs]]\nname = \"y\"\nshape = [\"N\", \"C_out\", \"H - 1\", \"W - 2\"]\n")));
  kforge::tasks::CheckOptions opt;
  opt.dims = kforge::tasks::DimsSelection::Check;
  kforge::tasks::TaskCheck c = kforge::tasks::check_task(t, opt);
  std::string problems = kforge::join(c.problems, "\n");
  EXPECT_NE(problems.find("output 'y' has shape [3, 5, 15, 7] at check dims (C_in=2, C_out=5, "
                          "H=17, N=3, W=9) but the task declares [N, C_out, H - 1, W - 2] = "
                          "[3, 5, 16, 7]"),
            std::string::npos)
      << problems;
  // A wrong declaration is not repeated to the model: the reference's sizes are.
  Fixture wrong{t, kforge::tasks::Reference::compile(t)};
  p = render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Translate, inputs(wrong));
  EXPECT_NE(p.find("- output `y`: float32 [256, 64, 126, 126]\n"), std::string::npos);
}

// How the sizes are found without a GPU: the meta device; LibTorch's shape functions, held to the
// reference's own outputs at the check sizes; the CPU where the inputs are small.
// Issue 38: a computed input (a draw, then a transform the harness applies) is said whole: a model
// told only "values randn" would not know its rows sum to 1.
TEST(Prompt, AComputedInputIsShownWithItsTransform) {
  TempDir dir;
  auto t = kforge::tasks::load_task(dir.write("hand/row_sums.toml", R"toml(name = "row_sums"
summary = "Sum of each row of a row-stochastic matrix, scaled"
reference = """
def forward(p: Tensor) -> Tensor:
    return p.sum(-1) * 2.0
"""

[dims]
B = 64
N = 32

[[inputs]]
name = "p"
dtype = "float32"
shape = ["B", "N"]
init = "randn"
transform = "torch.softmax(p, -1)"

[check]
dims = [{ B = 1, N = 1 }, { B = 3, N = 17 }]
)toml"));
  Fixture f{t, kforge::tasks::Reference::compile(t)};
  std::string p =
      render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Translate, inputs(f));
  EXPECT_NE(p.find("- input `p`: float32 [64, 32] (shape [B, N]), values randn, then "
                   "torch.softmax(p, -1)\n"),
            std::string::npos)
      << p.substr(p.find("Inputs and outputs"), 400);
}

TEST(Prompt, OutputShapesAreKnownWithoutAGpu) {
  TempDir dir;
  auto shapes_of = [&](const std::string& name, const std::string& text) {
    auto t = kforge::tasks::load_task(dir.write("hand/" + name + ".toml", text));
    auto ref = kforge::tasks::Reference::compile(t);
    std::optional<std::vector<kforge::tasks::TensorShape>> s =
        kforge::tasks::known_output_shapes(t, ref, t.dims);
    return s ? s->at(0).sizes : std::vector<int64_t>{};
  };
  EXPECT_EQ(shapes_of("conv_relu", conv_task()), (std::vector<int64_t>{256, 64, 126, 126}));
  // group_norm: small inputs run on the CPU.
  std::string norm = R"(name = "conv_norm"
summary = "s"
reference = """
def forward(x: Tensor, w: Tensor) -> Tensor:
    return F.group_norm(F.conv3d(x, w), 4)
"""
[dims]
B = 4
C = 3
D = 8
K = 16
[[inputs]]
name = "x"
dtype = "float32"
shape = ["B", "C", "D", "D", "D"]
init = "randn"
[[inputs]]
name = "w"
dtype = "float32"
shape = ["K", "C", 3, 3, 3]
init = "randn"
[check]
dims = [{ B = 1, C = 1, D = 3, K = 4 }]
)";
  EXPECT_EQ(shapes_of("conv_norm", norm), (std::vector<int64_t>{4, 16, 6, 6, 6}));
  // Worked out once: the same answer again.
  EXPECT_EQ(shapes_of("conv_norm", norm), (std::vector<int64_t>{4, 16, 6, 6, 6}));
  // Inputs of 134 MB, past the CPU's bound: the shape functions, group_norm keeping its input's.
  std::string large = norm;
  large.replace(large.find("B = 4\nC = 3\nD = 8"), 17, "B = 64\nC = 16\nD = 32");
  large.replace(large.find("\"conv_norm\""), 11, "\"conv_norm_large\"");
  EXPECT_EQ(shapes_of("conv_norm_large", large), (std::vector<int64_t>{64, 16, 30, 30, 30}));
}

// The evidence a repair quotes names the dims in the shapes' order too (JSON keeps them by name).
TEST(Prompt, FailureEvidenceListsDimsInShapeOrder) {
  TempDir dir;
  Fixture f = Fixture::load("level1/matmul_rect");
  auto ar = kforge::archive::Archive::open((dir.path() / "a.db").string());
  kforge::archive::EvaluationRecord wrong;
  wrong.outcome = "wrong_result";
  wrong.evidence = {{"where", {{"dims", {{"K", 1000}, {"M", 37}, {"N", 61}}}, {"seed", 5}}},
                    {"max_abs_error", 0.5}};
  PromptInputs in = inputs(f, &ar);
  in.parent = add_kernel(ar, ar.upsert_task(f.task), "matmul_parent", wrong);
  std::string fix =
      render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::RepairWrong, in);
  EXPECT_NE(
      fix.find(
          R"(- wrong_result: {"max_abs_error":0.5,"where":{"dims":{"M":37,"K":1000,"N":61},"seed":5}})"),
      std::string::npos)
      << fix.substr(fix.find("## The evidence"), 300);
}

// The facts of an H200 as kforge reads and measures them (numbers as the GPU machine gives them).
PromptGpu h200() {
  PromptGpu g;
  g.name = "NVIDIA H200";
  g.plan = kforge::compile::DeviceFacts::for_arch("sm_90a");
  g.plan.measured = true;
  g.l2_bytes = int64_t{60} << 20;
  g.spec_gbps = 4800;
  kforge::verify::MeasuredFacts m;
  m.name = "NVIDIA H200";
  m.read_gbps = 4000, m.write_gbps = 3900, m.copy_gbps = 3800;
  m.peak_tflops = {{"float32", 51.2},
                   {"float16", 713.0},
                   {"bfloat16", 720.5},
                   {"float64", 60.1},
                   {kforge::verify::kTf32, 378.0}};
  g.measured = m;
  return g;
}

TEST(Prompt, QuotesTheGpusFactsSayingWhichWereMeasured) {
  Fixture f = Fixture::load("smoke/softmax");
  PromptInputs in = inputs(f);
  in.device.clear();  // the facts alone name the GPU
  in.gpu = h200();
  std::string p = render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Translate, in);
  for (const char* fact :
       {"## The target\nNVIDIA H200 (sm_90a)\n", "- 132 SMs, warp size 32 (from the driver",
        "Memory bandwidth, measured: 4000 GB/s reading, 3900 writing, 3800 copying",
        "spec 4800 GB/s",
        "Matmul peaks, measured (PyTorch matmul, TF32 off): float32 51.2, float16 713.0, bfloat16 "
        "720.5, float64 60.1 TFLOP/s; float32 with TF32 on 378.0 TFLOP/s (3xTF32, which keeps "
        "float32 accuracy, runs at a third of it)\n",
        "L2 cache: 60 MiB (from the driver)", "48 KiB without opt-in; up to 232448 bytes (227 KiB",
        "Per SM (spec of sm_90): 65536 32-bit registers (at most 255 per thread), 2048 resident "
        "threads (64 warps), "
        "32 resident blocks, 228 KiB of shared memory",
        "at most 1024 threads", "at most 8 blocks per cluster"})
    EXPECT_NE(p.find(fact), std::string::npos) << fact << "\n" << p.substr(0, 2500);
  // The roofline floor from the measured bandwidth: 2 x 4096 x 4096 float32 moved at 4000 GB/s, x
  // 0.9.
  EXPECT_NE(p.find("Roofline floor: 0.0302 ms (from this GPU's measured bandwidth"),
            std::string::npos);
  // Spec facts only, where nothing was measured: they say so.
  in.gpu->plan.measured = false;
  in.gpu->measured.reset();
  p = render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Translate, in);
  EXPECT_NE(p.find("132 SMs, warp size 32 (spec of the usual sm_90a GPU"), std::string::npos);
  EXPECT_NE(p.find("Memory bandwidth and matmul peaks: not measured yet"), std::string::npos);
  EXPECT_NE(p.find("Roofline floor: not measured yet"), std::string::npos);
}

// docs/answer-format.md keeps what only kforge needs for people; the prompts' copy leaves it out.
TEST(Prompt, AnswerFormatLeavesOutWhatOnlyKforgeNeeds) {
  std::string whole =
      *kforge::read_file((kforge::test::source_dir() / "docs/answer-format.md").string());
  std::string prompt = load_answer_format(prompts_dir());
  for (const char* kforge_only :
       {"XXH3-128", "## Identity", "compile/src/answer.cpp", "kforge tasks show"}) {
    EXPECT_NE(whole.find(kforge_only), std::string::npos) << kforge_only;
    EXPECT_EQ(prompt.find(kforge_only), std::string::npos) << kforge_only;
  }
  EXPECT_EQ(prompt.find("not-in-prompt"), std::string::npos);
  EXPECT_EQ(prompt.find("\n\n\n"), std::string::npos);
  EXPECT_NE(prompt.find("A candidate is **CUDA device code** plus a **JSON launch plan**"),
            std::string::npos);
  // A marker left open is the document's error, named with its line.
  TempDir dir;
  dir.write("p/translate.md", "x\n");
  dir.write("docs/answer-format.md", "# A\nkept\n<!-- not-in-prompt -->\ndropped\n");
  try {
    load_answer_format((dir.path() / "p").string());
    FAIL();
  } catch (const kforge::InputError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(e.problem().find("never closed"), std::string::npos);
  }
  dir.write("docs/answer-format.md",
            "# A\nkept\n<!-- not-in-prompt -->\ndropped\n<!-- /not-in-prompt -->\nalso kept\n");
  EXPECT_EQ(load_answer_format((dir.path() / "p").string()), "# A\nkept\nalso kept\n");
}

// What the answer format now says, each against what the code does.
TEST(Prompt, AnswerFormatSaysWhatThePlanCheckerDoes) {
  std::string spec = load_answer_format(prompts_dir());
  for (const char* statement :
       {"The default tunables are the first valid combination", "the default is `BLOCK=256, VEC=2`",
        "tunables sorted by name", "`\"C * H * W\"`", "`\"tile<float, 4>\"`", "A dim cannot be a",
        "Constraints are checked at the timed dims only", "starts on a 256-byte boundary",
        "(the default) its contents are undefined",
        "nothing survives from one run of the plan to the next",
        "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
        "for plain, cooperative and cluster launches alike", "so 8 blocks is the limit"})
    EXPECT_NE(spec.find(statement), std::string::npos) << statement;

  kforge::test::CompileFixture fx = kforge::test::CompileFixture::load("smoke/relu");
  auto plan = [&](const std::string& kernel, const std::string& extra) {
    return R"js({"launch": [{"kernel": ")js" + kernel +
           R"js(", "grid": ["ceil_div(B * N, 256)"], "block": [256],
               "args": ["x", "out", "B * N", 7]}])js" +
           extra + "}";
  };
  // The first valid combination, the tunables in name order whatever the key order: VEC=4 breaks
  // the constraint at BLOCK=256, so BLOCK=256, VEC=2 (not BLOCK=128, VEC=4).
  auto p = kforge::compile::parse_plan_text(
      plan(
          "relu",
          R"js(, "tune": {"VEC": [4, 2], "BLOCK": [256, 128]}, "constraints": ["BLOCK * VEC <= 512"])js"),
      fx.task, fx.tensors);
  kforge::compile::DeviceFacts facts = kforge::compile::DeviceFacts::for_arch("sm_90a");
  EXPECT_EQ(kforge::compile::choose_tunables(p, {}, fx.task.dims, facts),
            (kforge::compile::Tunables{{"BLOCK", 256}, {"VEC", 2}}));
  // Integer literals, type names and tunable arithmetic as template arguments; dim expressions and
  // literals as kernel arguments; a dim as a template argument does not compile.
  TempDir dir;
  kforge::compile::Compiler compiler(kforge::test::private_cache(dir));
  const std::string source =
      "template <typename T, int kV> __global__ void relu(const T* x, T* out, long long n, int "
      "seven) {\n"
      "  long long i = blockIdx.x * 256LL + threadIdx.x;\n"
      "  if (i < n && seven == 7 && kV > 0) out[i] = x[i] > 0 ? x[i] : T(0);\n}\n";
  auto check = [&](const std::string& kernel) {
    return kforge::compile::check_candidate(fx.task, fx.tensors, source,
                                            plan(kernel, R"(, "tune": {"BLOCK": [128]})"),
                                            std::nullopt, facts, compiler);
  };
  for (const char* ok : {"relu<float, 4>", "relu<float, BLOCK * 2>"}) {
    auto r = check(ok);
    EXPECT_TRUE(r.ok()) << ok << ": " << (r.errors.empty() ? "" : r.errors[0]);
  }
  EXPECT_FALSE(check("relu<float, N>").ok()) << "a dim is no macro";
}

// A task version's measured baselines on the target GPU come before any candidate's measurement.
TEST(Prompt, EagerTimesComeFromTheBaselinesTableFirst) {
  TempDir dir;
  Fixture f = Fixture::load("smoke/softmax");
  auto ar = kforge::archive::Archive::open((dir.path() / "a.db").string());
  auto task = ar.upsert_task(f.task);
  auto h200 = ar.upsert_device("GPU-h200", "NVIDIA H200", "sm_90a", 132, std::nullopt, "580");
  auto other = ar.upsert_device("GPU-other", "NVIDIA A100", "sm_80", 108, std::nullopt, "580");
  kforge::archive::EvaluationRecord measured;
  measured.outcome = "correct";
  measured.time_ms = 0.05, measured.baselines = times(0.08), measured.roofline_fraction = 0.5;
  add_kernel(ar, task, "softmax_timed", measured);
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  PromptInputs in = inputs(f, &ar);
  in.device_id = h200.value;
  auto eager = [&] { return baselines_line(render_prompt(t, PromptKind::Translate, in)); };
  EXPECT_NE(eager().find("0.08 ms (measured beside candidate"), std::string::npos)
      << "no baseline yet: the fallback";
  ar.store_baseline(task, f.task.dims, other, "ieee", times(0.2, 0.19));  // another GPU
  ar.store_baseline(task, f.task.dims, h200, "tf32", times(0.03, 0.03));  // another math mode
  ar.store_baseline(task, {{"B", 1}, {"N", 3}}, h200, "ieee", times(0.01, 0.01));  // other dims
  EXPECT_NE(eager().find("0.08 ms (measured beside candidate"), std::string::npos) << eager();
  ar.store_baseline(task, f.task.dims, h200, "ieee", times(0.123, 0.111, 0.097));
  EXPECT_EQ(eager(),
            "PyTorch baselines: eager 0.123 ms, scripted 0.111 ms, compile 0.097 ms (measured on "
            "NVIDIA H200, TF32 off); the best baseline, the time to beat: compile, 0.097 ms (" +
                about(BaselineKind::Compiled) +
                "). Roofline floor: 0.025 ms (measured beside candidate 1 on a GPU).");
  // Another H200 (a run resumed on another machine) quotes the same first timing of the kind, also
  // once its own judgments timed the references: the prompt, and the answer cached under it, stay.
  std::string first = eager();
  auto h200_b = ar.upsert_device("GPU-h200-b", "NVIDIA H200", "sm_90a", 132, std::nullopt, "580");
  in.device_id = h200_b.value;
  EXPECT_EQ(eager(), first);
  ar.store_baseline(task, f.task.dims, h200_b, "ieee", times(0.125, 0.112));
  EXPECT_EQ(eager(), first);
  in.device_id.reset();  // no target GPU: no baselines
  EXPECT_NE(eager().find("0.08 ms (measured beside candidate"), std::string::npos);
}

// Where torch.compile's baseline is missing the prompt says so and why (never a made-up number); a
// baseline timed before schema 5 (no time, no reason) says nothing about torch.compile.
TEST(Prompt, AMissingTorchCompileTimeIsSaidWithItsReason) {
  Fixture f = Fixture::load("smoke/softmax");
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  for (bool with_reason : {true, false}) {
    TempDir dir;
    auto ar = kforge::archive::Archive::open((dir.path() / "a.db").string());
    auto task = ar.upsert_task(f.task);
    auto h200 = ar.upsert_device("GPU-h200", "NVIDIA H200", "sm_90a", 132, std::nullopt, "580");
    ar.store_baseline(
        task, f.task.dims, h200, "ieee",
        times(0.123, 0.111, std::nullopt,
              with_reason ? "no Python with PyTorch 2 found (python3: torch 1.13)" : ""));
    PromptInputs in = inputs(f, &ar);
    in.device_id = h200.value;
    std::string line = baselines_line(render_prompt(t, PromptKind::Translate, in));
    if (with_reason)
      EXPECT_NE(line.find("PyTorch baselines: eager 0.123 ms, scripted 0.111 ms, compile not "
                          "measured (no Python with PyTorch 2 found (python3: torch 1.13)) "
                          "(measured on NVIDIA H200"),
                std::string::npos)
          << line;
    else
      EXPECT_EQ(line.find("compile"), std::string::npos) << line;
    EXPECT_EQ(line.find("TorchInductor"), std::string::npos) << line;
    EXPECT_NE(line.find("the best baseline, the time to beat: scripted, 0.111 ms"),
              std::string::npos)
        << line;
  }
}

// Every kind of baseline measured is quoted (a kind added to baseline_kinds() too), a missing one
// with why, and the best (the fastest kind measured) is named as the time to beat; a parent's
// numbers give its speedup over each kind and over the best.
TEST(Prompt, NamesTheBestBaselineAsTheTimeToBeat) {
  Fixture f = Fixture::load("smoke/softmax");
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  TempDir dir;
  auto ar = kforge::archive::Archive::open((dir.path() / "a.db").string());
  auto task = ar.upsert_task(f.task);
  auto h200 = ar.upsert_device("GPU-h200", "NVIDIA H200", "sm_90a", 132, std::nullopt, "580");
  // Each kind twice as fast as the one before: the last kind is the best.
  BaselineTimes all;
  std::vector<std::string> quoted;
  double ms = 0.2;
  for (const kforge::BaselineKindInfo& info : kforge::baseline_kinds()) {
    all.set(info.kind, ms);
    quoted.push_back(std::string(info.label) + " " + printed("%.4g", ms) + " ms");
    ms /= 2;
  }
  const kforge::BaselineKindInfo& fastest = kforge::baseline_kinds().back();
  ar.store_baseline(task, f.task.dims, h200, "ieee", all);
  PromptInputs in = inputs(f, &ar);
  in.device_id = h200.value;
  std::string line = baselines_line(render_prompt(t, PromptKind::Translate, in));
  EXPECT_NE(line.find("PyTorch baselines: " + kforge::join(quoted, ", ") + " (measured on"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("the best baseline, the time to beat: " + std::string(fastest.label) + ", " +
                      printed("%.4g", 2 * ms) + " ms (" + std::string(fastest.about) + ")"),
            std::string::npos)
      << line;

  // The fastest kind missing, with its reason: the next fastest is the best.
  const kforge::BaselineKindInfo& second = kforge::baseline_kinds().end()[-2];
  all.set(fastest.kind, std::nullopt, "turned off (--no-max-autotune)");
  auto h100 = ar.upsert_device("GPU-h100", "NVIDIA H100", "sm_90a", 132, std::nullopt, "580");
  ar.store_baseline(task, f.task.dims, h100, "ieee", all);
  in.device_id = h100.value;
  line = baselines_line(render_prompt(t, PromptKind::Translate, in));
  EXPECT_NE(
      line.find(std::string(fastest.label) + " not measured (turned off (--no-max-autotune))"),
      std::string::npos)
      << line;
  EXPECT_NE(line.find("the best baseline, the time to beat: " + std::string(second.label) + ", " +
                      printed("%.4g", 4 * ms) + " ms"),
            std::string::npos)
      << line;

  // A parent timed at the best baseline's half: its speedups over each kind, and 2x the best.
  kforge::archive::EvaluationRecord e;
  e.outcome = "correct";
  e.baselines = all;
  e.time_ms = 2 * ms;
  in.parent = add_kernel(ar, task, "softmax_fast", e);
  std::string numbers = render_prompt_parts(t, PromptKind::Optimize, in).body;
  std::vector<std::string> speedups;
  for (const kforge::BaselineMs& b : all.items)
    if (b.ms)
      speedups.push_back(printed("%.2f", *b.ms / *e.time_ms) + "x " +
                         std::string(kforge::baseline_info(b.kind).label));
  EXPECT_NE(numbers.find(kforge::join(speedups, ", ") + ", 2.00x the best baseline (" +
                         std::string(second.label) + ")"),
            std::string::npos)
      << numbers;
}

// ---- Failure memory ----

struct FailureArchive {
  TempDir dir;
  Fixture f = Fixture::load("smoke/softmax");
  kforge::archive::Archive ar = kforge::archive::Archive::open((dir.path() / "a.db").string());
  kforge::archive::TaskId task = ar.upsert_task(f.task);
  kforge::archive::DeviceId gpu =
      ar.upsert_device("GPU-1", "NVIDIA H200", "sm_90a", 132, std::nullopt, "580");

  int64_t run(const std::string& started_at) {
    kforge::test::ArchiveSql sql(ar);
    sql.prepare("INSERT INTO runs (started_at, config) VALUES (?, '{}')").bind(1, started_at).run();
    return sql.last_insert_id();
  }
  // A candidate (of `run`, generation `g`) made at `at`, with a compile report and evaluations.
  kforge::archive::CandidateId candidate(
      const std::string& name, std::optional<int64_t> run, int g, const std::string& at,
      std::optional<kforge::archive::CompileRecord> compile,
      std::vector<kforge::archive::EvaluationRecord> evaluations = {}) {
    kforge::archive::NewCandidate c;
    c.task = task;
    c.source = "__global__ void " + name + "() {}\n";
    c.identity = kforge::content_hash(c.source);
    if (run) c.run = kforge::archive::RunId{*run};
    c.generation = g;
    c.created_at = at;
    if (compile) compile->created_at = at;
    for (auto& e : evaluations) {
      e.harness_version = 1;
      if (!e.created_at) e.created_at = at;
    }
    return ar.add_candidate(c, compile, evaluations);
  }
  static kforge::archive::CompileRecord compile_error(const std::string& line) {
    kforge::archive::CompileRecord cr;
    cr.stage = "compile";
    cr.errors = {"the source does not compile:\noptimize-answer.md:14: warning: unused\n" + line +
                 "\n1 error detected"};
    return cr;
  }
  static kforge::archive::CompileRecord compiled() {
    kforge::archive::CompileRecord cr;
    cr.ok = true;
    cr.stage = "passed";
    return cr;
  }
  static kforge::archive::EvaluationRecord wrong(double got, const std::string& at = "") {
    kforge::archive::EvaluationRecord e;
    e.outcome = "wrong_result";
    e.evidence = {{"where", {{"dims", {{"N", 1000}, {"B", 37}}}, {"timed", false}, {"seed", 5}}},
                  {"detail",
                   {{"output", "out"},
                    {"comparison",
                     {{"max_abs_error", 0.25},
                      {"threshold", 1e-4},
                      {"mismatches", 37},
                      {"numel", 37000},
                      {"first_bad_index", 999},
                      {"first_bad_position", {0, 999}},
                      {"first_bad_value", got},
                      {"first_bad_expected", 0.25},
                      {"nan_count", 0}}},
                    {"unwritten_elements", 0}}}};
    if (!at.empty()) e.created_at = at;
    return e;
  }
  void screen(kforge::archive::CandidateId c, int64_t run, const std::string& outcome,
              const std::string& summary, const std::string& at) {
    kforge::test::ArchiveSql(ar)
        .prepare(
            "INSERT INTO screens (candidate_id, device_id, harness_version, run_id, outcome, "
            "summary, created_at) "
            "VALUES (?, ?, 1, ?, ?, ?, ?)")
        .bind(1, c.value)
        .bind(2, gpu.value)
        .bind(3, run)
        .bind(4, outcome)
        .bind(5, summary)
        .bind(6, at)
        .run();
  }
  std::string failures(std::optional<int64_t> run, std::optional<int> generation) {
    PromptInputs in = inputs(f, &ar);
    in.run = run;
    in.generation = generation;
    return prompt_context(in).at("failures");
  }
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Prompt, FailuresOfEarlierRunsAndThisRunsEarlierGenerations) {
  FailureArchive fa;
  EXPECT_EQ(fa.failures(std::nullopt, std::nullopt), "No failures recorded yet.");
  int64_t r1 = fa.run("2025-01-01T00:00:00.000Z");
  fa.candidate(
      "c1", r1, 1, "2025-01-01T00:01:00.000Z",
      FailureArchive::compile_error("optimize-answer.md:15: error: identifier \"Q\" is undefined"));
  fa.candidate("w1", r1, 2, "2025-01-01T00:02:00.000Z", FailureArchive::compiled(),
               {FailureArchive::wrong(0.5)});
  // The same lesson again (other numbers): shown once.
  fa.candidate("w2", r1, 3, "2025-01-01T00:03:00.000Z", FailureArchive::compiled(),
               {FailureArchive::wrong(0.75)});
  kforge::archive::EvaluationRecord harness;
  harness.outcome = "harness_error";  // the harness's failure, not the kernel's
  auto h =
      fa.candidate("h1", r1, 3, "2025-01-01T00:04:00.000Z", FailureArchive::compiled(), {harness});

  int64_t r2 = fa.run("2025-02-01T00:00:00.000Z");
  auto oob = fa.candidate("o2", r2, 1, "2025-02-01T00:01:00.000Z", FailureArchive::compiled());
  fa.screen(oob, r2, "out_of_bounds_write",
            "writes past the end of 'out' (canaries overwritten) at dims B=37, N=1000",
            "2025-02-01T00:01:01.000Z");
  std::string before = fa.failures(r2, 2);
  // This run's generation 2 (the child's own) and what happened to earlier runs' kernels after this
  // run started are left out: a resumed run renders generation 2's prompts before they exist.
  fa.candidate(
      "c2", r2, 2, "2025-02-01T00:02:00.000Z",
      FailureArchive::compile_error("optimize-answer.md:9: error: identifier \"Z\" is undefined"));
  kforge::archive::EvaluationRecord late;
  late.outcome = "timeout";
  late.harness_version = 1;
  late.created_at = "2025-02-01T00:03:00.000Z";
  late.evidence = {{"watchdog_ms", 2000},
                   {"where", {{"dims", {{"B", 4096}, {"N", 4096}}}, {"timed", true}}}};
  fa.ar.add_evaluation(h, late);
  std::string now = fa.failures(r2, 2);
  EXPECT_EQ(now, before) << "a resumed run must render the same prompt";

  EXPECT_EQ(count(now, "\n"), 3u) << now;
  EXPECT_NE(now.find("- **out_of_bounds_write** (candidate " + std::to_string(oob.value) +
                     ", this run, generation 1): writes past the end of 'out'"),
            std::string::npos)
      << now;
  EXPECT_NE(
      now.find(
          "**wrong_result** (candidate 3, run 1): output 'out': max abs error 0.25 > threshold "
          "0.0001; 37 of "
          "37000 elements wrong, first at [0, 999]: got 0.75, expected 0.25 at dims B=37, N=1000"),
      std::string::npos)
      << now;
  EXPECT_EQ(count(now, "wrong_result"), 1u);
  EXPECT_NE(now.find("**compile error** (candidate 1, run 1): the source does not compile: "
                     "optimize-answer.md:15: error: "
                     "identifier \"Q\" is undefined"),
            std::string::npos)
      << now;
  EXPECT_EQ(now.find("harness_error"), std::string::npos);
  EXPECT_EQ(now.find("\"Z\""), std::string::npos);
  EXPECT_EQ(now.find("timeout"), std::string::npos);
  // Without the child's generation, none of this run's; the next generation sees generation 2's.
  EXPECT_EQ(fa.failures(r2, std::nullopt).find("out_of_bounds"), std::string::npos);
  EXPECT_NE(fa.failures(r2, 3).find("identifier \"Z\""), std::string::npos);
  // Outside a run (kforge prompt render) everything counts, at most 3, each kind's newest first.
  std::string all = fa.failures(std::nullopt, std::nullopt);
  EXPECT_EQ(count(all, "\n"), 3u) << all;
  EXPECT_NE(all.find("**timeout** (candidate " + std::to_string(h.value) +
                     ", run 1): no answer within the 2000 ms watchdog "
                     "at dims B=4096, N=4096 (the timed sizes)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("identifier \"Z\""), std::string::npos);
  EXPECT_NE(all.find("out_of_bounds_write"), std::string::npos);
  // The optimize and translate prompts quote them.
  PromptInputs in = inputs(fa.f, &fa.ar);
  in.parent = kforge::archive::CandidateId{2};
  std::string opt = render_prompt(PromptTemplates::load(prompts_dir()), PromptKind::Optimize, in);
  EXPECT_NE(opt.find("## Earlier attempts at this task that failed\n" + all), std::string::npos)
      << opt;
}

// Over the token budget, retrieved kernels go first (the lowest ranked first), then failures; the
// task, the parent and the answer format stay.
TEST(Prompt, TokenBudgetLeavesOutRetrievedKernelsThenFailures) {
  FailureArchive fa;
  std::string filler;
  for (int i = 0; i < 60; ++i) filler += "  // " + std::string(70, 'x') + "\n";
  auto parent = fa.candidate(
      "softmax_parent", std::nullopt, 0, "2025-01-01T00:00:00.000Z",
      FailureArchive::compile_error("optimize-answer.md:15: error: identifier \"Q\" is undefined"));
  for (const char* spec : {"level1/softmax", "level1/log_softmax", "level2/matmul_softmax"}) {
    Fixture other = Fixture::load(spec);
    kforge::archive::NewCandidate c;
    c.task = fa.ar.upsert_task(other.task);
    c.source = "__global__ void k_" + other.task.name + "() {\n" + filler + "}\n";
    c.identity = kforge::content_hash(c.source);
    kforge::archive::EvaluationRecord ok;
    ok.outcome = "correct";
    ok.time_ms = 1.0;
    ok.harness_version = 1;
    fa.ar.add_candidate(c, std::nullopt, {ok});
  }
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  PromptInputs in = inputs(fa.f, &fa.ar);
  in.parent = parent;
  in.max_tokens = 1000000;
  // The retrieved kernels' headings ("### suite/name (candidate ..."), best ranked first.
  auto kernels = [](const std::string& p) {
    std::vector<std::string> out;
    size_t end = p.find("## Earlier attempts");
    for (size_t at = p.find("\n### ", p.find("## What others wrote")); at < end;
         at = p.find("\n### ", at + 1))
      out.push_back(p.substr(at + 5, p.find(' ', at + 5) - at - 5));
    return out;
  };
  std::string whole = render_prompt(t, PromptKind::Optimize, in);
  std::vector<std::string> ranked = kernels(whole);
  ASSERT_EQ(ranked.size(), 3u) << whole;
  PromptParts parts = render_prompt_parts(t, PromptKind::Optimize, in);
  EXPECT_EQ(whole, parts.joined());
  EXPECT_EQ(parts.body, t.render(PromptKind::Optimize, prompt_context(in)))
      << "within budget: everything";
  size_t tokens = (whole.size() + 3) / 4;

  in.max_tokens = tokens - 1;
  std::string one_less = render_prompt(t, PromptKind::Optimize, in);
  EXPECT_LE((one_less.size() + 3) / 4, in.max_tokens) << "the budget covers both parts";
  EXPECT_EQ(render_prompt_parts(t, PromptKind::Optimize, in).context, parts.context);
  EXPECT_EQ(kernels(one_less), (std::vector<std::string>{ranked[0], ranked[1]}))
      << "the lowest ranked goes first";
  EXPECT_NE(one_less.find("(1 more similar kernel(s) left out for length.)"), std::string::npos);
  EXPECT_NE(one_less.find("identifier \"Q\""), std::string::npos)
      << "failures stay while kernels can go";

  in.max_tokens = 10;  // nothing fits: every kernel and failure goes, nothing else does
  std::string tiny = render_prompt(t, PromptKind::Optimize, in);
  EXPECT_TRUE(kernels(tiny).empty());
  EXPECT_NE(tiny.find("(3 more similar kernel(s) left out for length.)"), std::string::npos);
  EXPECT_NE(tiny.find("(1 more failure(s) left out for length.)"), std::string::npos);
  EXPECT_NE(tiny.find("torch.softmax(x, dim=-1)"), std::string::npos);
  EXPECT_NE(tiny.find("__global__ void softmax_parent()"), std::string::npos);
  EXPECT_NE(tiny.find(load_answer_format(prompts_dir())), std::string::npos);
  EXPECT_EQ(render_prompt_parts(t, PromptKind::Optimize, in).context, parts.context)
      << "the context is never cut";
}

// ---- Two parts: the context a provider caches, and the request ----

// A test GPU's prompt for every kind (a crossover's second parent is in.second_parent).
std::map<PromptKind, PromptParts> every_kind(const PromptTemplates& t, PromptInputs in) {
  in.extra["idea_count"] = "3";
  in.extra["idea"] = "Vectorise the loads with float4.";
  std::map<PromptKind, PromptParts> out;
  for (auto kind :
       {PromptKind::Translate, PromptKind::Optimize, PromptKind::Crossover,
        PromptKind::RepairCompile, PromptKind::RepairWrong, PromptKind::Ideas, PromptKind::Idea})
    out[kind] = render_prompt_parts(t, kind, in);
  return out;
}

kforge::archive::EvaluationRecord timed(double eager_ms, double roofline_fraction) {
  kforge::archive::EvaluationRecord e;
  e.outcome = "correct";
  e.time_ms = 0.05, e.baselines = times(eager_ms), e.roofline_fraction = roofline_fraction;
  return e;
}

// What repeats across a task's requests comes first, byte-identical, whatever the kind, the parents
// and the generation: a provider serves it from its prompt cache.
TEST(Prompt, TheContextIsTheSameForEveryKindParentAndGeneration) {
  FailureArchive fa;
  int64_t run = fa.run("2025-01-01T00:00:00.000Z");
  // Parents measured beside different eager times and floors, one of them wrong; a similar task's
  // kernel to retrieve.
  auto a = fa.candidate("softmax_a", run, 1, "2025-01-01T00:01:00.000Z", FailureArchive::compiled(),
                        {timed(0.08, 0.5)});
  auto b = fa.candidate("softmax_b", run, 2, "2025-01-01T00:02:00.000Z", FailureArchive::compiled(),
                        {timed(0.09, 0.4)});
  auto w = fa.candidate("softmax_w", run, 2, "2025-01-01T00:03:00.000Z", FailureArchive::compiled(),
                        {FailureArchive::wrong(0.5)});
  Fixture logsm = Fixture::load("level1/log_softmax");
  add_kernel(fa.ar, fa.ar.upsert_task(logsm.task), "log_softmax_rows", timed(1.0, 0.5));
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  PromptInputs in = inputs(fa.f, &fa.ar);
  in.gpu = h200();
  in.run = run;
  in.generation = 2;
  in.parent = a, in.second_parent = b;
  std::map<PromptKind, PromptParts> first = every_kind(t, in);
  const std::string context = first[PromptKind::Optimize].context;
  ASSERT_FALSE(context.empty());
  for (const auto& [kind, parts] : first)
    EXPECT_EQ(parts.context, context) << prompt_kind_name(kind);
  // Other parents, a later generation (which quotes generation 2's failure): the same context.
  in.parent = w, in.second_parent = a;
  in.generation = 3;
  std::map<PromptKind, PromptParts> later = every_kind(t, in);
  for (const auto& [kind, parts] : later)
    EXPECT_EQ(parts.context, context) << prompt_kind_name(kind);

  // The context: the answer format, the GPU, the task and how it is judged; nothing of a request.
  EXPECT_EQ(context.find(load_answer_format(prompts_dir())), context.find("# Answer format"))
      << "quoted whole";
  for (const char* shared :
       {"torch.softmax(x, dim=-1)", "Memory bandwidth, measured: 4000 GB/s",
        "## The operation: smoke/softmax", "PyTorch baselines: not measured yet",
        "Roofline floor: 0.0302 ms", "## How it is judged", "TF32 is off"})
    EXPECT_NE(context.find(shared), std::string::npos) << shared << "\n" << context;
  for (const char* per_request :
       {"softmax_a", "softmax_b", "softmax_w", "log_softmax_rows", "wrong_result", "Vectorise",
        "measured beside candidate", "No failures", "None in the archive"})
    EXPECT_EQ(context.find(per_request), std::string::npos) << per_request;

  // The request: the parent's code, its failures and retrieved kernels; not the task's reference.
  const PromptParts& opt = later[PromptKind::Optimize];
  EXPECT_NE(opt.body.find("__global__ void softmax_w()"), std::string::npos) << opt.body;
  EXPECT_NE(opt.body.find("log_softmax_rows"), std::string::npos);
  EXPECT_NE(opt.body.find("**wrong_result** (candidate " + std::to_string(w.value)),
            std::string::npos)
      << opt.body;
  EXPECT_EQ(opt.body.find("torch.softmax(x, dim=-1)"), std::string::npos);
  EXPECT_EQ(opt.body.find("# Answer format"), std::string::npos);
  EXPECT_NE(opt.body.find("answer format above"), std::string::npos);
  EXPECT_NE(first[PromptKind::Optimize].body.find("__global__ void softmax_a()"),
            std::string::npos);
  EXPECT_NE(later[PromptKind::Idea].body.find("Vectorise the loads with float4."),
            std::string::npos);
  EXPECT_NE(later[PromptKind::Ideas].body.find("No code"), std::string::npos);
  EXPECT_EQ(opt.joined(), opt.context + "\n\n" + opt.body);
  EXPECT_EQ(render_prompt(t, PromptKind::Optimize, in), opt.joined());
  // Every kind's request starts with its own instruction, after the context.
  std::set<std::string> openings;
  for (const auto& [kind, parts] : later)
    openings.insert(parts.body.substr(0, parts.body.find('\n', 20)));
  EXPECT_EQ(openings.size(), 7u);
}

// The context is the task's: another task's differs, past the answer format and the GPU they share.
TEST(Prompt, TheContextDiffersBetweenTasksAfterWhatTheyShare) {
  PromptTemplates t = PromptTemplates::load(prompts_dir());
  Fixture softmax = Fixture::load("smoke/softmax"), matmul = Fixture::load("level1/matmul_rect");
  PromptInputs a = inputs(softmax), b = inputs(matmul);
  a.gpu = b.gpu = h200();
  std::string ca = render_prompt_parts(t, PromptKind::Translate, a).context;
  std::string cb = render_prompt_parts(t, PromptKind::Translate, b).context;
  EXPECT_NE(ca, cb);
  EXPECT_NE(cb.find("M=2048, K=8192, N=4096"), std::string::npos);
  size_t task_a = ca.find("PyTorch baselines: "), task_b = cb.find("PyTorch baselines: ");
  ASSERT_NE(task_a, std::string::npos);
  EXPECT_EQ(ca.substr(0, task_a), cb.substr(0, task_b))
      << "the answer format and the GPU come first, shared";
}

// A prompts folder without context.md (a user's own, all-in-one templates) renders as it did.
TEST(Prompt, AFolderWithoutContextRendersTheOldWay) {
  TempDir dir;
  for (const char* k :
       {"translate", "crossover", "repair_compile", "repair_wrong", "ideas", "idea"})
    dir.write(std::string("p/") + k + ".md",
              "Task {{task_id}}\n{{task_reference}}\n{{answer_format}}\n");
  dir.write("p/optimize.md",
            "Faster {{task_id}}\nEager: "
            "{{eager_time}}\n{{parent_numbers}}\n{{parent_source}}\n{{failures}}\n");
  PromptTemplates t = PromptTemplates::load((dir.path() / "p").string());
  EXPECT_FALSE(t.has_context());
  EXPECT_TRUE(t.placeholders_in_context().empty());
  Fixture f = Fixture::load("smoke/softmax");
  PromptInputs in = inputs(f);
  PromptParts tr = render_prompt_parts(t, PromptKind::Translate, in);
  EXPECT_EQ(tr.context, "");
  EXPECT_EQ(tr.body, t.render(PromptKind::Translate, prompt_context(in)));
  EXPECT_EQ(tr.joined(), tr.body);
  EXPECT_EQ(render_prompt(t, PromptKind::Translate, in), tr.body);
  // A parent's own measurement fills {{eager_time}} as before.
  TempDir adir;
  auto ar = kforge::archive::Archive::open((adir.path() / "a.db").string());
  auto parent = add_kernel(ar, ar.upsert_task(f.task), "softmax_timed", timed(0.08, 0.5));
  in.archive = &ar;
  in.parent = parent;
  PromptParts opt = render_prompt_parts(t, PromptKind::Optimize, in);
  EXPECT_EQ(opt.context, "");
  EXPECT_EQ(opt.body, t.render(PromptKind::Optimize, prompt_context(in)));
  EXPECT_NE(opt.body.find("Eager: eager 0.08 ms (measured beside candidate " +
                          std::to_string(parent.value)),
            std::string::npos)
      << opt.body;
}

// Where the context has no eager time or floor, the request quotes what was measured beside the
// parent (which differs from parent to parent, so it cannot be in the context).
TEST(Prompt, AParentsOwnMeasurementsAreQuotedInTheRequest) {
  FailureArchive fa;
  int64_t run = fa.run("2025-01-01T00:00:00.000Z");
  auto parent = fa.candidate("softmax_a", run, 1, "2025-01-01T00:01:00.000Z",
                             FailureArchive::compiled(), {timed(0.08, 0.5)});
  PromptInputs in = inputs(fa.f, &fa.ar);
  in.run = run;
  in.generation = 2;
  in.parent = parent;
  PromptParts p =
      render_prompt_parts(PromptTemplates::load(prompts_dir()), PromptKind::Optimize, in);
  EXPECT_NE(p.context.find("PyTorch baselines: not measured yet. Roofline floor: not measured yet"),
            std::string::npos);
  std::string beside = "(measured beside candidate " + std::to_string(parent.value);
  EXPECT_NE(p.body.find("eager 0.08 ms " + beside), std::string::npos) << p.body;
  EXPECT_NE(p.body.find("roofline floor 0.025 ms " + beside), std::string::npos) << p.body;
  // Where the context has them, the request does not repeat the parent's.
  in.gpu = h200();
  p = render_prompt_parts(PromptTemplates::load(prompts_dir()), PromptKind::Optimize, in);
  EXPECT_NE(p.body.find("eager 0.08 ms " + beside), std::string::npos);
  EXPECT_EQ(p.body.find("roofline floor 0.025"), std::string::npos) << p.body;
}

// context.md is checked as the kinds' templates are, and may quote only what every request of a
// task shares.
TEST(Prompt, ContextPlaceholdersAreCheckedAtLoad) {
  TempDir dir;
  for (const char* k :
       {"translate", "optimize", "crossover", "repair_compile", "repair_wrong", "ideas", "idea"})
    dir.write(std::string("p/") + k + ".md", "Do {{parent_id}}\n");
  std::string p = (dir.path() / "p").string();
  auto context = dir.write("p/context.md", "# Shared\n{{answer_format}}\nTask {{task_sauce}}\n");
  try {
    PromptTemplates::load(p);
    FAIL();
  } catch (const kforge::InputError& e) {
    EXPECT_EQ(e.file(), context.string());
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.field(), "{{task_sauce}}");
    EXPECT_NE(e.problem().find("unknown placeholder"), std::string::npos) << e.problem();
  }
  dir.write("p/context.md", "# Shared\n{{task_id}} and {{failures}}\n");
  try {
    PromptTemplates::load(p);
    FAIL();
  } catch (const kforge::InputError& e) {
    EXPECT_EQ(e.file(), context.string());
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.field(), "{{failures}}");
    EXPECT_NE(e.problem().find("every prompt"), std::string::npos) << e.problem();
  }
  dir.write("p/context.md", "# Shared\n{{task_id}} on {{device}}\n");
  PromptTemplates t = PromptTemplates::load(p);
  EXPECT_TRUE(t.has_context());
  EXPECT_EQ(t.placeholders_in_context(), (std::set<std::string>{"device", "task_id"}));
}

}  // namespace
