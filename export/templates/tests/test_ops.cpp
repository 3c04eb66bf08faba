// Every op of this package against its task's reference (TorchScript, compiled by LibTorch), at
// every configuration in manifest.json, with kforge's acceptance rule:
//   floating outputs: max|c - r| <= max(tol * rms(r), 8 * max|e - r|), r the reference in float64
//   (floating inputs upcast), e the reference in the inputs' own dtypes; integer and bool: c == e.
// The ops are called through the dispatcher, as registered by NS_torch's TORCH_LIBRARY. Needs a
// CUDA GPU; without one the op tests are skipped and say so.
#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/cuda.h>
#include <torch/jit.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef NS_MANIFEST
#error "build with -DNS_MANIFEST=\"/path/to/manifest.json\" (the package's CMakeLists.txt does)"
#endif

namespace {

using nlohmann::json;

constexpr double kEagerFactor = 8;  // how many times eager's own error an op may make
constexpr double kInf = std::numeric_limits<double>::infinity();

// manifest.json, read once; `error` says why when it could not be.
struct Manifest {
  json root;
  std::string error;
};

const Manifest& manifest() {
  static const Manifest m = [] {
    Manifest m;
    std::ifstream in(NS_MANIFEST);
    if (!in) {
      m.error = "cannot read " NS_MANIFEST;
      return m;
    }
    try {
      m.root = json::parse(in);
    } catch (const std::exception& e) {
      m.error = std::string(NS_MANIFEST ": ") + e.what();
    }
    return m;
  }();
  return m;
}

// --- Inputs, the reference and the op
// --------------------------------------------------------------

torch::ScalarType scalar_type(const std::string& name) {
  static const std::map<std::string, torch::ScalarType> types = {
      {"float32", torch::kFloat32}, {"float16", torch::kFloat16}, {"bfloat16", torch::kBFloat16},
      {"float64", torch::kFloat64}, {"int32", torch::kInt32},     {"int64", torch::kInt64},
      {"bool", torch::kBool}};
  auto it = types.find(name);
  if (it == types.end()) throw std::runtime_error("manifest.json: unknown dtype " + name);
  return it->second;
}

// One draw on the GPU: spec {"shape", "init"} drawn from LibTorch's generator (seed it first);
// float16/bfloat16 kept float32 when `keep_float32` (a computed input's operand).
torch::Tensor draw_one(const std::string& dtype_name, const json& spec, bool keep_float32) {
  torch::ScalarType dtype = scalar_type(dtype_name);
  if (keep_float32 && (dtype == torch::kFloat16 || dtype == torch::kBFloat16))
    dtype = torch::kFloat32;
  const auto shape = spec.at("shape").get<std::vector<int64_t>>();
  const json& init = spec.at("init");
  const std::string kind = init.at("kind");
  const auto gpu = torch::TensorOptions().device(torch::kCUDA);
  const auto wide = gpu.dtype(dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
  torch::Tensor t;
  if (kind == "normal") {
    t = torch::randn(shape, wide) * init.at("std").get<double>() + init.at("mean").get<double>();
  } else if (kind == "uniform") {
    double lo = init.at("lo"), hi = init.at("hi");
    t = torch::rand(shape, wide) * (hi - lo) + lo;
  } else if (kind == "randint") {
    t = torch::randint(init.at("lo").get<int64_t>(), init.at("hi").get<int64_t>(), shape,
                       gpu.dtype(torch::kInt64));
  } else if (kind == "bernoulli") {
    t = torch::rand(shape, gpu.dtype(torch::kFloat32)) < init.at("p").get<double>();
  } else {
    throw std::runtime_error("manifest.json: unknown init kind " + kind);
  }
  return t.to(dtype);
}

// One input on the GPU (seed the generator first). A computed input (`input` has a "transform"):
// its draw and spec["draws"], then the transform, compiled as kforge compiles it; it runs in
// float32 for a float16/bfloat16 input, whose result is rounded.
torch::Tensor draw(const json& input, const json& spec) {
  const std::string dtype_name = input.at("dtype").get<std::string>();
  if (!input.contains("transform")) return draw_one(dtype_name, spec, false);
  const json& transform = input.at("transform");
  std::vector<c10::IValue> drawn{draw_one(transform.at("draw_dtype"), spec, true)};
  for (const json& d : spec.value("draws", json::array()))
    drawn.push_back(draw_one(d.at("dtype"), d, true));
  static std::map<std::string, std::shared_ptr<torch::jit::CompilationUnit>> units;
  const std::string source = transform.at("torchscript");
  auto& unit = units[source];
  if (!unit) unit = torch::jit::compile(source);
  torch::NoGradGuard no_grad;
  torch::Tensor t =
      unit->get_function(transform.at("function").get<std::string>())(drawn).toTensor();
  return t.to(scalar_type(dtype_name)).contiguous();
}

// A result as a list of tensors (a tuple flattened).
std::vector<torch::Tensor> tensors(const c10::IValue& v) {
  std::vector<torch::Tensor> out;
  if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) out.push_back(e.toTensor());
  } else {
    out.push_back(v.toTensor());
  }
  return out;
}

std::vector<torch::Tensor> run(torch::jit::CompilationUnit& unit,
                               const std::vector<torch::Tensor>& inputs) {
  return tensors(
      unit.get_function("forward")(std::vector<c10::IValue>(inputs.begin(), inputs.end())));
}

// NS::op through the dispatcher.
std::vector<torch::Tensor> call_op(const std::string& qualified,
                                   const std::vector<torch::Tensor>& inputs) {
  c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(qualified.c_str(), "");
  std::vector<c10::IValue> stack(inputs.begin(), inputs.end());
  op.callBoxed(stack);
  std::vector<torch::Tensor> out;
  for (const c10::IValue& v : stack)
    for (const torch::Tensor& t : tensors(v)) out.push_back(t);
  return out;
}

// TF32 off for the reference unless the task allows it (kforge's eager baseline); restored after.
class MathMode {
 public:
  explicit MathMode(bool allow_tf32)
      : cublas_(at::globalContext().allowTF32CuBLAS()),
        cudnn_(at::globalContext().allowTF32CuDNN()) {
    at::globalContext().setAllowTF32CuBLAS(allow_tf32);
    at::globalContext().setAllowTF32CuDNN(allow_tf32);
  }
  ~MathMode() {
    at::globalContext().setAllowTF32CuBLAS(cublas_);
    at::globalContext().setAllowTF32CuDNN(cudnn_);
  }
  MathMode(const MathMode&) = delete;
  MathMode& operator=(const MathMode&) = delete;

 private:
  bool cublas_, cudnn_;
};

// --- The acceptance rule
// ---------------------------------------------------------------------------

double default_tolerance(const std::string& dtype) {
  if (dtype == "float16") return 1e-2;
  if (dtype == "bfloat16") return 2e-2;
  if (dtype == "float64") return 1e-10;
  return 1e-4;
}

// |x - r| in float64: 0 where equal (equal infinities) or both NaN, +inf for any other NaN.
torch::Tensor abs_error(const torch::Tensor& x, const torch::Tensor& r) {
  torch::Tensor err = (x - r).abs().masked_fill(x == r, 0.0);
  err = err.masked_fill(torch::isnan(err), kInf);
  return err.masked_fill(torch::isnan(x).logical_and(torch::isnan(r)), 0.0);
}

// Root mean square over r's finite elements (scaled, so huge values do not overflow).
double rms(const torch::Tensor& r) {
  torch::Tensor finite = r.masked_select(torch::isfinite(r));
  if (finite.numel() == 0) return 0;
  double scale = finite.abs().max().item<double>();
  if (scale == 0) return 0;
  return scale * std::sqrt((finite / scale).square().mean().item<double>());
}

std::string str(const torch::Tensor& t) {
  std::ostringstream s;
  s << t.scalar_type() << " " << t.sizes();
  return s.str();
}

// Empty when output c is right, else what is wrong. r: float64 reference, e: eager.
std::string problem(const torch::Tensor& c, const torch::Tensor& r, const torch::Tensor& e,
                    const json& spec) {
  const std::string name = spec.at("name"), dtype = spec.at("dtype");
  if (c.scalar_type() != scalar_type(dtype))
    return "output " + name + ": " + str(c) + ", expected " + dtype;
  if (e.scalar_type() != c.scalar_type())
    return "output " + name + ": the reference returns " + str(e) + ", the manifest says " + dtype;
  if (!c.sizes().equals(e.sizes()))
    return "output " + name + ": " + str(c) + " but the reference returns " + str(e);
  if (c.numel() == 0) return "";
  std::ostringstream s;
  s << "output " << name << ": ";
  if (!c.is_floating_point()) {  // exact, against eager as kforge's judge compares them
    int64_t wrong = (c != e).sum().item<int64_t>();
    if (wrong == 0) return "";
    s << wrong << " of " << c.numel() << " elements differ (exact match required)";
    return s.str();
  }
  torch::Tensor r64 = r.to(torch::kFloat64);
  double tol = spec.contains("tolerance") && spec["tolerance"].is_number()
                   ? spec["tolerance"].get<double>()
                   : default_tolerance(dtype);
  torch::Tensor eager_err = abs_error(e.to(torch::kFloat64), r64);
  double eager_max = eager_err.masked_fill(torch::isinf(eager_err), 0.0).max().item<double>();
  double scale = rms(r64);
  double threshold = std::max(tol * scale, kEagerFactor * eager_max);
  torch::Tensor err = abs_error(c.to(torch::kFloat64), r64);
  double worst = err.max().item<double>();
  if (worst <= threshold) return "";
  torch::Tensor bad = (err > threshold).flatten();
  int64_t first = bad.nonzero()[0][0].item<int64_t>();
  s << "max abs error " << worst << " > threshold " << threshold << " (tol " << tol << " x rms "
    << scale << "; eager error " << eager_max << " x " << kEagerFactor << "); "
    << bad.sum().item<int64_t>() << " of " << c.numel() << " elements wrong, first at flat index "
    << first << ": " << c.flatten()[first].item<double>() << " vs "
    << r64.flatten()[first].item<double>();
  return s.str();
}

// --- Tests
// -----------------------------------------------------------------------------------------

// One op (not a fallback) at one configuration: indices into manifest.json.
struct Case {
  size_t op = 0, config = 0;
  std::string label;  // a test name: op_k_dims
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.label;
}

std::string identifier(const std::string& s) {
  std::string out;
  for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

// Read while tests are registered: a manifest that does not parse gives none (ManifestTest says
// why).
std::vector<Case> cases() try {
  std::vector<Case> out;
  if (!manifest().error.empty()) return out;
  const json& ops = manifest().root.at("ops");
  for (size_t o = 0; o < ops.size(); ++o) {
    if (ops[o].value("fallback", false)) continue;
    const json& configs = ops[o].at("configurations");
    for (size_t k = 0; k < configs.size(); ++k) {
      std::string label = ops[o].at("op").get<std::string>() + "_" + std::to_string(k);
      for (const auto& dim : configs[k].at("dims").items())
        label += "_" + dim.key() + dim.value().dump();
      out.push_back({o, k, identifier(label)});
    }
  }
  return out;
} catch (const std::exception&) {
  return {};
}

TEST(ManifestTest, EveryOpIsRegistered) {
  ASSERT_TRUE(manifest().error.empty()) << manifest().error;
  const std::string ns = manifest().root.at("name");
  for (const json& entry : manifest().root.at("ops")) {
    const std::string qualified = ns + "::" + entry.at("op").get<std::string>();
    EXPECT_TRUE(c10::Dispatcher::singleton().findSchema({qualified, ""}).has_value())
        << qualified << " is not registered: link the test with all of " << ns
        << "_torch (its TORCH_LIBRARY static initialisers register the ops)";
  }
}

class OpTest : public ::testing::TestWithParam<Case> {};

TEST_P(OpTest, MatchesReference) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA GPU: LibTorch " TORCH_VERSION " sees none";
  const json& entry = manifest().root.at("ops").at(GetParam().op);
  const json& config = entry.at("configurations").at(GetParam().config);
  const std::string op = entry.at("op");
  const std::string qualified = manifest().root.at("name").get<std::string>() + "::" + op;
  SCOPED_TRACE(qualified + " at " + config.at("dims").dump());

  torch::manual_seed(1000 + GetParam().config);
  std::vector<torch::Tensor> inputs, wide;
  for (size_t i = 0; i < entry.at("inputs").size(); ++i)
    inputs.push_back(draw(entry["inputs"][i], config.at("inputs").at(i)));
  for (const torch::Tensor& t : inputs)
    wide.push_back(t.is_floating_point() ? t.to(torch::kFloat64) : t);

  std::shared_ptr<torch::jit::CompilationUnit> unit =
      torch::jit::compile(entry.at("reference_torchscript").get<std::string>());
  std::vector<torch::Tensor> e, r;
  {
    MathMode mode(entry.value("allow_tf32", false));
    e = run(*unit, inputs);
    try {
      r = run(*unit, wide);
    } catch (const std::exception& err) {  // kforge's judge does the same: eager stands in
      std::cerr << qualified
                << ": the reference does not run in float64, eager used: " << err.what() << "\n";
      for (const torch::Tensor& t : e)
        r.push_back(t.is_floating_point() ? t.to(torch::kFloat64) : t);
    }
  }
  ASSERT_EQ(e.size(), entry.at("outputs").size())
      << "the reference's outputs against the manifest's";

  std::vector<torch::Tensor> c;
  try {
    c = call_op(qualified, inputs);
  } catch (const std::exception& err) {
    FAIL() << qualified << " threw: " << err.what();
  }
  ASSERT_EQ(c.size(), e.size()) << qualified << "'s outputs against the reference's";
  for (size_t i = 0; i < c.size(); ++i) {
    std::string wrong = problem(c[i], r[i], e[i], entry["outputs"][i]);
    EXPECT_TRUE(wrong.empty()) << wrong;
  }
}

// Each op refuses an input of the wrong rank and one of the wrong dtype with an error naming the op
// and the problem (tests/test_ops.py goes through every check from Python).
TEST(ManifestTest, EveryOpRefusesAWrongRankAndAWrongDtype) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "no CUDA GPU: LibTorch " TORCH_VERSION " sees none";
  ASSERT_TRUE(manifest().error.empty()) << manifest().error;
  for (const json& entry : manifest().root.at("ops")) {
    const std::string op = entry.at("op");
    const std::string qualified = manifest().root.at("name").get<std::string>() + "::" + op;
    const json& config = entry.at("configurations").at(0);
    torch::manual_seed(999);
    std::vector<torch::Tensor> inputs;
    for (size_t i = 0; i < entry.at("inputs").size(); ++i)
      inputs.push_back(draw(entry["inputs"][i], config.at("inputs").at(i)));
    const torch::Tensor good = inputs[0];
    std::vector<std::pair<std::string, torch::Tensor>> bad = {
        {"dims", good.unsqueeze(0)
                     .expand([&] {
                       std::vector<int64_t> s = {2};
                       for (int64_t d : good.sizes()) s.push_back(d);
                       return s;
                     }())
                     .contiguous()},
        {"dtype",
         good.to(good.scalar_type() == torch::kFloat64 ? torch::kFloat32 : torch::kFloat64)}};
    for (const auto& [what, t] : bad) {
      inputs[0] = t;
      try {
        call_op(qualified, inputs);
        ADD_FAILURE() << qualified << " accepted an input of the wrong " << what;
      } catch (const c10::Error& err) {
        const std::string message = err.what_without_backtrace();
        EXPECT_NE(message.find(op), std::string::npos) << message;
        EXPECT_NE(message.find(what), std::string::npos) << qualified << ": " << message;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Manifest, OpTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.label;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OpTest);

}  // namespace
