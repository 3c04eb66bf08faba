// `kforge export` on the CPU (issue 21): the generated launch code computes what kforge's plan
// evaluation computes (one arithmetic, kforge_launch.h), a plan with several launches, a zeroed
// workspace, templates, cooperative and cluster launches and a dims product as an argument is
// generated and compiles, the evolve run's archive export becomes a package whose C++ configures
// and compiles here, and the error paths say what is wrong. Running the package: tests/gpu and the
// GPU machine (docs/export.md).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "compile_test_util.h"
#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/compile/answer.h"
#include "kforge/compile/candidate.h"
#include "kforge/compile/module.h"
#include "kforge/export/exporter.h"
#include "kforge/tasks/reference.h"
#include "kforge/verify/outcome.h"
#include "test_util.h"

namespace {

using namespace kforge;
using kforge::test::source_dir;
const auto run = kforge::test::run_command;
using kforge::test::TempDir;
using nlohmann::json;

const std::string kKforge = KFORGE_BINARY;
const std::string kEvolveExport =
    (source_dir() / "docs/results/evolve-level1-level2-2026-12-03.jsonl.gz").string();

// Compiles the package's PyTorch ops (syntax only) against this machine's ATen headers, with the
// two CUDA headers Debian's CPU LibTorch lacks stood in for (the GPU machine builds them for real:
// scripts/gpu-export.sh). Its exit status and output.
kforge::test::CliResult compile_torch_ops(const TempDir& dir, const std::filesystem::path& pkg,
                                          const std::string& ns) {
  dir.write("stub/c10/cuda/CUDAStream.h",
            "#pragma once\n#include <cuda.h>\n#include <c10/core/Device.h>\nnamespace c10::cuda {\n"
            "struct Stream { CUstream stream() const { return nullptr; } };\n"
            "inline Stream getCurrentCUDAStream(c10::DeviceIndex = -1) { return {}; }\n}\n");
  dir.write("stub/c10/cuda/CUDAGuard.h",
            "#pragma once\n#include <c10/core/Device.h>\n"
            "namespace c10::cuda { struct CUDAGuard { explicit CUDAGuard(c10::Device) {} }; }\n");
  return run("c++ -std=c++17 -fsyntax-only -Wall -Werror -I" + (dir.path() / "stub").string() +
             " -I" + (pkg / "include").string() + " -I" + (pkg / "src").string() +
             " -I/usr/include/torch/csrc/api/include -I" + compile::cuda_include_dir() + " " +
             (pkg / "torch" / (ns + "_torch.cpp")).string());
}

// TORCH_CHECK calls in generated code whose message is more than one argument: c10 would format
// the pieces with a C++ stream, which crashed in PyTorch 2.11's Python process for numbers
// (docs/decisions.md, "messages built without C++ streams"). Each such call, as written.
std::vector<std::string> stream_formatted_checks(const std::string& code) {
  std::vector<std::string> found;
  for (size_t at = code.find("TORCH_CHECK("); at != std::string::npos;
       at = code.find("TORCH_CHECK(", at + 1)) {
    int depth = 0, commas = 0;
    bool quoted = false;
    size_t i = at + std::string("TORCH_CHECK").size();
    for (; i < code.size(); ++i) {
      char c = code[i];
      if (quoted) {
        if (c == '\\')
          ++i;
        else if (c == '"')
          quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == '(') {
        ++depth;
      } else if (c == ')' && --depth == 0) {
        break;
      } else if (c == ',' && depth == 1) {
        ++commas;
      }
    }
    if (commas > 1) found.push_back(code.substr(at, i + 1 - at));
  }
  return found;
}

std::string include_flags() {
  return "-I" + (source_dir() / "common/launch").string() + " -I" + compile::cuda_include_dir();
}

// Expressions as generated code compute them, against Expr::eval_int: the same numbers, and the
// same failures (overflow, division by zero, ceil_div of a negative number).
TEST(Export, GeneratedArithmeticIsKforgesOwn) {
  const std::vector<std::string> exprs = {"ceil_div(B * N, 256)",
                                          "min(B, 7) + max(N, 3) * 2",
                                          "(B - N) / 3 % 5",
                                          "-B + abs(N - 100)",
                                          "B * N >= 1000 && !(N % 4 == 0) || B == 1",
                                          "ceil_div(N, B) * B - N",
                                          "9223372036854775807 + B",
                                          "N / (B - B)",
                                          "ceil_div(B - 100, 3)"};
  const tasks::Dims dims = {{"B", 37}, {"N", 1001}};
  std::string program =
      "#include <cstdint>\n#include <cstdio>\n#include <kforge_launch.h>\n"
      "bool bad = false;\n"
      "int64_t I(kforge_launch::IntOp o, int64_t a, int64_t b) {\n"
      "  int64_t r = 0;\n  if (kforge_launch::apply(o, a, b, &r) != kforge_launch::IntError::None) "
      "bad = true;\n"
      "  return r;\n}\n"
      "int main() {\n  const int64_t d_B = 37, d_N = 1001;\n";
  for (const std::string& e : exprs)
    program +=
        "  { bad = false; int64_t v = " +
        Expr::parse(e).to_code([](const std::string& n) { return "d_" + n; }, "I") +
        "; if (bad) std::printf(\"error\\n\"); else std::printf(\"%lld\\n\", (long long)v); }\n";
  program += "}\n";
  TempDir dir;
  std::string src = dir.write("arith.cpp", program).string();
  auto [rc, out] = run("c++ -std=c++17 " + include_flags() + " " + src + " -o " +
                       (dir.path() / "arith").string() + " && " + (dir.path() / "arith").string());
  ASSERT_EQ(rc, 0) << out;
  std::vector<std::string> lines = split(out, '\n');
  for (size_t i = 0; i < exprs.size(); ++i) {
    std::string want;
    try {
      want = std::to_string(Expr::parse(exprs[i]).eval_int(dims));
    } catch (const ExprError&) {
      want = "error";
    }
    EXPECT_EQ(lines.at(i), want) << exprs[i];
  }
  EXPECT_THROW(Expr::parse("sqrt(N)").to_code([](const std::string& n) { return n; }, "I"),
               ExprError);
  EXPECT_THROW(Expr::parse("N * 0.5").to_code([](const std::string& n) { return n; }, "I"),
               ExprError);
}

// The op of a candidate (checked and compiled here, sm_90a) for a task whose output is [B, N], as
// the exporter makes it; no kernels when the candidate fails (the failure is reported).
exporter::Op checked_op(const TempDir& dir, std::shared_ptr<tasks::Task> task,
                        const std::string& name, const std::string& source,
                        const std::string& plan) {
  std::vector<compile::TensorInfo> tensors =
      compile::task_tensors(*task, tasks::Reference::compile(*task));
  compile::Compiler compiler(private_cache(dir));
  compile::CandidateReport r =
      compile::check_candidate(*task, tensors, source, plan, std::nullopt,
                               compile::DeviceFacts::for_arch("sm_90a"), compiler);
  EXPECT_TRUE(r.ok()) << join(r.errors, "\n");
  exporter::Op op;
  op.op = name;
  op.task = task;
  op.tensors = tensors;
  op.output_shapes = {{Expr::parse("B"), Expr::parse("N")}};
  op.plan = compile::parse_plan_text(plan, *task, tensors);
  op.tunables = r.tunables;
  if (r.ok()) op.kernels = r.kernels;
  op.manifest = {{"candidate", {{"identity", "0123456789abcdef"}}}};
  return op;
}

// `def` (an op's definition) compiled, syntax only, against the runtime header a package ships.
kforge::test::CliResult syntax_check(const TempDir& dir, const exporter::Op& op,
                                     const std::string& def) {
  std::string runtime =
      *read_file((source_dir() / "export/templates/runtime/runtime_header.h").string());
  for (size_t at; (at = runtime.find("KFORGE_NS")) != std::string::npos;)
    runtime.replace(at, 9, "ns");
  dir.write("src/ns_runtime.h", runtime);
  dir.write("include/ns/ns.h",
            "#pragma once\n#include <cuda.h>\n#include <cstddef>\n#include <cstdint>\n#include "
            "<stdexcept>\n"
            "namespace ns {\nclass Error : public std::runtime_error {\n public:\n  using "
            "std::runtime_error::runtime_error;\n};\n" +
                exporter::op_declaration(op) + "}\n");
  std::string ops =
      dir.write("src/ops.cpp",
                "#include <string>\n#include <vector>\n#include \"ns/ns.h\"\n#include "
                "\"ns_runtime.h\"\n"
                "namespace ns {\nnamespace detail { extern const OpImages " +
                    op.op +
                    "_images; }\n"
                    "using namespace detail;\n" +
                    def + "}\n")
          .string();
  return run("c++ -std=c++17 -Wall -fsyntax-only " + include_flags() + " -I" +
             (dir.path() / "include").string() + " -I" + (dir.path() / "src").string() + " " + ops);
}

// A plan with every feature the runner has: the generated op and PyTorch op hold each, and the op
// compiles against the runtime it is shipped with.
TEST(Export, EveryPlanFeatureIsGeneratedAndCompiles) {
  TempDir dir;
  auto task =
      std::make_shared<tasks::Task>(tasks::load_task(source_dir() / "tasks/smoke/softmax.toml"));
  const std::string source = R"cuda(
template <int T> __global__ void partial(const float* x, float* part, long long n) {
  long long i = (long long)blockIdx.x * T + threadIdx.x;
  if (i < n) atomicAdd(part + blockIdx.x, x[i]);
}
extern "C" __global__ void finish(const float* part, float* out, int rows, int cols) {
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = part[0] + rows + cols;
}
extern "C" __global__ void paired(float* out, int rows) {
  if (threadIdx.x == 0 && blockIdx.x < rows) out[blockIdx.x] += 0.0f;
}
)cuda";
  const std::string plan = R"json({
  "launch": [
    { "kernel": "partial<BLOCK>", "grid": ["ceil_div(B * N, BLOCK)"], "block": ["BLOCK"], "args": ["x", "part", "B * N"] },
    { "kernel": "finish", "grid": [1], "block": [32], "cooperative": true, "args": ["part", "out", "B", "N"] },
    { "kernel": "paired", "grid": ["2 * B"], "block": [32], "cluster": [2, 1, 1], "shared_bytes": "4 * N", "args": ["out", "B"], "when": "B > 1" }
  ],
  "workspace": [ { "name": "part", "dtype": "float32", "count": "ceil_div(B * N, BLOCK)", "zero_init": true } ],
  "tune": { "BLOCK": [256, 512] },
  "constraints": ["BLOCK % 32 == 0"]
})json";
  exporter::Op op = checked_op(dir, task, "softmax", source, plan);
  ASSERT_FALSE(op.kernels.empty());
  std::string def = exporter::op_definition(op, "ns");
  // Each launch, as the runner makes it.
  EXPECT_NE(def.find("l.grid[0] = I(kforge_launch::IntOp::CeilDiv, I(kforge_launch::IntOp::Mul, "
                     "d_B, d_N), t_BLOCK);"),
            std::string::npos)
      << def;
  EXPECT_NE(
      def.find("args.push_back({false, uint64_t(I(kforge_launch::IntOp::Mul, d_B, d_N)), 8, {}});"),
      std::string::npos)
      << "a dims product as a 64-bit argument (long long n)";
  EXPECT_NE(def.find("args.push_back({false, uint64_t(d_B), 4, {}});"), std::string::npos)
      << "int rows: 4 bytes";
  EXPECT_NE(def.find("l.cooperative = true;"), std::string::npos);
  EXPECT_NE(def.find("l.cluster[0] = int64_t{2};"), std::string::npos);
  EXPECT_NE(def.find("l.shared_bytes = I(kforge_launch::IntOp::Mul, int64_t{4}, d_N);"),
            std::string::npos);
  EXPECT_NE(def.find("cuMemsetD8Async(CUdeviceptr(ws_base + ws0_offset), 0, ws0_bytes, stream)"),
            std::string::npos)
      << "the zero_init workspace is cleared before the first launch";
  EXPECT_LT(def.find("cuMemsetD8Async"), def.find("// launch[0]"));
  EXPECT_NE(def.find("args.push_back({true, ws_base + ws0_offset, 8, {}});"), std::string::npos);
  // The plan's constraints chose the tunables; as in kforge's judge, they do not refuse a call.
  EXPECT_EQ(def.find("the kernel needs BLOCK % 32 == 0"), std::string::npos);
  EXPECT_NE(def.find("// plan constraint (chose the tunables): BLOCK % 32 == 0"),
            std::string::npos);
  EXPECT_NE(def.find("m.functions[2]"), std::string::npos) << "three kernels, in the plan's order";
  EXPECT_NE(def.find("e = \"B > 1\";\n  if (I(kforge_launch::IntOp::Gt, d_B, int64_t{1}) != 0) {  "
                     "// launch[2]"),
            std::string::npos)
      << "a launch made only where its `when` holds";
  EXPECT_EQ(exporter::torch_schema(op), "softmax(Tensor x) -> Tensor");
  // The op compiles against the runtime header it ships with.
  auto [rc, out] = syntax_check(dir, op, def);
  EXPECT_EQ(rc, 0) << out;
}

// A plan's tensor maps: each encoded at launch from the call's dims, after a check that it stays
// inside its tensor (the library's own bound: outputs and inputs at the call's shapes).
TEST(Export, TensorMapsAreCheckedAndEncodedAtEachCall) {
  TempDir dir;
  std::string answer = *read_file((source_dir() / "tests/gpu/honest/relu_tma.md").string());
  auto task =
      std::make_shared<tasks::Task>(tasks::load_task(source_dir() / "tasks/smoke/relu.toml"));
  compile::Answer a = compile::parse_answer(answer);
  exporter::Op op = checked_op(dir, task, "relu", a.source, a.plan);
  ASSERT_FALSE(op.kernels.empty());
  std::string def = exporter::op_definition(op, "ns");
  for (const char* line :
       {"kforge_launch::Arg a{true, reinterpret_cast<uint64_t>(x_x), 8, {}};",
        "kforge_launch::Arg a{true, reinterpret_cast<uint64_t>(x_out), 8, {}};", "a.map.rank = 1;",
        "a.map.dims[0] = I(kforge_launch::IntOp::Mul, d_B, d_N);", "a.map.box[0] = t_BOX;",
        "a.map.element_bytes = 4;", "a.map.swizzle = 0;",
        "check_tensor_map(a.map, I(kforge_launch::IntOp::Mul, I(kforge_launch::IntOp::Mul, "
        "int64_t{4}, d_B), d_N));",
        "launch[0].args[1].\" + kforge_launch::place(why, "})
    EXPECT_NE(def.find(line), std::string::npos) << line << "\n" << def;
  auto [rc, out] = syntax_check(dir, op, def);
  EXPECT_EQ(rc, 0) << out;
}

// The evolve run's archive export (docs/results/) as a package: every exported op has its kernels,
// the manifest carries each one's provenance, and its C++ configures and builds here.
TEST(Export, TheEvolveArchiveBecomesAPackageThatBuilds) {
  TempDir dir;
  std::filesystem::path out = dir.path() / "pkg";
  auto [rc, text] = run(kKforge + " export --harness 2 --from " + kEvolveExport +
                        " --suite level2 --task level1/softmax --task layer_norm" +
                        " --name kfk --arch sm_90a,sm_80 --out " + out.string());
  ASSERT_EQ(rc, 0) << text;
  json m = json::parse(*read_file((out / "manifest.json").string()));
  EXPECT_EQ(m["name"], "kfk");
  EXPECT_EQ(m["admission_required"], true);
  std::set<std::string> tasks;
  int sm80_built = 0;
  for (const json& op : m["ops"]) {
    tasks.insert(op["task"].get<std::string>());
    EXPECT_TRUE(op["candidate"]["admitted"].get<bool>()) << op["task"];
    EXPECT_EQ(op["judged"]["harness_version"], 2);
    EXPECT_EQ(op["judged"]["arch"], "sm_90a");
    EXPECT_TRUE(op["judged"]["speedup"]["eager"].is_number());
    EXPECT_TRUE(op["judged"]["baselines"]["eager"].is_number());
    EXPECT_EQ(op["candidate"]["identity"].get<std::string>().size(), 32u);
    EXPECT_FALSE(op["configurations"].empty());
    EXPECT_TRUE(op["configurations"].back()["timed"].get<bool>());
    std::string name = op["op"];
    EXPECT_TRUE(std::filesystem::exists(out / "images" / (name + ".sm_90a.cubin"))) << name;
    EXPECT_TRUE(std::filesystem::exists(out / "images" / (name + ".compute_90a.ptx"))) << name;
    // sm_80: its cubin, or the reason the kernel does not compile for it.
    bool sm80 = std::filesystem::exists(out / "images" / (name + ".sm_80.cubin"));
    EXPECT_NE(sm80, op["not_built"].size() == 1 && op["not_built"][0]["arch"] == "sm_80")
        << name << ": " << op["not_built"];
    sm80_built += sm80;
  }
  EXPECT_TRUE(tasks.count("level1/softmax") && tasks.count("level1/layer_norm") &&
              tasks.count("level2/groupnorm_silu"));
  EXPECT_GT(sm80_built, 0) << "most kernels compile for sm_80 too";
  EXPECT_EQ(m["ops"].size() + m["missing"].size(), 20u) << "18 level-2 tasks and 2 of level 1";
  for (const json& missing : m["missing"]) EXPECT_FALSE(missing["why"].get<std::string>().empty());
  // Its C++ (the plain library; the PyTorch ops need a CUDA LibTorch, which this machine lacks).
  auto [cfg, cfg_out] =
      run("cmake -S " + out.string() + " -B " + (dir.path() / "build").string() + " -G Ninja");
  ASSERT_EQ(cfg, 0) << cfg_out;
  auto [build, build_out] = run("cmake --build " + (dir.path() / "build").string() + " -j2");
  EXPECT_EQ(build, 0) << build_out;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "build" / "libkfk.a"));
  auto [torch_rc, torch_out] = compile_torch_ops(dir, out, "kfk");
  EXPECT_EQ(torch_rc, 0) << torch_out;
  std::string torch_code = *read_file((out / "torch/kfk_torch.cpp").string());
  EXPECT_NE(torch_code.find("TORCH_CHECK("), std::string::npos);
  for (const std::string& check : stream_formatted_checks(torch_code))
    ADD_FAILURE() << "a message in pieces: " << check;
  auto [ops_rc, ops_out] =
      run("c++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror -I" + (out / "include").string() +
          " -I" + (out / "src").string() + " -I" + compile::cuda_include_dir() + " " +
          (out / "src/kfk_ops.cpp").string());
  EXPECT_EQ(ops_rc, 0) << ops_out;
  // The generated GoogleTest file, with the definitions the package's CMakeLists.txt gives it.
  std::string cmake = *read_file((out / "CMakeLists.txt").string());
  std::smatch defs;
  ASSERT_TRUE(std::regex_search(
      cmake, defs, std::regex(R"(target_compile_definitions\(kfk_tests PRIVATE ([A-Z_]+)=)")))
      << cmake;
  auto [tests_rc, tests_out] =
      run("c++ -std=c++17 -fsyntax-only -Wall -Wextra -D" + defs[1].str() + "='\"m.json\"' " +
          "-I/usr/include/torch/csrc/api/include " + (out / "tests/test_ops.cpp").string());
  EXPECT_EQ(tests_rc, 0) << tests_out;
  std::string header = *read_file((out / "include/kfk/kfk.h").string());
  EXPECT_NE(header.find("void softmax(const float* x, float* out, int64_t B, int64_t N, CUstream "
                        "stream, void* workspace = nullptr);"),
            std::string::npos)
      << header;
}

TEST(Export, ErrorsSayWhatIsWrong) {
  TempDir dir;
  std::string out = (dir.path() / "pkg").string();
  auto expect = [&](const std::string& args, int want, const std::string& says,
                    const std::string& also = "") {
    auto [rc, text] = run(kKforge + " export " + args);
    EXPECT_EQ(rc, want) << args << "\n" << text;
    EXPECT_NE(text.find(says), std::string::npos) << args << "\n" << text;
    EXPECT_NE(text.find(also), std::string::npos) << args << "\n" << text;
  };
  expect("--from " + kEvolveExport + " --out " + out + " --name 9lives", 2,
         "--name must start with a letter");
  expect("--from " + kEvolveExport + " --out " + out + " --name a-b", 2,
         "is not a C++ and Python identifier");
  expect("--from " + kEvolveExport + " --out " + out + " --arch hopper", 2,
         "--arch hopper is not an architecture");
  expect("--from /nonexistent.jsonl --out " + out, 2,
         "--from /nonexistent.jsonl: cannot read the file");
  expect("--from " + kEvolveExport + " --out " + out + " --task level1/no_such_task", 1,
         "level1/no_such_task: not exported: the archive has no task of that name");
  // The seeds were never admitted: nothing to export unless asked, and each task says why.
  std::string seeds = (source_dir() / "docs/results/seeds-2026-12-03.jsonl.gz").string();
  // One reason that leaves out several tasks is one line (issue 40); nothing exported, no package.
  expect("--from " + seeds + " --out " + out + " --suite smoke --harness 2", 1,
         "  4 tasks (smoke/relu, smoke/softmax, smoke/sum_rows, ...): not exported: no correct, "
         "unflagged, admitted kernel judged on sm_90a by harness version 2\n",
         "0 op(s) exported, 4 task(s) left out: no package written");
  EXPECT_FALSE(std::filesystem::exists(out)) << "a package with no op was written";
  // The first example of the README before it said --harness 2: one line says what exports them.
  expect("--from " + kEvolveExport + " --out " + out, 1,
         " tasks (level1/argmax_dim, level1/argmin_dim, level1/avg_pool2d, ...): not exported: no "
         "correct, unflagged, admitted kernel judged on sm_90a by harness version " +
             std::to_string(verify::kHarnessVersion) +
             " (harness version 2 judged one: --harness 2 exports it)",
         "no package written");
  expect("--from " + seeds + " --out " + out + " --suite smoke --include-unadmitted --harness 2", 0,
         "4 op(s) exported", "build: cmake -S " + out + " -B " + out + "/build");
  // Winners judged by an older harness than this kforge's are not taken silently; the reason says
  // how.
  expect("--from " + kEvolveExport + " --out " + out + " --task level1/softmax", 1,
         "level1/softmax: not exported: no correct, unflagged, admitted kernel judged on sm_90a by "
         "harness version " +
             std::to_string(verify::kHarnessVersion) +
             " (harness version 2 judged one: --harness 2 exports it)");
  expect("--from " + kEvolveExport + " --out " + out + " --task level1/softmax --harness 0", 2,
         "--harness");
  // A suite's tasks that the archive never saw are listed, not skipped in silence.
  expect("--from " + kEvolveExport + " --out " + out + " --suite smoke", 1,
         "4 tasks (smoke/relu, smoke/softmax, smoke/sum_rows, ...): not exported: the archive "
         "holds no kernel for it");
  // A task file that changed since its winner was judged is another task.
  std::filesystem::create_directories(dir.path() / "tasks");
  std::filesystem::copy(source_dir() / "tasks/level1", dir.path() / "tasks/level1",
                        std::filesystem::copy_options::recursive);
  std::ofstream(dir.path() / "tasks/level1/softmax.toml", std::ios::app) << "\n# edited\n";
  expect("--from " + kEvolveExport + " --out " + out +
             " --harness 2 --task level1/softmax --tasks-dir " + (dir.path() / "tasks").string(),
         1, "is not the version its winner was judged against");
}

}  // namespace

namespace {

// --fallback: a task without a winner becomes a PyTorch op that runs its reference, and the
// manifest and header say so; without it the task is listed as missing.
TEST(Export, FallbackOpsRunTheReferenceAndSaySo) {
  TempDir dir;
  std::filesystem::path out = dir.path() / "pkg";
  std::string seeds = (source_dir() / "docs/results/seeds-2026-12-03.jsonl.gz").string();
  auto [rc, text] = run(kKforge + " export --from " + seeds +
                        " --suite smoke --fallback --name fb --out " + out.string());
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("smoke/relu: no kernel (no correct, unflagged, admitted kernel"),
            std::string::npos)
      << text;
  json m = json::parse(*read_file((out / "manifest.json").string()));
  ASSERT_EQ(m["ops"].size(), 4u);
  EXPECT_TRUE(m["missing"].empty());
  for (const json& op : m["ops"]) {
    EXPECT_TRUE(op["fallback"].get<bool>()) << op["op"];
    EXPECT_TRUE(op["candidate"].is_null());
    EXPECT_TRUE(op["judged"].is_null());
  }
  std::string header = *read_file((out / "include/fb/fb.h").string());
  EXPECT_NE(header.find("// relu (smoke/relu): no kernel; torch.ops.fb.relu runs the task's "
                        "reference (--fallback)"),
            std::string::npos)
      << header;
  std::string torch_ops = *read_file((out / "torch/fb_torch.cpp").string());
  EXPECT_NE(torch_ops.find("torch::jit::compile("), std::string::npos);
  EXPECT_NE(torch_ops.find("m.impl(\"relu\", &relu_cuda);"), std::string::npos);
  auto [torch_rc, torch_out] = compile_torch_ops(dir, out, "fb");
  EXPECT_EQ(torch_rc, 0) << torch_out;
}

}  // namespace

namespace {

// --min-speedup: a winner slower than eager by the threshold is left out, said why, or with
// --fallback becomes an op that runs the reference (the fastest correct kernel is not always worth
// shipping: the evolve run's sdpa kernel is 0.10x eager).
TEST(Export, MinSpeedupLeavesOutSlowWinners) {
  TempDir dir;
  std::filesystem::path out = dir.path() / "pkg";
  const std::string args =
      " export --harness 2 --from " + kEvolveExport +
      " --task level1/sdpa --task level1/softmax --min-speedup 1 --name ms --out ";
  auto [rc, text] = run(kKforge + args + out.string());
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(
      text.find(
          "level1/sdpa: not exported: its fastest kernel is 0.10x eager, below --min-speedup 1"),
      std::string::npos)
      << text;
  json m = json::parse(*read_file((out / "manifest.json").string()));
  ASSERT_EQ(m["ops"].size(), 1u);
  EXPECT_EQ(m["ops"][0]["task"], "level1/softmax");
  const json& judged = m["ops"][0]["judged"];
  EXPECT_GE(judged["speedup"]["eager"].get<double>(), 1.0);
  // "speedup"."best" is over the fastest kind measured: the smallest of the kinds' speedups, and
  // "best_baseline" names that kind.
  double smallest = 1e300;
  std::string fastest;
  for (const auto& [kind, x] : judged["speedup"].items())
    if (kind != "best" && x.get<double>() < smallest) smallest = x.get<double>(), fastest = kind;
  ASSERT_TRUE(judged["speedup"]["best"].is_number()) << judged;
  EXPECT_DOUBLE_EQ(judged["speedup"]["best"].get<double>(), smallest) << judged;
  EXPECT_EQ(judged["best_baseline"], fastest) << judged;
  EXPECT_DOUBLE_EQ(judged["baselines"][fastest].get<double>() / judged["time_ms"].get<double>(),
                   smallest);
  EXPECT_EQ(m["min_speedup"], 1.0);
  ASSERT_EQ(m["missing"].size(), 1u);
  EXPECT_EQ(m["missing"][0]["task"], "level1/sdpa");
  std::filesystem::path fb = dir.path() / "fb";
  auto [fb_rc, fb_text] = run(kKforge + args + fb.string() + " --fallback");
  ASSERT_EQ(fb_rc, 0) << fb_text;
  json f = json::parse(*read_file((fb / "manifest.json").string()));
  ASSERT_EQ(f["ops"].size(), 2u);
  for (const json& op : f["ops"])
    EXPECT_EQ(op["fallback"].get<bool>(), op["task"] == "level1/sdpa") << op["task"];
  EXPECT_TRUE(f["missing"].empty());
  auto [bad, bad_text] =
      run(kKforge + " export --from " + kEvolveExport + " --min-speedup -1 --out " + fb.string());
  EXPECT_EQ(bad, 2) << bad_text;
  EXPECT_NE(bad_text.find("--min-speedup"), std::string::npos) << bad_text;
}

}  // namespace
