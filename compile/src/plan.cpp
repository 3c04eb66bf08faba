#include "kforge/compile/plan.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

#include "kforge/common/json_limits.h"
#include "kforge/common/strings.h"
#include "kforge/compile/source_check.h"

namespace kforge::compile {
int sm_number(const std::string& arch) {
  int cc = 0;
  return std::sscanf(arch.c_str(), "sm_%d", &cc) == 1 ? cc : 0;
}

namespace {

using nlohmann::json;

const std::set<std::string> kFactNames = {"num_sms", "warp_size", "max_shared_per_block"};

// C++20 keywords, alternative tokens and `defined`: a tunable becomes `#define NAME value`.
const std::set<std::string> kCppKeywords = {
    "alignas",      "alignof",   "and",           "and_eq",
    "asm",          "auto",      "bitand",        "bitor",
    "bool",         "break",     "case",          "catch",
    "char",         "char8_t",   "char16_t",      "char32_t",
    "class",        "compl",     "concept",       "const",
    "consteval",    "constexpr", "constinit",     "const_cast",
    "continue",     "co_await",  "co_return",     "co_yield",
    "decltype",     "default",   "defined",       "delete",
    "do",           "double",    "dynamic_cast",  "else",
    "enum",         "explicit",  "export",        "extern",
    "false",        "float",     "for",           "friend",
    "goto",         "if",        "inline",        "int",
    "long",         "mutable",   "namespace",     "new",
    "noexcept",     "not",       "not_eq",        "nullptr",
    "operator",     "or",        "or_eq",         "private",
    "protected",    "public",    "register",      "reinterpret_cast",
    "requires",     "return",    "short",         "signed",
    "sizeof",       "static",    "static_assert", "static_cast",
    "struct",       "switch",    "template",      "this",
    "thread_local", "throw",     "true",          "try",
    "typedef",      "typeid",    "typename",      "union",
    "unsigned",     "using",     "virtual",       "void",
    "volatile",     "wchar_t",   "while",         "xor",
    "xor_eq"};

// Why `name` cannot be a macro name, or "" when it can.
std::string reserved_because(const std::string& name) {
  if (kCppKeywords.count(name)) return "'" + name + "' is a C++ keyword";
  if (name.find("__") != std::string::npos)
    return "'" + name + "' is reserved to the compiler (it contains a double underscore)";
  if (name.size() > 1 && name[0] == '_' && std::isupper(static_cast<unsigned char>(name[1])))
    return "'" + name + "' is reserved to the compiler (an underscore and a capital letter)";
  return "";
}

// A JSON integer as int64, or nullopt past its range (nlohmann keeps 2^63..2^64-1 unsigned).
std::optional<int64_t> int64_of(const json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return std::nullopt;
  return v.get<int64_t>();
}

class Parser {
 public:
  Parser(const tasks::Task& task, const std::vector<TensorInfo>& tensors) : task_(task) {
    plan_.tensors = tensors;
  }

  Plan parse(const json& j) {
    if (!j.is_object()) fail("plan", "must be a JSON object with a \"launch\" list");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "launch" && it.key() != "workspace" && it.key() != "tune" &&
          it.key() != "constraints")
        fail(it.key(), "unknown key (known: launch, workspace, tune, constraints)");
    plan_.json = j;
    parse_tune(j);
    parse_workspaces(j);
    if (!j.contains("launch")) fail("launch", "missing: list the kernel launches");
    const json& launches = j["launch"];
    if (!launches.is_array() || launches.empty())
      fail("launch", "must be a non-empty list of launches");
    if (launches.size() > kMaxLaunches)
      fail("launch", "at most " + std::to_string(kMaxLaunches) + " launches, got " +
                         std::to_string(launches.size()));
    for (size_t i = 0; i < launches.size(); ++i)
      plan_.launches.push_back(parse_launch(launches[i], "launch[" + std::to_string(i) + "]"));
    if (j.contains("constraints")) {
      const json& c = j["constraints"];
      if (!c.is_array()) fail("constraints", "must be a list of expression strings");
      for (size_t i = 0; i < c.size(); ++i)
        plan_.constraints.push_back(expression(c[i], "constraints[" + std::to_string(i) + "]"));
    }
    return plan_;
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw PlanError(field + ": " + problem);
  }

  Expr expression(const json& v, const std::string& field) const {
    Expr e = Expr::constant(0);
    if (v.is_number_integer()) {
      std::optional<int64_t> i = int64_of(v);
      if (!i) fail(field, v.dump() + " is out of the 64-bit integer range");
      e = Expr::constant(*i);
    } else if (v.is_string()) {
      try {
        e = Expr::parse(v.get<std::string>());
      } catch (const ExprError& err) {
        fail(field, err.what());
      }
    } else {
      fail(field, "must be an integer or an expression string, got " + v.dump());
    }
    for (const std::string& name : e.names()) {
      if (task_.dims.count(name) || kFactNames.count(name) || is_tunable(name)) continue;
      if (plan_.tensor(name))
        fail(field, "'" + name + "' is a tensor; expressions take dims, tunables and device facts");
      fail(field, "unknown name '" + name + "' (dims: " + names_of_dims() +
                      "; tunables: " + names_of_tunables() +
                      "; device facts: num_sms, warp_size, max_shared_per_block)");
    }
    return e;
  }

  bool is_tunable(const std::string& n) const {
    for (const auto& [name, values] : plan_.tune)
      if (name == n) return true;
    return false;
  }
  std::string names_of_dims() const {
    std::string s;
    for (const auto& [k, v] : task_.dims) s += (s.empty() ? "" : ", ") + k;
    return s;
  }
  std::string names_of_tunables() const {
    std::string s;
    for (const auto& [k, v] : plan_.tune) s += (s.empty() ? "" : ", ") + k;
    return s.empty() ? "none" : s;
  }
  std::string names_of_tensors() const {
    std::string s;
    for (const auto& t : plan_.tensors) s += (s.empty() ? "" : ", ") + t.name;
    return s;
  }

  void parse_tune(const json& j) {
    if (!j.contains("tune")) return;
    const json& t = j["tune"];
    if (!t.is_object()) fail("tune", "must be an object like {\"BLOCK\": [128, 256]}");
    if (t.size() > kMaxTunables)
      fail("tune", std::to_string(t.size()) + " tunables; a plan may have at most " +
                       std::to_string(kMaxTunables));
    for (auto it = t.begin(); it != t.end(); ++it) {
      std::string field = "tune." + printable(it.key());
      if (!is_identifier(it.key())) fail(field, "a tunable name must be an identifier");
      if (std::string why = reserved_because(it.key()); !why.empty())
        fail(field, why + "; tunables become #define lines, so name them like BLOCK or VEC");
      if (task_.dims.count(it.key()))
        fail(field, "'" + it.key() + "' is a dim of the task; tunables need their own names");
      if (kFactNames.count(it.key())) fail(field, "'" + it.key() + "' is a device fact");
      if (plan_.tensor(it.key()))
        fail(field, "'" + it.key() + "' is a tensor of the task; tunables need their own names");
      for (const auto& in : task_.inputs)
        if (in.name == it.key()) fail(field, "'" + it.key() + "' is an input of the task");
      const json& values = it.value();
      if (!values.is_array() || values.empty()) fail(field, "must be a non-empty list of integers");
      if (values.size() > kMaxTuneValues)
        fail(field, std::to_string(values.size()) + " values; a tunable may have at most " +
                        std::to_string(kMaxTuneValues));
      std::vector<int64_t> vs;
      for (const auto& v : values) {
        if (!v.is_number_integer()) fail(field, "values must be integers, got " + v.dump());
        std::optional<int64_t> i = int64_of(v);
        if (!i) fail(field, v.dump() + " is out of the 64-bit integer range");
        vs.push_back(*i);
      }
      plan_.tune.emplace_back(it.key(), vs);
    }
  }

  void parse_workspaces(const json& j) {
    if (!j.contains("workspace")) return;
    const json& w = j["workspace"];
    if (!w.is_array()) fail("workspace", "must be a list of {name, dtype, count, zero_init}");
    for (size_t i = 0; i < w.size(); ++i) {
      std::string field = "workspace[" + std::to_string(i) + "]";
      const json& e = w[i];
      if (!e.is_object()) fail(field, "must be an object {name, dtype, count, zero_init}");
      for (auto it = e.begin(); it != e.end(); ++it)
        if (it.key() != "name" && it.key() != "dtype" && it.key() != "count" &&
            it.key() != "zero_init")
          fail(field + "." + it.key(), "unknown key (known: name, dtype, count, zero_init)");
      WorkspaceSpec ws;
      if (!e.contains("name") || !e["name"].is_string()) fail(field + ".name", "missing: a string");
      ws.name = e["name"].get<std::string>();
      if (!is_identifier(ws.name)) fail(field + ".name", "must be an identifier");
      if (plan_.tensor(ws.name))
        fail(field + ".name", "'" + ws.name + "' is already a tensor (" + names_of_tensors() + ")");
      if (task_.dims.count(ws.name) || is_tunable(ws.name))
        fail(field + ".name", "'" + ws.name + "' is a dim or tunable");
      if (!e.contains("dtype") || !e["dtype"].is_string())
        fail(field + ".dtype", "missing: a dtype string");
      auto dt = tasks::parse_dtype(e["dtype"].get<std::string>());
      if (!dt)
        fail(field + ".dtype", "unknown dtype '" + e["dtype"].get<std::string>() +
                                   "' (float32, float16, bfloat16, float64, int32, int64, bool)");
      ws.dtype = *dt;
      if (!e.contains("count")) fail(field + ".count", "missing: the number of elements");
      ws.count = expression(e["count"], field + ".count");
      if (e.contains("zero_init")) {
        if (!e["zero_init"].is_boolean()) fail(field + ".zero_init", "must be true or false");
        ws.zero_init = e["zero_init"].get<bool>();
      }
      plan_.workspaces.push_back(ws);
      plan_.tensors.push_back({ws.name, ws.dtype, TensorRole::Workspace});
    }
  }

  std::vector<Expr> dims3(const json& j, const std::string& field) const {
    if (j.is_number_integer() || j.is_string()) return {expression(j, field)};
    if (!j.is_array() || j.empty() || j.size() > 3)
      fail(field, "must be a list of 1 to 3 expressions (x, y, z)");
    std::vector<Expr> out;
    for (size_t i = 0; i < j.size(); ++i)
      out.push_back(expression(j[i], field + "[" + std::to_string(i) + "]"));
    return out;
  }

  // {"tensor_map": TENSOR, "dims": [...], "box": [...], "swizzle": 0|32|64|128}
  ArgSpec tensor_map_arg(const json& j, const std::string& field) const {
    static const char* kForm = "{tensor_map, dims, box, swizzle}";
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "tensor_map" && it.key() != "dims" && it.key() != "box" &&
          it.key() != "swizzle")
        fail(field + "." + it.key(), "unknown key (a tensor map is " + std::string(kForm) + ")");
    ArgSpec a;
    if (!j.contains("tensor_map") || !j["tensor_map"].is_string() ||
        !plan_.tensor(j["tensor_map"].get<std::string>()))
      fail(field + ".tensor_map", "must name a tensor (" + names_of_tensors() + ")");
    a.text = j["tensor_map"].get<std::string>();
    a.is_tensor = true;
    TensorMapSpec m;
    for (const char* key : {"dims", "box"}) {
      const std::string f = field + "." + key;
      if (!j.contains(key) || !j[key].is_array() || j[key].empty() || j[key].size() > 5)
        fail(f, "missing: a list of 1 to 5 expressions, outermost first");
      std::vector<Expr>& out = std::string(key) == "dims" ? m.dims : m.box;
      for (size_t k = 0; k < j[key].size(); ++k)
        out.push_back(expression(j[key][k], f + "[" + std::to_string(k) + "]"));
    }
    if (m.box.size() != m.dims.size())
      fail(field + ".box", "has " + std::to_string(m.box.size()) + " sizes for " +
                               std::to_string(m.dims.size()) + " dims; give one per dim");
    if (j.contains("swizzle")) {
      const json& sw = j["swizzle"];
      if (!sw.is_number_integer() || (sw != 0 && sw != 32 && sw != 64 && sw != 128))
        fail(field + ".swizzle", "must be 0, 32, 64 or 128 (bytes), got " + sw.dump());
      m.swizzle = sw.get<int>();
    }
    a.map = std::move(m);
    return a;
  }

  LaunchSpec parse_launch(const json& j, const std::string& field) const {
    if (!j.is_object()) fail(field, "must be an object {kernel, grid, block, shared_bytes, args}");
    static const std::set<std::string> keys = {"kernel", "grid",        "block",   "shared_bytes",
                                               "args",   "cooperative", "cluster", "when"};
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!keys.count(it.key()))
        fail(field + "." + it.key(),
             "unknown key (known: kernel, grid, block, shared_bytes, args, "
             "cooperative, cluster, when)");
    LaunchSpec l;
    if (!j.contains("kernel") || !j["kernel"].is_string() || j["kernel"].get<std::string>().empty())
      fail(field + ".kernel",
           "missing: the kernel's name (or template instantiation, e.g. \"rows<BLOCK>\")");
    l.kernel = j["kernel"].get<std::string>();
    // NVRTC parses the name expression as code: only names and simple template arguments.
    if (auto why = name_expression_problem(l.kernel))
      fail(field + ".kernel", "'" + l.kernel.substr(0, 64) + (l.kernel.size() > 64 ? "..." : "") +
                                  "' is not a kernel name or template instantiation: " + *why);
    if (!j.contains("grid")) fail(field + ".grid", "missing: 1 to 3 expressions");
    if (!j.contains("block")) fail(field + ".block", "missing: 1 to 3 expressions");
    l.grid = dims3(j["grid"], field + ".grid");
    l.block = dims3(j["block"], field + ".block");
    if (j.contains("shared_bytes"))
      l.shared_bytes = expression(j["shared_bytes"], field + ".shared_bytes");
    if (j.contains("cooperative")) {
      if (!j["cooperative"].is_boolean()) fail(field + ".cooperative", "must be true or false");
      l.cooperative = j["cooperative"].get<bool>();
    }
    if (j.contains("cluster")) l.cluster = dims3(j["cluster"], field + ".cluster");
    if (j.contains("when")) l.when = expression(j["when"], field + ".when");
    if (!j.contains("args") || !j["args"].is_array())
      fail(field + ".args", "missing: a list with one entry per kernel parameter");
    const json& args = j["args"];
    for (size_t i = 0; i < args.size(); ++i) {
      std::string af = field + ".args[" + std::to_string(i) + "]";
      ArgSpec a;
      if (args[i].is_object()) {
        a = tensor_map_arg(args[i], af);
      } else if (args[i].is_string() && plan_.tensor(args[i].get<std::string>())) {
        a.text = args[i].get<std::string>();
        a.is_tensor = true;
      } else if (args[i].is_string() || args[i].is_number_integer()) {
        a.text = args[i].is_string() ? args[i].get<std::string>() : args[i].dump();
        try {
          a.value = expression(args[i], af);
        } catch (const PlanError& e) {
          std::string msg = e.what();
          if (args[i].is_string() && is_identifier(a.text))
            throw PlanError(af + ": '" + a.text + "' is neither a tensor (" + names_of_tensors() +
                            ") nor a dim, tunable or device fact");
          throw;
        }
      } else {
        fail(af,
             "must be a tensor name, an integer expression or a tensor map {tensor_map, dims, box, "
             "swizzle}, got " +
                 args[i].dump());
      }
      l.args.push_back(a);
    }
    return l;
  }

  const tasks::Task& task_;
  Plan plan_;
};

std::string where(const tasks::Dims& d, const Tunables& t) {
  std::string s = "dims (" + tasks::format_dims(d) + ")";
  if (!t.empty()) {
    std::string tt;
    for (const auto& [k, v] : t) tt += (tt.empty() ? "" : ", ") + k + "=" + std::to_string(v);
    s += " and tunables (" + tt + ")";
  }
  return s;
}

NameLookup lookup_for(const tasks::Dims& d, const Tunables& t, const DeviceFacts& f) {
  return [&d, &t, &f](const std::string& n) -> std::optional<Value> {
    if (auto it = d.find(n); it != d.end()) return it->second;
    if (auto it = t.find(n); it != t.end()) return it->second;
    if (n == "num_sms") return f.num_sms;
    if (n == "warp_size") return f.warp_size;
    if (n == "max_shared_per_block") return f.max_shared_per_block;
    return std::nullopt;
  };
}

}  // namespace

DeviceFacts DeviceFacts::for_arch(const std::string& arch) {
  DeviceFacts f;
  f.arch = arch;
  if (arch.rfind("sm_80", 0) == 0) {
    f.num_sms = 108;
    f.max_shared_per_block = 166912;
  } else if (arch.rfind("sm_86", 0) == 0 || arch.rfind("sm_87", 0) == 0) {
    f.num_sms = 84;
    f.max_shared_per_block = 101376;
  } else if (arch.rfind("sm_89", 0) == 0) {
    f.num_sms = 128;
    f.max_shared_per_block = 101376;
  } else if (arch.rfind("sm_10", 0) == 0 || arch.rfind("sm_12", 0) == 0) {
    f.num_sms = 148;
    f.max_shared_per_block = 232448;
  }
  return f;
}

const TensorInfo* Plan::tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Plan parse_plan(const nlohmann::json& json, const tasks::Task& task,
                const std::vector<TensorInfo>& task_tensors) {
  return Parser(task, task_tensors).parse(json);
}

Plan parse_plan_text(const std::string& text, const tasks::Task& task,
                     const std::vector<TensorInfo>& task_tensors) {
  nlohmann::json j;
  try {
    j = parse_json_bounded(text, "plan", kMaxPlanDepth, kMaxPlanBytes);
  } catch (const InputError& e) {
    throw PlanError(e.what());
  }
  return parse_plan(j, task, task_tensors);
}

kforge_launch::Limits launch_limits(const DeviceFacts& f) {
  kforge_launch::Limits l;
  for (int k = 0; k < 3; ++k) l.max_grid[k] = f.max_grid[k], l.max_block[k] = f.max_block[k];
  l.max_threads_per_block = f.max_threads_per_block;
  l.max_shared_per_block = f.max_shared_per_block;
  return l;
}

ConcretePlan evaluate_plan(const Plan& plan, const tasks::Dims& dims, const Tunables& tunables,
                           const DeviceFacts& facts) {
  NameLookup lookup = lookup_for(dims, tunables, facts);
  std::string at = " for " + where(dims, tunables);
  auto value = [&](const Expr& e, const std::string& field) -> int64_t {
    Value v;
    try {
      v = e.eval(lookup);
    } catch (const ExprError& err) {
      throw PlanError(field + ": " + err.what() + at);
    }
    if (!std::holds_alternative<int64_t>(v))
      throw PlanError(field + ": '" + e.text() + "' is not an integer" + at);
    return std::get<int64_t>(v);
  };
  ConcretePlan out;
  for (size_t i = 0; i < plan.workspaces.size(); ++i) {
    const WorkspaceSpec& w = plan.workspaces[i];
    std::string field = "workspace[" + std::to_string(i) + "].count";
    int64_t count = value(w.count, field);
    if (count < 1)
      throw PlanError(field + ": '" + w.count.text() + "' is " + std::to_string(count) + at +
                      "; a workspace needs at least 1 element");
    if (count > kMaxWorkspaceBytes / static_cast<int64_t>(tasks::dtype_size(w.dtype)))
      throw PlanError(field + ": " + std::to_string(count) +
                      " elements exceed the 4 GiB workspace cap" + at);
    out.workspaces.push_back({w.name, w.dtype, count, w.zero_init});
  }
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const LaunchSpec& l = plan.launches[i];
    std::string field = "launch[" + std::to_string(i) + "]";
    if (l.when && value(*l.when, field + ".when") == 0) continue;
    ConcreteLaunch c;
    c.index = i;
    c.kernel = l.kernel;
    c.cooperative = l.cooperative;
    for (size_t k = 0; k < l.grid.size(); ++k)
      c.grid[k] = value(l.grid[k], field + ".grid[" + std::to_string(k) + "]");
    for (size_t k = 0; k < l.block.size(); ++k)
      c.block[k] = value(l.block[k], field + ".block[" + std::to_string(k) + "]");
    for (size_t k = 0; k < l.cluster.size(); ++k)
      c.cluster[k] = value(l.cluster[k], field + ".cluster[" + std::to_string(k) + "]");
    c.shared_bytes = value(l.shared_bytes, field + ".shared_bytes");
    int64_t cluster_size = c.cluster[0] * c.cluster[1] * c.cluster[2];
    if (cluster_size > 1 && sm_number(facts.arch) < 90)
      throw PlanError(field +
                      ".cluster: thread-block clusters need sm_90 or newer; the target is " +
                      facts.arch);
    kforge_launch::Launch launch;
    for (int k = 0; k < 3; ++k)
      launch.grid[k] = c.grid[k], launch.block[k] = c.block[k], launch.cluster[k] = c.cluster[k];
    launch.shared_bytes = c.shared_bytes;
    kforge_launch::LimitProblem problem = kforge_launch::check_limits(launch, launch_limits(facts));
    if (!problem.ok())
      throw PlanError(field + "." + problem.field + ": " + kforge_launch::place(problem.why, at));
    for (size_t k = 0; k < l.args.size(); ++k) {
      const std::string af = field + ".args[" + std::to_string(k) + "]";
      ConcreteArg a;
      a.is_tensor = l.args[k].is_tensor;
      if (a.is_tensor)
        a.tensor = l.args[k].text;
      else
        a.value = value(l.args[k].value, af);
      if (const auto& m = l.args[k].map) {
        const tasks::Dtype dtype = plan.tensor(a.tensor)->dtype;
        a.map.rank = static_cast<int>(m->dims.size());
        for (size_t d = 0; d < m->dims.size(); ++d) {
          a.map.dims[d] = value(m->dims[d], af + ".dims[" + std::to_string(d) + "]");
          a.map.box[d] = value(m->box[d], af + ".box[" + std::to_string(d) + "]");
        }
        a.map.element_bytes = static_cast<int>(tasks::dtype_size(dtype));
        a.map.type = tensor_map_type(dtype);
        a.map.swizzle = m->swizzle;
        // The tensor's size is the judge's to check (outputs' shapes come from the reference).
        std::string why = kforge_launch::check_tensor_map(a.map, INT64_MAX);
        if (!why.empty()) throw PlanError(af + "." + kforge_launch::place(why, at));
        if (sm_number(facts.arch) < 90)
          throw PlanError(af + ": tensor maps (TMA) need sm_90 or newer; the target is " +
                          facts.arch);
      }
      c.args.push_back(a);
    }
    out.launches.push_back(std::move(c));
  }
  if (out.launches.empty())
    throw PlanError("launch: no launch's `when` holds" + at + "; every configuration needs one");
  return out;
}

CUtensorMapDataType tensor_map_type(tasks::Dtype dtype) {
  switch (dtype) {
    case tasks::Dtype::Float32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case tasks::Dtype::Float16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case tasks::Dtype::BFloat16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case tasks::Dtype::Float64:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    case tasks::Dtype::Int32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case tasks::Dtype::Int64:
      return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case tasks::Dtype::Bool:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  }
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

Tunables default_tunables(const Plan& plan) {
  Tunables t;
  for (const auto& [name, values] : plan.tune) t[name] = values.front();
  return t;
}

Tunables choose_tunables(const Plan& plan, const Tunables& chosen, const tasks::Dims& dims,
                         const DeviceFacts& facts) {
  for (const auto& [name, value] : chosen) {
    auto it = std::find_if(plan.tune.begin(), plan.tune.end(),
                           [&](const auto& p) { return p.first == name; });
    if (it == plan.tune.end())
      throw PlanError("tune." + name + ": the plan has no tunable named '" + name + "'");
    if (std::find(it->second.begin(), it->second.end(), value) == it->second.end())
      throw PlanError("tune." + name + ": " + std::to_string(value) +
                      " is not one of the listed values");
  }
  if (chosen.size() == plan.tune.size()) {
    if (!constraints_hold(plan, dims, chosen, facts))
      throw PlanError("constraints: the chosen tunables break a constraint at the timed dims");
    return chosen;
  }
  // Some or none chosen: the first point of the tune space that agrees with every chosen value.
  std::vector<Tunables> space = tune_space(plan, dims, facts);
  for (const Tunables& t : space)
    if (std::all_of(chosen.begin(), chosen.end(),
                    [&](const auto& c) { return t.at(c.first) == c.second; }))
      return t;
  std::string with;
  for (const auto& [name, value] : chosen)
    with += (with.empty() ? " with " : ", ") + name + "=" + std::to_string(value);
  if (tune_space_size(plan) > kMaxTuneCombinations)
    throw PlanError("constraints: none of the " + std::to_string(kMaxTuneCombinations) +
                    " combinations kforge samples from the " +
                    std::to_string(tune_space_size(plan)) + " of the tunables' values" + with +
                    " satisfies the constraints at the timed dims");
  throw PlanError("constraints: no combination of the tunables' values" + with +
                  " satisfies the constraints at the timed dims");
}

bool constraints_hold(const Plan& plan, const tasks::Dims& dims, const Tunables& t,
                      const DeviceFacts& facts) {
  NameLookup lookup = lookup_for(dims, t, facts);
  for (size_t i = 0; i < plan.constraints.size(); ++i) {
    try {
      if (to_double(plan.constraints[i].eval(lookup)) == 0.0) return false;
    } catch (const ExprError& e) {
      throw PlanError("constraints[" + std::to_string(i) + "]: " + e.what() + " for " +
                      where(dims, t));
    }
  }
  return true;
}

uint64_t tune_space_size(const Plan& plan) {
  uint64_t n = 1;
  for (const auto& [name, values] : plan.tune)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(values.size()), &n))
      throw PlanError("tune: the tunables make more than 2^64 combinations");
  return n;
}

Tunables tune_point(const Plan& plan, uint64_t index) {
  Tunables t;
  for (auto it = plan.tune.rbegin(); it != plan.tune.rend(); ++it) {
    const std::vector<int64_t>& values = it->second;
    t[it->first] = values[index % values.size()];
    index /= values.size();
  }
  return t;
}

std::vector<Tunables> tune_space(const Plan& plan, const tasks::Dims& dims,
                                 const DeviceFacts& facts) {
  const uint64_t size = tune_space_size(plan);
  const uint64_t considered = std::min(size, kMaxTuneCombinations);
  std::vector<Tunables> valid;
  for (uint64_t k = 0; k < considered; ++k) {
    uint64_t index = k;
    if (considered < size) {  // spread evenly: round(k * (size - 1) / (considered - 1)), exact
      unsigned __int128 num = static_cast<unsigned __int128>(k) * (size - 1) + (considered - 1) / 2;
      index = static_cast<uint64_t>(num / (considered - 1));
    }
    Tunables t = tune_point(plan, index);
    if (constraints_hold(plan, dims, t, facts)) valid.push_back(std::move(t));
  }
  return valid;
}

std::vector<Tunables> sample_tune_space(const std::vector<Tunables>& space, int count) {
  if (count <= 0 || space.empty()) return {};
  if (space.size() <= static_cast<size_t>(count)) return space;
  if (count == 1) return {space.front()};
  std::vector<Tunables> out;
  for (int i = 0; i < count; ++i) {
    size_t at =
        static_cast<size_t>(std::lround(i * static_cast<double>(space.size() - 1) / (count - 1)));
    if (out.empty() || out.back() != space[at]) out.push_back(space[at]);
  }
  return out;
}

}  // namespace kforge::compile
