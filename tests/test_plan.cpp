// Launch plans against smoke/relu (x: float32 [B, N] -> out): parsing, evaluation, limits,
// argument types. Each malformed plan or source stops at its stage with a precise message.
#include <gtest/gtest.h>

#include "compile_test_util.h"
#include "kforge/compile/signature.h"

namespace {

using namespace kforge::compile;
using kforge::test::CompileFixture;
using kforge::test::TempDir;

const std::string kSource =
    R"cu(__global__ void relu(const float* __restrict__ x, float* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = fmaxf(x[i], 0.0f);
}
)cu";
const std::string kPlan =
    R"js({"launch": [{"kernel": "relu", "grid": ["min(ceil_div(B * N, BLOCK), 8 * num_sms)"],
  "block": ["BLOCK"], "args": ["x", "out", "B * N"]}], "tune": {"BLOCK": [256, 128, 512]}})js";

// The same ReLU through the tensor memory accelerator (TMA): each block loads a box of BOX elements
// into shared memory, waits on an mbarrier, applies ReLU there and stores the box back. The maps
// view x and out as one row of B * N elements: the last box's elements past the end read as zero
// and are not written. A row must be whole 16-byte units, so where B * N is not a multiple of 4
// floats the plain kernel (kSource's, in this source too) runs instead.
const std::string kTmaSource = R"cu(#include <cuda.h>
template <int kBox>
__global__ void relu_tma(const __grid_constant__ CUtensorMap x, const __grid_constant__ CUtensorMap out) {
  __shared__ alignas(128) float tile[kBox];
  __shared__ alignas(8) unsigned long long bar;
  const unsigned t = (unsigned)__cvta_generic_to_shared(tile), b = (unsigned)__cvta_generic_to_shared(&bar);
  const int c0 = blockIdx.x * kBox;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(kBox * 4) : "memory");
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];"
                 ::"r"(t), "l"(&x), "r"(c0), "r"(b) : "memory");
  }
  asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra W;\n}" ::"r"(b) : "memory");
  for (int i = threadIdx.x; i < kBox; i += blockDim.x) tile[i] = fmaxf(tile[i], 0.0f);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%1}], [%2];" ::"l"(&out), "r"(c0), "r"(t) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}
)cu" + kSource;
const std::string kTmaPlan =
    R"js({"launch": [{"kernel": "relu_tma<BOX>", "when": "B * N % 4 == 0", "grid": ["ceil_div(B * N, BOX)"],
  "block": [128], "args": [{"tensor_map": "x", "dims": ["B * N"], "box": ["BOX"]},
                           {"tensor_map": "out", "dims": ["B * N"], "box": ["BOX"]}]},
  {"kernel": "relu", "when": "B * N % 4 != 0", "grid": ["ceil_div(B * N, 256)"], "block": [256],
   "args": ["x", "out", "B * N"]}],
  "tune": {"BOX": [256, 128]}})js";

struct Case {
  const char* label;
  std::string source, plan;
  Stage stage;           // where it must stop
  std::string fragment;  // in one of the errors
  std::map<std::string, int64_t> tune = {};
};

std::string with(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "test bug: " << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

std::vector<Case> cases() {
  const std::string s = kSource, p = kPlan;
  return {
      {"plan is not JSON", s, "{\"launch\": [", Stage::Plan, "not valid JSON"},
      {"plan is not an object", s, "[1, 2]", Stage::Plan, "must be a JSON object"},
      {"unknown top-level key", s, with(p, "\"tune\"", "\"tunes\""), Stage::Plan,
       "tunes: unknown key"},
      {"no launch", s, "{\"tune\": {}}", Stage::Plan, "launch: missing"},
      {"empty launch list", s, "{\"launch\": []}", Stage::Plan, "non-empty list"},
      {"launch without kernel", s, with(p, "\"kernel\": \"relu\", ", ""), Stage::Plan,
       "launch[0].kernel: missing"},
      {"malformed kernel name", s, with(p, "\"relu\"", "\"relu(x)\""), Stage::Plan,
       "is not a kernel name"},
      {"kernel not in the source", s, with(p, "\"relu\"", "\"gelu\""), Stage::Plan,
       "defines no __global__ function named 'gelu'"},
      {"grid with four entries", s, with(p, "\"block\": [\"BLOCK\"]", "\"block\": [1, 1, 1, 1]"),
       Stage::Plan, "1 to 3 expressions"},
      {"unknown name in an expression", s, with(p, "8 * num_sms", "8 * M"), Stage::Plan,
       "unknown name 'M'"},
      {"tensor inside an expression", s, with(p, "\"B * N\"]", "\"x * 2\"]"), Stage::Plan,
       "'x' is a tensor"},
      {"argument names nothing", s, with(p, "[\"x\", \"out\"", "[\"y\", \"out\""), Stage::Plan,
       "'y' is neither a tensor"},
      {"real-valued argument", s, with(p, "\"B * N\"]", "1.5]"), Stage::Plan,
       "must be a tensor name, an integer expression or a tensor map"},
      {"malformed expression", s, with(p, "B * N\"]", "B * * N\"]"), Stage::Plan, "unexpected '*'"},
      {"tune is not an object", s, with(p, "{\"BLOCK\": [256, 128, 512]}", "[256]"), Stage::Plan,
       "tune: must be an object"},
      {"tune values not integers", s, with(p, "[256, 128, 512]", "[\"256\"]"), Stage::Plan,
       "values must be integers"},
      {"tunable named like a dim", s,
       with(with(p, "\"BLOCK\": [", "\"N\": ["), "\"block\": [\"BLOCK\"]", "\"block\": [256]"),
       Stage::Plan, "is a dim of the task"},
      {"tunable value not listed",
       s,
       p,
       Stage::Plan,
       "is not one of the listed values",
       {{"BLOCK", 100}}},
      {"unsatisfiable constraints", s, with(p, "}}", "}, \"constraints\": [\"BLOCK > 4096\"]}"),
       Stage::Plan, "no combination"},
      {"workspace with an unknown dtype", s,
       with(p, "\"tune\"",
            "\"workspace\": [{\"name\": \"w\", \"dtype\": \"float31\", \"count\": 1}], \"tune\""),
       Stage::Plan, "unknown dtype 'float31'"},
      {"workspace named like an input", s,
       with(p, "\"tune\"",
            "\"workspace\": [{\"name\": \"x\", \"dtype\": \"float32\", \"count\": 1}], \"tune\""),
       Stage::Plan, "already a tensor"},
      {"workspace of zero elements at some dims", s,
       with(p, "\"tune\"",
            "\"workspace\": [{\"name\": \"w\", \"dtype\": \"float32\", \"count\": \"B - 1\"}], "
            "\"tune\""),
       Stage::Limits, "workspace[0].count: 'B - 1' is 0"},
      {"too many threads", s, p, Stage::Limits, "2048 threads per block", {}},
      {"grid y over the limit", s,
       with(p, "\"grid\": [\"min(ceil_div(B * N, BLOCK), 8 * num_sms)\"]", "\"grid\": [1, 70000]"),
       Stage::Limits, "y is 70000"},
      {"too much shared memory", s, with(p, "\"block\"", "\"shared_bytes\": \"300000\", \"block\""),
       Stage::Limits, "the limit is 232448 bytes"},
      {"division by zero at some dims", s, with(p, "8 * num_sms", "8 * num_sms / (N - 3)"),
       Stage::Limits, "division by zero"},
      {"arity", s, with(p, ", \"B * N\"]", "]"), Stage::Limits,
       "takes 3 parameter(s) but the plan passes 2"},
      {"pointee dtype", with(s, "const float* __restrict__ x", "const double* __restrict__ x"), p,
       Stage::Limits, "tensor 'x' is float32 but parameter 1 is 'double const*"},
      {"input not const", with(s, "const float* __restrict__ x", "float* __restrict__ x"), p,
       Stage::Limits, "must be const"},
      {"integer into a pointer", s,
       with(p, "[\"x\", \"out\", \"B * N\"]", "[\"x\", \"B\", \"B * N\"]"), Stage::Limits,
       "which is a pointer"},
      {"tensor into an integer", s,
       with(p, "[\"x\", \"out\", \"B * N\"]", "[\"x\", \"out\", \"out\"]"), Stage::Limits,
       "which is not a pointer"},
      {"value does not fit int", with(s, "long long n)", "int n)"),
       with(p, "\"B * N\"]", "\"B * N * 1000\"]"), Stage::Limits,
       "does not fit parameter 3 ('int')"},
      {"float parameter", with(s, "long long n)", "long long n, float alpha)"),
       with(p, "\"B * N\"]", "\"B * N\", 1]"), Stage::Limits,
       "float constants belong in the source"},
      {"syntax error", with(s, "out[i] = fmaxf(x[i], 0.0f);", "out[i] = fmaxf(x[i], 0.0f)"), p,
       Stage::Compile, "candidate.cu(4): error"},
      {"device malloc",
       with(s, "out[i] = fmaxf(x[i], 0.0f);",
            "{ float* t = (float*)malloc(4); out[i] = t[0]; free(t); }"),
       p, Stage::Compile, "malloc"},
      {"printf", with(s, "out[i] = fmaxf(x[i], 0.0f);", "{ printf(\"%f\", x[i]); out[i] = x[i]; }"),
       p, Stage::Compile, "printf in device code"},
      {"device-side launch",
       "__global__ void child(float* o) {}\n" +
           with(s, "out[i] = fmaxf(x[i], 0.0f);", "child<<<1, 1>>>(out);"),
       p, Stage::Compile, "device-side kernel launch"},
      {"extern C 32-bit slot given a tensor", "extern \"C\" " + with(s, "long long n)", "int n)"),
       with(p, "[\"x\", \"out\", \"B * N\"]", "[\"x\", \"out\", \"out\"]"), Stage::Limits,
       "needs a 64-bit pointer parameter"},
      // Issue 16: bad input is the candidate's outcome, never a crash or an exit 4.
      {"plan nested 30000 deep", s, std::string(30000, '[') + std::string(30000, ']'), Stage::Plan,
       "nested more than 16 levels"},
      {"real number past a double", s, with(p, "\"B * N\"]", "1e400]"), Stage::Plan,
       "number overflow"},
      {"integer past int64", s, with(p, "[256, 128, 512]", "[18446744073709551615]"), Stage::Plan,
       "out of the 64-bit integer range"},
      {"tunable named int", s,
       with(with(p, "\"BLOCK\": [", "\"int\": ["), "\"block\": [\"BLOCK\"]", "\"block\": [256]"),
       Stage::Plan, "tune.int: 'int' is a C++ keyword"},
      {"tunable named __CUDA_ARCH__", s,
       with(with(p, "\"BLOCK\": [", "\"__CUDA_ARCH__\": ["), "\"block\": [\"BLOCK\"]",
            "\"block\": [256]"),
       Stage::Plan, "tune.__CUDA_ARCH__: '__CUDA_ARCH__' is reserved"},
      {"tunable named _Tp", s,
       with(with(p, "\"BLOCK\": [", "\"_Tp\": ["), "\"block\": [\"BLOCK\"]", "\"block\": [256]"),
       Stage::Plan, "tune._Tp: '_Tp' is reserved"},
      {"nine tunables", s,
       with(p, "\"BLOCK\": [256, 128, 512]",
            "\"BLOCK\": [256], \"A\": [1], \"B2\": [1], \"C\": [1], \"D\": [1], \"E\": [1], \"F\": "
            "[1], \"G\": [1], \"H\": [1]"),
       Stage::Plan, "tune: 9 tunables; a plan may have at most 8"},
      {"seventeen values", s,
       with(p, "[256, 128, 512]", "[256, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]"),
       Stage::Plan, "tune.BLOCK: 17 values; a tunable may have at most 16"},
      {"kernel name of 60 KB", s, with(p, "\"relu\"", "\"" + std::string(60000, 'k') + "\""),
       Stage::Plan, "a kernel name expression longer than 256 characters"},
      {"NUL byte in the source", s + std::string(1, '\0') + "__global__ void hidden() {}\n", p,
       Stage::Answer, "candidate.cu(5): error: a NUL byte"},
      {"bytes that are not UTF-8", "// caf\xe9\n" + s, p, Stage::Answer,
       "candidate.cu(1): error: bytes that are not UTF-8"},
      {"4 TiB device array", with(s, "__global__", "__device__ char big[1ull << 42];\n__global__"),
       p, Stage::Limits, "module: its __device__ variables take 43980465"},
      // Tensor maps (TMA): the map's form, the driver's rules at every configuration, the
      // kernel's parameter type.
      {"tensor map of no tensor", kTmaSource,
       with(kTmaPlan, "\"tensor_map\": \"x\"", "\"tensor_map\": \"y\""), Stage::Plan,
       "launch[0].args[0].tensor_map: must name a tensor (x, out)"},
      {"tensor map with an unknown key", kTmaSource,
       with(kTmaPlan, "\"box\": [\"BOX\"]}", "\"box\": [\"BOX\"], \"stride\": [1]}"), Stage::Plan,
       "launch[0].args[0].stride: unknown key"},
      {"tensor map box for two dims", kTmaSource,
       with(kTmaPlan, "\"box\": [\"BOX\"]}", "\"box\": [\"BOX\", 1]}"), Stage::Plan,
       "launch[0].args[0].box: has 2 sizes for 1 dims"},
      {"tensor map swizzle of 100 bytes", kTmaSource,
       with(kTmaPlan, "\"box\": [\"BOX\"]}", "\"box\": [\"BOX\"], \"swizzle\": 100}"), Stage::Plan,
       "launch[0].args[0].swizzle: must be 0, 32, 64 or 128"},
      {"tensor map box of 512", kTmaSource, with(kTmaPlan, "[256, 128]", "[512]"), Stage::Limits,
       "launch[0].args[0].box[0] for dims (B=4096, N=4096) and tunables (BOX=512): 512; each box "
       "size must be between 1 and 256"},
      {"tensor map box row of 12 bytes", kTmaSource, with(kTmaPlan, "[256, 128]", "[3]"),
       Stage::Limits, "a box row is 12 bytes; it must be a multiple of 16"},
      {"tensor map rows of 12 bytes", kTmaSource,
       with(kTmaPlan, "\"x\", \"dims\": [\"B * N\"], \"box\": [\"BOX\"]}",
            "\"x\", \"dims\": [\"B * N / 3\", 3], \"box\": [1, 4]}"),
       Stage::Limits,
       "launch[0].args[0].dims[1] for dims (B=4096, N=4096) and tunables (BOX=256): a row is 12 "
       "bytes"},
      {"tensor map swizzled narrower than its box", kTmaSource,
       with(kTmaPlan, "\"box\": [\"BOX\"]}", "\"box\": [\"BOX\"], \"swizzle\": 128}"),
       Stage::Limits, "a box row is 1024 bytes, more than the 128-byte swizzle"},
      {"tensor map passed to a pointer", kSource,
       with(kPlan, "[\"x\", \"out\"",
            "[{\"tensor_map\": \"x\", \"dims\": [\"B * N\"], \"box\": [64]}, \"out\""),
       Stage::Limits,
       "the tensor map of 'x' is passed to parameter 1 of type 'float const*'; "
       "declare it 'const __grid_constant__ CUtensorMap'"},
      {"pointer passed to a tensor map", kTmaSource,
       with(kTmaPlan, "{\"tensor_map\": \"x\", \"dims\": [\"B * N\"], \"box\": [\"BOX\"]}",
            "\"x\""),
       Stage::Limits, "parameter 1 is a CUtensorMap, but the plan passes tensor 'x'"},
  };
}

class BadCandidate : public ::testing::TestWithParam<size_t> {};

TEST_P(BadCandidate, StopsAtItsStageWithAPreciseError) {
  Case c = cases()[GetParam()];
  if (std::string(c.label) == "too many threads")
    c.tune = {{"BLOCK", 64}}, c.plan = with(with(kPlan, "512]", "512, 64]"),
                                            "\"block\": [\"BLOCK\"]", "\"block\": [\"BLOCK\", 32]");
  static CompileFixture fx = CompileFixture::load("smoke/relu");
  TempDir dir;
  Compiler compiler(kforge::test::private_cache(dir));
  std::optional<Tunables> tune;
  if (!c.tune.empty()) tune = c.tune;
  CandidateReport r = check_candidate(fx.task, fx.tensors, c.source, c.plan, tune,
                                      DeviceFacts::for_arch("sm_90a"), compiler);
  std::string all;
  for (const auto& e : r.errors) all += e + "\n";
  EXPECT_FALSE(r.ok()) << c.label;
  EXPECT_EQ(stage_name(r.stage), stage_name(c.stage)) << c.label << "\n" << all;
  EXPECT_NE(all.find(c.fragment), std::string::npos)
      << c.label << ": expected '" << c.fragment << "' in\n"
      << all;
}

INSTANTIATE_TEST_SUITE_P(Cases, BadCandidate, ::testing::Range<size_t>(0, cases().size()),
                         [](const auto& info) {
                           return kforge::test::test_name(cases()[info.param].label);
                         });

TEST(Plan, GoodCandidateEvaluatesOnEveryConfiguration) {
  CompileFixture fx = CompileFixture::load("smoke/relu");
  TempDir dir;
  Compiler compiler(kforge::test::private_cache(dir));
  CandidateReport r = check_candidate(fx.task, fx.tensors, kSource, kPlan, std::nullopt,
                                      DeviceFacts::for_arch("sm_90a"), compiler);
  ASSERT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0]);
  EXPECT_EQ(r.tunables.at("BLOCK"), 256);  // the first listed value
  ASSERT_EQ(r.configurations.size(), fx.task.all_dims().size());
  const ConcreteLaunch& timed = r.configurations[0].second.launches[0];
  EXPECT_EQ(timed.grid[0], std::min<int64_t>((4096 * 4096 + 255) / 256, 8 * 132));
  EXPECT_EQ(timed.block[0], 256);
  EXPECT_EQ(timed.args[2].value, 4096 * 4096);
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].signature, "relu(float const*, float*, long long)");
  EXPECT_GT(r.kernels[0].resources.registers, 0);
}

// A TMA kernel: <cuda.h> is kforge's shim (the tensor map type), NVRTC compiles the bulk tensor
// copies for sm_90a, and each configuration's maps are evaluated: dims, boxes, the element type.
TEST(Plan, TensorMapCandidateCompilesAndItsMapsAreEvaluated) {
  CompileFixture fx = CompileFixture::load("smoke/relu");
  TempDir dir;
  Compiler compiler(kforge::test::private_cache(dir));
  CandidateReport r = check_candidate(fx.task, fx.tensors, kTmaSource, kTmaPlan, std::nullopt,
                                      DeviceFacts::for_arch("sm_90a"), compiler);
  ASSERT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0]);
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_EQ(r.kernels[0].signature, "void relu_tma<256>(CUtensorMap_st, CUtensorMap_st)");
  ASSERT_EQ(r.configurations.size(), fx.task.all_dims().size());
  int mapped = 0;
  for (const auto& [dims, plan] : r.configurations) {
    const ConcreteLaunch& l = plan.launches.at(0);
    const int64_t n = dims.at("B") * dims.at("N");
    EXPECT_EQ(l.index, n % 4 == 0 ? 0u : 1u);  // rows of whole 16-byte units take the maps
    if (l.index != 0) continue;
    ++mapped;
    EXPECT_EQ(l.grid[0], (n + 255) / 256);
    for (const ConcreteArg& a : l.args) {
      EXPECT_TRUE(a.is_tensor);
      EXPECT_EQ(a.map.rank, 1);
      EXPECT_EQ(a.map.dims[0], n);
      EXPECT_EQ(a.map.box[0], 256);
      EXPECT_EQ(a.map.element_bytes, 4);
      EXPECT_EQ(a.map.type, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
      EXPECT_EQ(a.map.swizzle, 0);
    }
  }
  EXPECT_EQ(mapped, 2);  // B * N = 4096 * 4096, 37 * 1000
  // Tensor maps are Hopper's: an sm_80 target is told so.
  Plan p = parse_plan_text(kTmaPlan, fx.task, fx.tensors);
  try {
    evaluate_plan(p, fx.task.dims, {{"BOX", 256}}, DeviceFacts::for_arch("sm_80"));
    ADD_FAILURE() << "sm_80 accepted a tensor map";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor maps (TMA) need sm_90 or newer"),
              std::string::npos)
        << e.what();
  }
}

// ReLU through 2-D tensor maps where N % m == 0 (their rows 16 bytes apart when m is a multiple of
// 4), the plain kernel elsewhere: two launches, each with its `when`.
std::string two_path_plan(int m) {
  const std::string n = "N % " + std::to_string(m);
  return R"js({"launch": [
    {"kernel": "relu_tma<BOX>", "when": ")js" +
         n + R"js( == 0", "grid": ["B * ceil_div(N, BOX)"], "block": [128],
     "args": [{"tensor_map": "x", "dims": ["B", "N"], "box": [1, "BOX"]},
              {"tensor_map": "out", "dims": ["B", "N"], "box": [1, "BOX"]}]},
    {"kernel": "relu", "when": ")js" +
         n + R"js( != 0", "grid": ["ceil_div(B * N, 256)"], "block": [256],
     "args": ["x", "out", "B * N"]}],
  "tune": {"BOX": [256]}})js";
}

// `when` makes a launch at some configurations only: a 2-D map needs rows 16 bytes apart (N % 4
// == 0 for float32), so the plan takes the TMA path there and a plain kernel elsewhere; the
// configurations keep the plan's launch index. A plan with no launch at some dims is refused.
TEST(Plan, WhenChoosesTheLaunchesOfEachConfiguration) {
  CompileFixture fx = CompileFixture::load("smoke/relu");
  TempDir dir;
  Compiler compiler(kforge::test::private_cache(dir));
  const std::string plan = two_path_plan(4);
  CandidateReport r = check_candidate(fx.task, fx.tensors, kTmaSource, plan, std::nullopt,
                                      DeviceFacts::for_arch("sm_90a"), compiler);
  ASSERT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0]);
  int tma = 0, plain = 0;
  for (const auto& [dims, cp] : r.configurations) {
    ASSERT_EQ(cp.launches.size(), 1u) << kforge::tasks::format_dims(dims);
    const ConcreteLaunch& l = cp.launches[0];
    if (dims.at("N") % 4 == 0) {
      ++tma;
      EXPECT_EQ(l.index, 0u);
      EXPECT_EQ(l.args[0].map.rank, 2);
      EXPECT_EQ(l.args[0].map.dims[1], dims.at("N"));
    } else {
      ++plain;
      EXPECT_EQ(l.index, 1u);
      EXPECT_EQ(l.kernel, "relu");
    }
  }
  EXPECT_EQ(tma, 2);    // N = 4096, 1000
  EXPECT_EQ(plain, 2);  // N = 3, 4099
  // Without `when` the 2-D map is refused where its rows are 12 bytes (N = 3).
  std::string always = plan;
  const std::string when = "\"when\": \"N % 4 == 0\", ";
  always.erase(always.find(when), when.size());
  r = check_candidate(fx.task, fx.tensors, kTmaSource, always, std::nullopt,
                      DeviceFacts::for_arch("sm_90a"), compiler);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.errors[0].find("launch[0].args[0].dims[1] for dims (B=1, N=3)"), std::string::npos)
      << r.errors[0];
  Plan never = parse_plan_text(
      R"js({"launch": [{"kernel": "relu", "when": "N < 0", "grid": [1], "block": [32],
        "args": ["x", "out", "N"]}]})js",
      fx.task, fx.tensors);
  EXPECT_THROW(
      {
        try {
          evaluate_plan(never, fx.task.dims, {}, DeviceFacts::for_arch("sm_90a"));
        } catch (const PlanError& e) {
          EXPECT_NE(std::string(e.what()).find("no launch's `when` holds"), std::string::npos);
          throw;
        }
      },
      PlanError);
}

// A launch the check sizes never make (its `when` holds at the timed dims only) is checked at one
// more size, drawn where it runs; a launch for the timed dims alone is refused.
TEST(Plan, ALaunchOnlyTheTimedDimsMakeIsCheckedAtADrawnSize) {
  CompileFixture fx = CompileFixture::load("smoke/relu");
  TempDir dir;
  Compiler compiler(kforge::test::private_cache(dir));
  const std::string plan = two_path_plan(16);
  CandidateReport r = check_candidate(fx.task, fx.tensors, kTmaSource, plan, std::nullopt,
                                      DeviceFacts::for_arch("sm_90a"), compiler);
  ASSERT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0]);
  ASSERT_EQ(r.configurations.size(), fx.task.all_dims().size() + 1);  // N = 1000 % 16 == 8
  const auto& [drawn, cp] = r.configurations.back();
  EXPECT_EQ(drawn.at("N") % 16, 0) << kforge::tasks::format_dims(drawn);
  EXPECT_NE(drawn, fx.task.dims);
  EXPECT_EQ(cp.launches.at(0).index, 0u);
  // The same draw every time: the judge and a GPU worker check the same sizes.
  CandidateReport again = check_candidate(fx.task, fx.tensors, kTmaSource, plan, std::nullopt,
                                          DeviceFacts::for_arch("sm_90a"), compiler);
  EXPECT_EQ(again.configurations.back().first, drawn);

  // Admission's unseen task (its sizes all drawn) adds none: a fast path for large sizes need not
  // run at admission's small ones.
  kforge::tasks::Task unseen = fx.task;
  unseen.dims = {{"B", 4}, {"N", 8}};
  unseen.check_dims = {{{"B", 3}, {"N", 5}}};
  unseen.unseen = true;
  r = check_candidate(unseen, fx.tensors, kTmaSource, two_path_plan(1024), std::nullopt,
                      DeviceFacts::for_arch("sm_90a"), compiler);
  ASSERT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0]);
  EXPECT_EQ(r.configurations.size(), 2u);

  std::string timed_only = plan;
  timed_only.replace(timed_only.find("N % 16 == 0"), 11, "B == 4096 && N == 4096");
  timed_only.replace(timed_only.find("N % 16 != 0"), 11, "B != 4096 || N != 4096");
  r = check_candidate(fx.task, fx.tensors, kTmaSource, timed_only, std::nullopt,
                      DeviceFacts::for_arch("sm_90a"), compiler);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.errors[0].find("launch[0].when: 'B == 4096 && N == 4096' holds at none of the check "
                             "sizes, and kforge found no other size where it holds"),
            std::string::npos)
      << r.errors[0];
}

// A parameter named CUtensorMap_st of another size would make the driver copy past the 128 bytes
// kforge encodes: the size comes from PTX, and only 128 bytes pass.
TEST(Plan, ATensorMapParameterMustBe128Bytes) {
  CompileFixture fx = CompileFixture::load("smoke/relu");
  TempDir dir;
  Compiler compiler(kforge::test::private_cache(dir));
  std::string fake = kTmaSource;
  fake.replace(fake.find("#include <cuda.h>"), 17,
               "struct CUtensorMap_st { unsigned long long bytes[512]; };\n"
               "typedef CUtensorMap_st CUtensorMap;");
  CandidateReport r = check_candidate(fx.task, fx.tensors, fake, kTmaPlan, std::nullopt,
                                      DeviceFacts::for_arch("sm_90a"), compiler);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.errors[0].find("the tensor map of 'x' is passed to parameter 1 of type "
                             "'CUtensorMap_st'"),
            std::string::npos)
      << r.errors[0];
}

// The rules a map must keep, including the one only the judge and an exported library can check
// (the map inside its tensor's bytes).
TEST(Plan, TensorMapRulesNameTheFieldAndTheLimit) {
  kforge_launch::TensorMap m;
  m.rank = 2;
  m.dims[0] = 64, m.dims[1] = 128;  // [64, 128] float16: rows 256 bytes apart
  m.box[0] = 64, m.box[1] = 64;
  m.element_bytes = 2;
  m.swizzle = 128;
  EXPECT_EQ(kforge_launch::check_tensor_map(m, 64 * 128 * 2), "");
  EXPECT_EQ(kforge_launch::place(kforge_launch::check_tensor_map(m, 64 * 128 * 2 - 1), ""),
            "dims: the map spans 16384 bytes but the tensor has 16383");
  m.dims[1] = 100;  // rows of 200 bytes
  EXPECT_EQ(kforge_launch::place(kforge_launch::check_tensor_map(m, 1 << 20), " at N=100"),
            "dims[1] at N=100: a row is 200 bytes; it must be a multiple of 16 (the TMA moves "
            "memory in 16-byte units and would write past the row's end)");
  m.rank = 1, m.dims[0] = 3, m.box[0] = 64;  // a 1-D map of 3 halves: 6 bytes, refused too
  EXPECT_NE(kforge_launch::check_tensor_map(m, 1 << 20).find("dims[0]|: a row is 6 bytes"),
            std::string::npos);
  m.rank = 2, m.dims[0] = 64;
  m.dims[1] = 128, m.rank = 6;
  EXPECT_NE(kforge_launch::check_tensor_map(m, 1 << 20).find("a tensor map has 1 to 5"),
            std::string::npos);
  m.rank = 2, m.dims[0] = int64_t{1} << 40;
  EXPECT_NE(kforge_launch::check_tensor_map(m, INT64_MAX).find("between 1 and 2^32"),
            std::string::npos);
}

TEST(Plan, TuneSpaceHonoursConstraints) {
  CompileFixture fx = CompileFixture::load("smoke/relu");
  Plan p = parse_plan_text(
      R"js({"launch": [{"kernel": "relu", "grid": [1], "block": ["BLOCK"], "args": ["x", "out", "N"]}],
     "tune": {"BLOCK": [64, 128, 256, 512, 1024], "VEC": [1, 2, 4]}, "constraints": ["BLOCK * VEC <= 1024", "VEC <= N"]})js",
      fx.task, fx.tensors);
  auto space = tune_space(p, fx.task.dims, DeviceFacts{});
  EXPECT_EQ(space.size(), 5u + 4u + 3u);
  for (const auto& t : space) EXPECT_LE(t.at("BLOCK") * t.at("VEC"), 1024);
}

TEST(Plan, TuneSpaceSampleKeepsTheDefaultFirstAndSpreadsEvenly) {
  std::vector<Tunables> space;
  for (int64_t b : {64, 128, 256, 512}) space.push_back({{"BLOCK", b}});
  EXPECT_EQ(sample_tune_space(space, 10), space);  // small spaces whole
  EXPECT_EQ(sample_tune_space(space, 1), std::vector<Tunables>{space.front()});
  EXPECT_TRUE(sample_tune_space(space, 0).empty());
  EXPECT_TRUE(sample_tune_space({}, 3).empty());
  for (int64_t b = 1024; b <= 4096; b *= 2) space.push_back({{"BLOCK", b}});  // 7 points
  EXPECT_EQ(sample_tune_space(space, 4),
            (std::vector<Tunables>{space[0], space[2], space[4], space[6]}));
  EXPECT_EQ(sample_tune_space(space, 3), (std::vector<Tunables>{space[0], space[3], space[6]}));
}

// Issue 16: 8 tunables of 10 values made tune_space build 10^8 combinations (24 GB). Its size
// is now capped whatever the plan; a 6 x 8 space (262,144 points) shows the cap without the
// memory the old code would take on the bigger one.
TEST(Plan, TuneSpaceIsCappedAndSpreadEvenly) {
  CompileFixture fx = CompileFixture::load("smoke/relu");
  auto plan_with = [&](int tunables, int values) {
    std::string tune;
    for (int t = 0; t < tunables; ++t) {
      tune += std::string(tune.empty() ? "" : ", ") + "\"T" + std::to_string(t) + "\": [";
      for (int v = 0; v < values; ++v) tune += (v ? ", " : "") + std::to_string(v + 1);
      tune += "]";
    }
    return parse_plan_text(
        R"js({"launch": [{"kernel": "relu", "grid": [1], "block": [128], "args": ["x", "out", "N"]}], "tune": {)js" +
            tune + "}}",
        fx.task, fx.tensors);
  };
  Plan medium = plan_with(6, 8);
  auto space = tune_space(medium, fx.task.dims, DeviceFacts{});
  ASSERT_EQ(space.size(), kMaxTuneCombinations);
  EXPECT_EQ(space.front(), default_tunables(medium));  // the first point: every first value
  for (const auto& [name, v] : space.back())
    EXPECT_EQ(v, 8) << name;  // the last point: every last value
  EXPECT_EQ(sample_tune_space(space, 3).size(), 3u);

  Plan big = plan_with(8, 10);  // the plan of the issue: 10^8 combinations, never built
  EXPECT_EQ(tune_space_size(big), 100000000u);
  Tunables t = tune_point(big, 1234567);  // digits 0,1,...,7, T0 the slowest: values 1, 2, ..., 8
  for (int k = 0; k < 8; ++k) EXPECT_EQ(t.at("T" + std::to_string(k)), k + 1);
  auto big_space = tune_space(big, fx.task.dims, DeviceFacts{});
  EXPECT_EQ(big_space.size(), kMaxTuneCombinations);
  EXPECT_EQ(big_space.front(), tune_point(big, 0));
  EXPECT_EQ(big_space.back(), tune_point(big, 99999999));
  for (size_t i = 1; i < big_space.size(); ++i) EXPECT_NE(big_space[i - 1], big_space[i]);
}

TEST(Plan, LongOrOverflowingSourcesAndLogsAreNoCrash) {
  // A backtracking regex overflowed the stack on `__global__` and 50 KB without ';', '{' or '}'.
  CompileFixture fx = CompileFixture::load("smoke/relu");
  TempDir dir;
  Compiler compiler(kforge::test::private_cache(dir));
  std::string source = "// __global__ " + std::string(60000, 'x') + "\n" + kSource;
  CandidateReport r = check_candidate(fx.task, fx.tensors, source, kPlan, std::nullopt,
                                      DeviceFacts::for_arch("sm_90a"), compiler);
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].substr(0, 300));
  // The smallest int64 as a JSON integer argument: a value, not an exception.
  std::string plan = with(kPlan, "\"B * N\"]", "-9223372036854775808]");
  r = check_candidate(fx.task, fx.tensors, kSource, plan, std::nullopt,
                      DeviceFacts::for_arch("sm_90a"), compiler);
  ASSERT_FALSE(r.configurations.empty()) << (r.errors.empty() ? "" : r.errors[0]);
  EXPECT_EQ(r.configurations[0].second.launches[0].args[2].value, INT64_MIN);
  // `#line 4294967295` makes NVRTC write a line number past int: left as it is, no exception.
  std::string log = "candidate.cu(4294967295): error: x\ncandidate.cu(3): warning: y";
  EXPECT_EQ(relabel_log(log, "a.md", 10),
            "candidate.cu(4294967295): error: x\na.md:12: warning: y");
}

TEST(Plan, IdentityIsStableAndSensitive) {
  nlohmann::json a = nlohmann::json::parse(R"({"launch": [], "tune": {"B": [1]}})");
  nlohmann::json b =
      nlohmann::json::parse(R"({"tune": {"B": [1]}, "launch": []})");  // same plan, other key order
  EXPECT_EQ(candidate_identity("src", a, {{"B", 1}}), candidate_identity("src", b, {{"B", 1}}));
  EXPECT_NE(candidate_identity("src", a, {{"B", 1}}), candidate_identity("src ", a, {{"B", 1}}));
  EXPECT_NE(candidate_identity("src", a, {{"B", 1}}), candidate_identity("src", a, {{"B", 2}}));
}

TEST(Signature, ParsesDemangledParameters) {
  auto p = parse_demangled_parameters(
      "void rows<256, 4>(float const* __restrict__, __half*, float4 const*, int, unsigned long, "
      "long long)");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->size(), 6u);
  EXPECT_EQ((*p)[0].kind, ParamType::Kind::Pointer);
  EXPECT_TRUE((*p)[0].is_const);
  EXPECT_EQ((*p)[0].pointee, "float");
  EXPECT_EQ((*p)[1].pointee, "__half");
  EXPECT_FALSE((*p)[1].is_const);
  EXPECT_EQ((*p)[2].pointee, "float4");
  EXPECT_EQ((*p)[3].bits, 32);
  EXPECT_EQ((*p)[4].bits, 64);
  EXPECT_FALSE((*p)[4].is_signed);
  EXPECT_EQ((*p)[5].bits, 64);
  EXPECT_EQ(parse_demangled_parameters("k()")->size(), 0u);
  EXPECT_EQ(demangle("_Z12softmax_rowsILi256EEvPKfPfi"),
            "void softmax_rows<256>(float const*, float*, int)");
  EXPECT_EQ(demangle("plain"), "");
}

// extern "C" kernels: PTX's parameter list, a struct by value (a tensor map) counted in bytes.
TEST(Signature, ReadsPtxParameterSizes) {
  const std::string ptx =
      ".visible .entry k(\n\t.param .align 64 .b8 k_param_0[128],\n\t.param .u64 k_param_1,\n"
      "\t.param .u32 k_param_2\n)\n{\n}\n";
  auto p = ptx_parameters(ptx, "k");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[0].bits, 1024);
  EXPECT_EQ((*p)[0].text, ".b8[128]");
  EXPECT_EQ((*p)[1].bits, 64);
  EXPECT_EQ((*p)[2].bits, 32);
  // Newer PTX writes a pointer's attributes before its name.
  auto q = ptx_parameters(
      ".visible .entry k(\n\t.param .u64 .ptr .align 1 k_param_0,\n\t.param .u32 k_param_1\n)\n",
      "k");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->size(), 2u);
  EXPECT_EQ((*q)[0].bits, 64);
  EXPECT_EQ((*q)[1].bits, 32);
}

}  // namespace

// Thread-block clusters need sm_90 or newer, compared as numbers: sm_100a is newer than sm_90a.
TEST(Plan, ClustersNeedSm90OrNewerComparedAsNumbers) {
  CompileFixture fx = CompileFixture::load("smoke/relu");
  Plan p = parse_plan_text(
      R"js({"launch": [{"kernel": "relu", "grid": [2], "block": [128], "cluster": [2],
     "args": ["x", "out", "N"]}]})js",
      fx.task, fx.tensors);
  for (const char* arch : {"sm_90a", "sm_100a", "sm_120"})
    EXPECT_NO_THROW(evaluate_plan(p, fx.task.dims, {}, DeviceFacts::for_arch(arch))) << arch;
  EXPECT_THROW(evaluate_plan(p, fx.task.dims, {}, DeviceFacts::for_arch("sm_80")), PlanError);
}
