// The task in words and the GPU's facts, for the prompts (prompt_parts.h).
#include <cstdio>
#include <regex>
#include <set>
#include <sstream>

#include "kforge/common/strings.h"
#include "kforge/verify/compare.h"
#include "prompt_parts.h"

namespace kforge::evolve::prompt_parts {
namespace {

std::string printf_g(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Identifiers of an expression in the order written ("C * H * W": C, H, W).
void append_names(const Expr& e, const tasks::Dims& dims, std::vector<std::string>& out) {
  static const std::regex id(R"([A-Za-z_][A-Za-z0-9_]*)");
  const std::string& text = e.text();
  for (auto it = std::sregex_iterator(text.begin(), text.end(), id); it != std::sregex_iterator();
       ++it) {
    std::string name = (*it)[0];
    if (dims.count(name) && std::find(out.begin(), out.end(), name) == out.end())
      out.push_back(name);
  }
}

// A shape as written: "[B, N - 2]".
std::string expressions(const std::vector<Expr>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].text();
  return s + "]";
}

// Per SM, from the CUDA programming guide's table of compute capabilities: 32-bit registers,
// resident threads, resident blocks, shared memory in bytes. Archs kforge does not know: none.
struct SmSpec {
  int64_t registers, threads, blocks, shared_bytes;
};
std::optional<SmSpec> sm_spec(const std::string& arch) {
  switch (compile::sm_number(arch)) {
    case 80:
      return SmSpec{65536, 2048, 32, 167936};
    case 86:
      return SmSpec{65536, 1536, 16, 102400};
    case 87:
      return SmSpec{65536, 1536, 16, 167936};
    case 89:
      return SmSpec{65536, 1536, 24, 102400};
    case 90:
    case 100:
      return SmSpec{65536, 2048, 32, 233472};
    default:
      return std::nullopt;
  }
}

std::string kib(int64_t bytes) {
  return bytes % 1024 == 0 ? std::to_string(bytes / 1024) + " KiB"
                           : std::to_string(bytes) + " bytes";
}

}  // namespace

std::string format_ms(double ms) {
  return printf_g("%.4g", ms);
}

std::vector<std::string> ordered_dims(const tasks::Task& t) {
  std::vector<std::string> out;
  for (const auto& in : t.inputs)
    for (const Expr& e : in.shape) append_names(e, t.dims, out);
  for (const auto& in : t.inputs)
    for (const Expr& e : in.init.params) append_names(e, t.dims, out);
  for (const auto& [name, value] : t.dims)
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  return out;
}

std::string format_dims(const tasks::Dims& d, const std::vector<std::string>& order) {
  std::string s;
  std::set<std::string> shown;
  auto add = [&](const std::string& k, int64_t v) {
    s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
    shown.insert(k);
  };
  for (const std::string& k : order)
    if (auto it = d.find(k); it != d.end()) add(k, it->second);
  for (const auto& [k, v] : d)
    if (!shown.count(k)) add(k, v);
  return s;
}

std::string task_tensors(const tasks::Task& t, const tasks::Reference& ref) {
  std::string tensors;
  for (const auto& i : t.inputs)
    tensors += "- input `" + i.name + "`: " + std::string(tasks::dtype_name(i.dtype)) + " " +
               format_shape(t.shape_of(i, t.dims)) + " (shape " + tasks::shape_expressions(i) +
               "), values " + tasks::values_text(i) + "\n";
  auto shapes = tasks::known_output_shapes(t, ref, t.dims);
  auto outs = tasks::describe_outputs(t, ref);
  for (size_t k = 0; k < outs.size(); ++k) {
    // The shape the task declares, shown where it holds at the timed sizes (`tasks check` holds
    // it to the reference at the check sizes).
    const std::vector<Expr>* declared =
        k < t.outputs.size() && !t.outputs[k].shape.empty() ? &t.outputs[k].shape : nullptr;
    std::optional<std::vector<int64_t>> sizes;
    if (shapes && k < shapes->size()) sizes = (*shapes)[k].sizes;
    if (!sizes && outs[k].rank == 0) sizes = std::vector<int64_t>{};  // a scalar's shape is []
    if (declared) {
      try {
        std::vector<int64_t> at_timed;
        for (const Expr& e : *declared) at_timed.push_back(e.eval_int(t.dims));
        if (!sizes) sizes = at_timed;
        if (*sizes != at_timed) declared = nullptr;
      } catch (const std::exception&) {
        declared = nullptr;
      }
    }
    tensors += "- output `" + outs[k].name + "`: " + std::string(tasks::dtype_name(outs[k].dtype)) +
               " " +
               (sizes ? format_shape(*sizes) : "(rank " + std::to_string(outs[k].rank) + ")") +
               (declared ? " (shape " + expressions(*declared) + ")" : "") + "\n";
  }
  return tensors;
}

// How a candidate is held to account: the acceptance rule with this task's tolerances, the math
// mode, the compile flags and what is timed (docs/design.md, "Acceptance rule"; docs/protocol.md).
std::string judging(const tasks::Task& t, const tasks::Reference& ref) {
  std::vector<tasks::OutputInfo> outs = tasks::describe_outputs(t, ref);
  std::string tols;
  for (size_t k = 0; k < outs.size(); ++k) {
    std::optional<double> given = k < t.outputs.size() ? t.outputs[k].tolerance : std::nullopt;
    double tol = given.value_or(verify::default_tolerance(outs[k].dtype));
    std::ostringstream os;
    os << tol;
    tols += (tols.empty() ? "" : ", ") + std::string("`") + outs[k].name + "` " +
            (tasks::is_floating(outs[k].dtype) ? "tol = " + os.str()
                                               : "exactly equal to eager's output");
  }
  std::ostringstream k;
  k << verify::kEagerErrorFactor;
  return "Correctness: each output is compared in float64 with the reference run in float64, over "
         "several "
         "seeds, two input distributions and every size above. The largest |yours - reference| may "
         "not exceed "
         "max(tol * rms(reference), " +
         k.str() + " * eager's own largest error); here " + tols + ". " +
         (t.allow_tf32
              ? "TF32 is allowed for this task. "
              : "The baselines' math is IEEE float32 (TF32 is off); yours is judged by "
                "its accuracy, not by the instructions it uses. Split-precision tensor-core "
                "schemes that keep float32 accuracy meet the rule (3xTF32: each operand "
                "split as hi + lo, both TF32, and hi*hi + hi*lo + lo*hi accumulated in "
                "float32; or three-term bf16 splits); plain TF32, fp16 or bf16 rounding of "
                "float32 operands does not once a reduction is long (about 1e-3 relative "
                "error, ten times the tolerance). ") +
         "NVRTC compiles with -std=c++17 and without --use_fast_math (fast intrinsics such as "
         "__expf are yours "
         "to call, and must still meet the tolerance).\n"
         "Timing: each launch of your plan in order, at the timed sizes, with the L2 cache flushed "
         "and the inputs "
         "taken from a pool of fresh sets before every repetition; the median of many repetitions, "
         "beside PyTorch "
         "eager on the same inputs.";
}

std::string gpu_facts(const PromptGpu& g) {
  const compile::DeviceFacts& f = g.plan;
  const std::string driver =
      f.measured ? "from the driver" : "spec of the usual " + f.arch + " GPU";
  std::string s = "- " + std::to_string(f.num_sms) + " SMs, warp size " +
                  std::to_string(f.warp_size) + " (" + driver +
                  "; plan expressions may use num_sms, warp_size, max_shared_per_block)\n";
  if (g.measured) {
    const verify::MeasuredFacts& m = *g.measured;
    s += "- Memory bandwidth, measured: " + printf_g("%.0f", m.read_gbps) + " GB/s reading, " +
         printf_g("%.0f", m.write_gbps) + " writing, " + printf_g("%.0f", m.copy_gbps) +
         " copying (bytes moved / time)";
    if (g.spec_gbps)
      s += "; spec " + printf_g("%.0f", *g.spec_gbps) + " GB/s (memory clock x bus width)";
    s += "\n- Matmul peaks, measured (PyTorch matmul, TF32 off):";
    std::string peaks;
    for (const char* dtype : {"float32", "float16", "bfloat16", "float64"})
      if (auto it = m.peak_tflops.find(dtype); it != m.peak_tflops.end())
        peaks +=
            std::string(peaks.empty() ? " " : ", ") + dtype + " " + printf_g("%.1f", it->second);
    s += peaks + " TFLOP/s";
    if (auto it = m.peak_tflops.find(verify::kTf32); it != m.peak_tflops.end())
      s += "; float32 with TF32 on " + printf_g("%.1f", it->second) +
           " TFLOP/s (3xTF32, which keeps float32 accuracy, runs at a third of it)";
    s += "\n";
  } else {
    s += "- Memory bandwidth and matmul peaks: not measured yet";
    if (g.spec_gbps)
      s +=
          " (spec bandwidth " + printf_g("%.0f", *g.spec_gbps) + " GB/s, memory clock x bus width)";
    s += "\n";
  }
  if (g.l2_bytes)
    s += "- L2 cache: " + printf_g("%.3g", static_cast<double>(*g.l2_bytes) / (1 << 20)) +
         " MiB (from the driver)\n";
  s += "- Shared memory per block: 48 KiB without opt-in; up to " +
       std::to_string(f.max_shared_per_block) + " bytes (" + kib(f.max_shared_per_block) +
       ", static plus dynamic) with the opt-in, which kforge sets for any launch asking more "
       "than 48 KiB (" +
       driver + ")\n";
  if (std::optional<SmSpec> sm = sm_spec(f.arch))
    s += "- Per SM (spec of sm_" + std::to_string(compile::sm_number(f.arch)) +
         "): " + std::to_string(sm->registers) + " 32-bit registers (at most 255 per thread), " +
         std::to_string(sm->threads) + " resident threads (" + std::to_string(sm->threads / 32) +
         " warps), " + std::to_string(sm->blocks) + " resident blocks, " + kib(sm->shared_bytes) +
         " of shared memory (shared with the L1 cache)\n";
  s += "- Per block: at most " + std::to_string(f.max_threads_per_block) +
       " threads (x, y <= " + std::to_string(f.max_block[0]) +
       ", z <= " + std::to_string(f.max_block[2]) +
       "); grid x <= " + std::to_string(f.max_grid[0]) +
       ", y and z <= " + std::to_string(f.max_grid[1]) + "\n";
  s += compile::sm_number(f.arch) >= 90
           ? "- Thread-block clusters: at most 8 blocks per cluster (the portable "
             "limit; kforge does not opt in to 16)\n"
           : "- Thread-block clusters: none (they need sm_90 or newer)\n";
  return s;
}

std::optional<double> roofline_floor_ms(const tasks::Task& t, const tasks::Reference& ref,
                                        const PromptGpu& g) {
  if (!g.measured) return std::nullopt;
  std::optional<double> bytes = tasks::bytes_that_must_move(t, ref, t.dims);
  std::optional<double> flops;
  if (t.flops) flops = t.flops->eval_real(t.dims);
  tasks::Dtype dt = t.inputs.empty() ? tasks::Dtype::Float32 : t.inputs.front().dtype;
  return verify::roofline_floor_ms(*g.measured, bytes, flops, dt, t.allow_tf32);
}

}  // namespace kforge::evolve::prompt_parts
