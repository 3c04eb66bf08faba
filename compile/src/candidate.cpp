#include "kforge/compile/candidate.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <vector>

#include "kforge/common/hash.h"
#include "kforge/common/strings.h"
#include "kforge/compile/signature.h"

namespace kforge::compile {
namespace {

std::string base_name(const std::string& kernel) {
  return kernel.substr(0, kernel.find('<'));
}

bool is_word(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Whether `name` is defined as a __global__ function (or template) in the source: `__global__`,
// then, before the next ';', '{' or '}', the identifier `name` followed by '('. One linear pass
// over the source (it comes from an LLM; a backtracking regex overflowed the stack on 50 KB).
bool defines_kernel(const std::string& source, const std::string& name) {
  static const std::string kGlobal = "__global__";
  size_t pos = 0;
  while ((pos = source.find(kGlobal, pos)) != std::string::npos) {
    size_t end = std::min(source.find_first_of(";{}", pos + kGlobal.size()), source.size());
    // Every identifier of the region [pos, end) once; a later __global__ inside the region only
    // sees a part of it, so the scan resumes at `end`.
    for (size_t i = pos + kGlobal.size(); i < end;) {
      if (!is_word(source[i])) {
        ++i;
        continue;
      }
      size_t start = i;
      while (i < end && is_word(source[i])) ++i;
      if (i - start != name.size() || source.compare(start, name.size(), name) != 0) continue;
      size_t next = i;
      while (next < end && std::isspace(static_cast<unsigned char>(source[next]))) ++next;
      if (next < end && source[next] == '(') return true;
    }
    pos = end;
  }
  return false;
}

// Why the source cannot be compiled as it is, or "": NVRTC reads it as a C string (a NUL byte
// would cut what it compiles while the identity hashes all of it), and logs echo it as text.
std::string source_problem(const std::string& source) {
  // Written as NVRTC writes its errors, so relabel_log points at the reader's file and line.
  auto at = [&](size_t offset) {
    return std::string(kCandidateFileName) + "(" +
           std::to_string(line_and_column(source, offset).first) + "): ";
  };
  if (size_t nul = source.find('\0'); nul != std::string::npos)
    return at(nul) + "error: a NUL byte; the source must be text";
  if (size_t bad = 0; !is_valid_utf8(source, &bad))
    return at(bad) + "error: bytes that are not UTF-8; the source must be UTF-8 text";
  return "";
}

// The bytes of the module's __device__ variables: the `.global` declarations of the PTX (one a
// line, as NVVM writes them; not `.extern` ones), element size times every array extent. One
// linear pass; saturates at UINT64_MAX instead of overflowing.
uint64_t module_global_bytes(const std::string& ptx) {
  auto saturating_mul = [](uint64_t a, uint64_t b) {
    uint64_t r = 0;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
  };
  uint64_t total = 0;
  for (size_t begin = 0; begin < ptx.size();) {
    size_t eol = std::min(ptx.find('\n', begin), ptx.size());
    // The declaration: up to ';', '=' (an initializer), '{' or a comment.
    size_t stop = begin;
    while (stop < eol && ptx[stop] != ';' && ptx[stop] != '=' && ptx[stop] != '{' &&
           !(ptx[stop] == '/' && stop + 1 < eol && ptx[stop + 1] == '/'))
      ++stop;
    std::vector<std::string> words;
    for (size_t i = begin; i < stop;) {
      while (i < stop && std::isspace(static_cast<unsigned char>(ptx[i]))) ++i;
      size_t w = i;
      while (i < stop && !std::isspace(static_cast<unsigned char>(ptx[i]))) ++i;
      if (i > w) words.push_back(ptx.substr(w, i - w));
    }
    begin = eol + 1;
    size_t k = 0;
    bool is_extern = false;
    while (k < words.size() && (words[k] == ".visible" || words[k] == ".weak" ||
                                words[k] == ".extern" || words[k] == ".common"))
      is_extern |= words[k++] == ".extern";
    if (is_extern || k >= words.size() || words[k] != ".global") continue;
    uint64_t element = 0, vector = 1;
    std::string rest;  // NAME[4][8]
    for (++k; k < words.size(); ++k) {
      const std::string& w = words[k];
      if (w == ".align") {
        ++k;  // its number
      } else if (w.rfind(".v", 0) == 0 && w.size() == 3 &&
                 std::isdigit(static_cast<unsigned char>(w[2]))) {
        vector = static_cast<uint64_t>(w[2] - '0');
      } else if (w == ".pred") {
        element = 1;
      } else if (w[0] == '.' && w.size() >= 3 && w.size() <= 4 &&
                 std::isdigit(static_cast<unsigned char>(w[2]))) {
        element = std::stoull(w.substr(2)) / 8;  // .b8 .u32 .f64 ...
      } else if (w[0] != '.') {
        rest += w;
      }
    }
    uint64_t bytes = saturating_mul(element, vector);
    for (size_t at = rest.find('['); at != std::string::npos; at = rest.find('[', at + 1)) {
      uint64_t extent = 0;
      bool any = false;
      for (size_t i = at + 1; i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]));
           ++i) {
        extent = saturating_mul(extent, 10);
        extent =
            extent > UINT64_MAX - 9 ? UINT64_MAX : extent + static_cast<uint64_t>(rest[i] - '0');
        any = true;
      }
      if (any) bytes = saturating_mul(bytes, extent);
    }
    total = total > UINT64_MAX - bytes ? UINT64_MAX : total + bytes;
  }
  return total;
}

}  // namespace

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::Answer:
      return "answer";
    case Stage::Plan:
      return "plan";
    case Stage::Compile:
      return "compile";
    case Stage::Signature:
      return "signature";
    case Stage::Limits:
      return "limits";
    case Stage::Passed:
      return "passed";
  }
  return "?";
}

std::vector<TensorInfo> task_tensors(const tasks::Task& task, const tasks::Reference& ref) {
  return task_tensors(task, tasks::describe_outputs(task, ref));
}

std::vector<TensorInfo> task_tensors(const tasks::Task& task,
                                     const std::vector<tasks::OutputInfo>& outputs) {
  std::vector<TensorInfo> out;
  for (const auto& in : task.inputs) out.push_back({in.name, in.dtype, TensorRole::Input});
  for (const auto& o : outputs) out.push_back({o.name, o.dtype, TensorRole::Output});
  return out;
}

std::string relabel_log(const std::string& log, const std::string& file, int first_line) {
  // "candidate.cu(12)" -> "file:N". A line number past 9 digits (a `#line 4294967295` in the
  // source) is left as NVRTC wrote it.
  static const std::string kOpen = std::string(kCandidateFileName) + "(";
  std::string out;
  size_t last = 0;
  for (size_t at = log.find(kOpen); at != std::string::npos; at = log.find(kOpen, at + 1)) {
    size_t digits = at + kOpen.size(), end = digits;
    while (end < log.size() && std::isdigit(static_cast<unsigned char>(log[end]))) ++end;
    if (end == digits || end - digits > 9 || end >= log.size() || log[end] != ')') continue;
    int64_t line = std::stoll(log.substr(digits, end - digits)) + first_line - 1;
    out.append(log, last, at - last);
    out += file + ":" + std::to_string(line);
    last = end + 1;
  }
  out.append(log, last, std::string::npos);
  return out;
}

namespace {

// A launch with `when` that no check size makes runs where the task's check sizes cannot catch its
// edge bugs (or runs at the timed size only: a kernel for that size alone). It is checked at one
// more configuration, drawn (deterministically, as admission's unseen sizes are) among the sizes
// where it runs; with none to draw, the plan is refused.
void check_conditional_launches(const tasks::Task& task, const Plan& plan, const DeviceFacts& facts,
                                CandidateReport& r,
                                const std::function<void(const tasks::Dims&)>& add_configuration) {
  if (task.unseen) return;  // admission's sizes, drawn already: the task's own check covered them
  for (size_t k = 0; k < plan.launches.size(); ++k) {
    if (!plan.launches[k].when) continue;
    auto runs = [k](const ConcretePlan& cp) {
      return std::any_of(cp.launches.begin(), cp.launches.end(),
                         [k](const ConcreteLaunch& l) { return l.index == k; });
    };
    if (std::any_of(r.configurations.begin(), r.configurations.end(),
                    [&](const auto& c) { return c.first != task.dims && runs(c.second); }))
      continue;
    std::vector<tasks::Dims> drawn = tasks::draw_unseen_dims(
        task, 0x6b666f72676500 + k, 1, int64_t{256} << 20, [&](const tasks::Dims& d) {
          try {
            return runs(evaluate_plan(plan, d, r.tunables, facts));
          } catch (const PlanError&) {
            return false;
          }
        });
    if (drawn.empty())
      r.errors.push_back("launch[" + std::to_string(k) + "].when: '" +
                         plan.launches[k].when->text() +
                         "' holds at none of the check sizes, and kforge found no other size where "
                         "it holds to check the launch at: a launch must run somewhere besides the "
                         "timed dims");
    else
      add_configuration(drawn.front());
  }
}

}  // namespace

CandidateReport check_candidate(const tasks::Task& task, const std::vector<TensorInfo>& tensors,
                                const std::string& source, const std::string& plan_text,
                                const std::optional<Tunables>& tunables, const DeviceFacts& facts,
                                Compiler& compiler) {
  CandidateReport r;
  if (std::string problem = source_problem(source); !problem.empty()) {
    r.stage = Stage::Answer;
    r.errors.push_back(problem);
    return r;
  }
  r.stage = Stage::Plan;
  Plan plan;
  try {
    plan = parse_plan_text(plan_text, task, tensors);
    r.tunables = choose_tunables(plan, tunables.value_or(Tunables{}), task.dims, facts);
  } catch (const PlanError& e) {
    r.errors.push_back(e.what());
    return r;
  }
  r.identity = candidate_identity(source, plan.json, r.tunables);
  for (size_t i = 0; i < plan.launches.size(); ++i)
    if (!defines_kernel(source, base_name(plan.launches[i].kernel)))
      r.errors.push_back("launch[" + std::to_string(i) +
                         "].kernel: the source defines no __global__ function named '" +
                         base_name(plan.launches[i].kernel) + "'");
  if (!r.errors.empty()) return r;

  r.stage = Stage::Compile;
  ModuleRequest req;
  req.source = source;
  req.arch = facts.arch;
  req.defines = r.tunables;
  for (const auto& l : plan.launches)
    if (std::find(req.name_expressions.begin(), req.name_expressions.end(), l.kernel) ==
        req.name_expressions.end())
      req.name_expressions.push_back(l.kernel);
  r.module = compiler.compile(req);
  if (!r.module.ok) {
    if (!r.module.rejections.empty())
      r.errors = r.module.rejections;
    else
      r.errors.push_back("the source does not compile:\n" + r.module.log);
    return r;
  }

  r.stage = Stage::Signature;
  std::map<std::string, std::vector<ParamType>> params;  // by plan kernel name
  std::map<std::string, bool> from_ptx;
  for (size_t k = 0; k < req.name_expressions.size(); ++k) {
    const std::string& name = req.name_expressions[k];
    KernelReport kr;
    kr.name = name;
    kr.lowered = r.module.lowered_names.at(k);
    kr.signature = demangle(kr.lowered);
    if (auto it = r.module.resources.find(kr.lowered); it != r.module.resources.end())
      kr.resources = it->second;
    r.kernels.push_back(kr);
    std::optional<std::vector<ParamType>> p = kr.signature.empty()
                                                  ? ptx_parameters(r.module.ptx, kr.lowered)
                                                  : parse_demangled_parameters(kr.signature);
    if (!p) {
      r.errors.push_back("kernel " + name + ": kforge could not read its parameter list (" +
                         (kr.signature.empty() ? kr.lowered : kr.signature) + ")");
      continue;
    }
    // An Other parameter (a struct by value) gets its size from PTX, which names no types.
    if (!kr.signature.empty())
      if (auto sizes = ptx_parameters(r.module.ptx, kr.lowered);
          sizes && sizes->size() == p->size())
        for (size_t i = 0; i < p->size(); ++i)
          if ((*p)[i].kind == ParamType::Kind::Other) (*p)[i].bits = (*sizes)[i].bits;
    params[name] = *p;
    r.kernels.back().params = *p;
    from_ptx[name] = kr.signature.empty();
  }
  if (!r.errors.empty()) return r;

  // Limits and argument types on every configuration: the timed dims and each check dims.
  r.stage = Stage::Limits;
  if (uint64_t bytes = module_global_bytes(r.module.ptx); bytes > kMaxModuleGlobalBytes)
    r.errors.push_back(
        "module: its __device__ variables take " +
        (bytes == UINT64_MAX ? std::string("more than 2^64") : std::to_string(bytes)) +
        " bytes; the limit is " + std::to_string(kMaxModuleGlobalBytes) +
        " (256 MiB): declare large scratch memory as a plan workspace");
  auto add_configuration = [&](const tasks::Dims& d) {
    ConcretePlan cp;
    try {
      cp = evaluate_plan(plan, d, r.tunables, facts);
    } catch (const PlanError& e) {
      r.errors.push_back(e.what());
      return;
    }
    for (size_t i = 0; i < cp.launches.size(); ++i) {
      const ConcreteLaunch& l = cp.launches[i];
      const KernelReport* kr = nullptr;
      for (const auto& k : r.kernels)
        if (k.name == l.kernel) kr = &k;
      for (std::string& p :
           check_arguments(l, l.index, plan, params[l.kernel], from_ptx[l.kernel])) {
        p += " (at dims " + tasks::format_dims(d) + ")";
        if (std::find(r.errors.begin(), r.errors.end(), p) == r.errors.end()) r.errors.push_back(p);
      }
      if (kr && kr->resources.static_shared_bytes + l.shared_bytes > facts.max_shared_per_block)
        r.errors.push_back("launch[" + std::to_string(l.index) +
                           "]: " + std::to_string(kr->resources.static_shared_bytes) +
                           " bytes of static plus " + std::to_string(l.shared_bytes) +
                           " bytes of dynamic shared memory exceed " +
                           std::to_string(facts.max_shared_per_block) + " per block (at dims " +
                           tasks::format_dims(d) + ")");
      if (kr && kr->resources.registers * l.block[0] * l.block[1] * l.block[2] > 65536)
        r.errors.push_back("launch[" + std::to_string(l.index) +
                           "]: " + std::to_string(kr->resources.registers) + " registers x " +
                           std::to_string(l.block[0] * l.block[1] * l.block[2]) +
                           " threads exceed the 65536 registers of an SM (add __launch_bounds__ or "
                           "use smaller blocks)");
    }
    r.configurations.emplace_back(d, std::move(cp));
  };
  for (const tasks::Dims& d : task.all_dims()) add_configuration(d);
  if (r.errors.empty()) check_conditional_launches(task, plan, facts, r, add_configuration);
  // The same message for every configuration is one problem.
  std::sort(r.errors.begin(), r.errors.end());
  r.errors.erase(std::unique(r.errors.begin(), r.errors.end()), r.errors.end());
  if (r.errors.empty()) r.stage = Stage::Passed;
  return r;
}

}  // namespace kforge::compile
