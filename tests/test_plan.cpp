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
       "must be a tensor name or an integer expression"},
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
