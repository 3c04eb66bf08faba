#include "kforge/compile/kernelbench_answer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>

#include "kernelbench/cuda_source.h"
#include "kernelbench/host_code.h"
#include "kforge/common/strings.h"

namespace kforge::compile {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using namespace kb;

constexpr const char* kZeroKernel = "kforge_zero_fill";

// load_inline's cuda_sources, from its pieces (string constants joined), with the answer's line of
// each piece, so that a line of the source can be named as the answer's line.
struct JoinedSource {
  std::string text;
  std::vector<std::pair<int, std::optional<int>>> starts;  // (source line, answer line) of pieces

  std::optional<int> answer_line(int source_line) const {
    for (size_t k = starts.size(); k-- > 0;)
      if (source_line >= starts[k].first) {
        if (!starts[k].second) return std::nullopt;
        return *starts[k].second + (source_line - starts[k].first);
      }
    return std::nullopt;
  }
};

JoinedSource join_pieces(const json& pieces) {
  JoinedSource s;
  int line = 1;
  for (const json& p : pieces) {
    std::string text = p.value("text", "");
    std::optional<int> at;
    if (p.contains("line") && p["line"].is_number_integer()) at = p["line"].get<int>();
    s.starts.push_back({line, at});
    // A piece that starts mid-line: its first line is the line the text so far ends on.
    if (!s.text.empty() && s.text.back() != '\n') s.starts.back().second.reset();
    s.text += text;
    line += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }
  return s;
}

std::string where(const std::string& file, std::optional<int> line) {
  return file + (line ? ":" + std::to_string(*line) : "") + ": ";
}

std::string format_real(double v, bool is_double) {
  char buf[64];
  std::snprintf(buf, sizeof buf, is_double ? "%.17g" : "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return is_double ? s : s + "f";
}

std::string dtype_text(tasks::Dtype d) {
  return std::string(tasks::dtype_name(d));
}

class Converter {
 public:
  Converter(const json& parsed, const std::string& file, const tasks::Task& task,
            const std::vector<KernelBenchOutput>& outputs)
      : parsed_(parsed), file_(file), task_(task), outputs_(outputs) {}

  KernelBenchCandidate run() {
    if (parsed_.value("ok", false) != true) {
      std::optional<int> line;
      if (parsed_.contains("line") && parsed_["line"].is_number_integer())
        line = parsed_["line"].get<int>();
      refuse(line, parsed_.value("reason", std::string("kforge's reader gave no reason")));
    }
    const json& ext = parsed_.at("extension");
    src_ = join_pieces(ext.at("pieces"));
    try {
      parts_ = split_source(src_.text);
      HostRun run(parts_, task_.all_dims());
      run_ = &run;
      call_steps();
      name_tensors();
      KernelBenchCandidate c;
      c.plan = plan().dump(2);
      c.source = source();
      c.first_line = src_.starts.empty() || !src_.starts[0].second ? 1 : *src_.starts[0].second;
      std::vector<std::string> host_notes;
      for (const auto& [line, text] : run.notes) {
        std::optional<int> at = src_.answer_line(line);
        host_notes.push_back((at ? "line " + std::to_string(*at) + ": " : "") + text);
      }
      notes_.insert(notes_.begin(), host_notes.begin(), host_notes.end());
      for (const json& f : ext.value("flags", json::array()))
        if (f.is_string())
          notes_.push_back("load_inline's flag '" + f.get<std::string>() +
                           "' is not used: kforge compiles every candidate with its own flags");
      c.notes = notes_;
      run_ = nullptr;
      return c;
    } catch (const SourceRefusal& r) {
      std::optional<int> line = src_.answer_line(r.line());
      refuse(line, std::string(r.what()) +
                       (line ? "" : " (cuda_sources line " + std::to_string(r.line()) + ")"));
    }
  }

 private:
  [[noreturn]] void refuse(std::optional<int> line, const std::string& why) const {
    throw KernelBenchRefused(where(file_, line) + why);
  }

  const json& model() const { return parsed_.at("model"); }
  int model_line(const char* key) const { return model().value(key, 1); }

  // ---- forward()'s calls ---------------------------------------------------------------------

  int input_slot(size_t k) {
    if (auto it = input_slots_.find(k); it != input_slots_.end()) return it->second;
    const tasks::InputSpec& in = task_.inputs[k];
    TensorSlot s;
    s.name = in.name;
    s.dtype = in.dtype;
    s.input = true;
    for (const Expr& e : in.shape) s.shape.push_back(sym_of(e));
    return input_slots_[k] = run_->add_tensor(std::move(s));
  }

  void call_steps() {
    const json& inputs = model().at("inputs");
    forward_inputs_ = inputs.size();
    if (forward_inputs_ > task_.inputs.size()) {
      std::string names;
      for (const auto& in : task_.inputs) names += (names.empty() ? "" : ", ") + in.name;
      refuse(model_line("line"), "ModelNew.forward() takes " + std::to_string(forward_inputs_) +
                                     " arguments; task " + task_.id() + " has " +
                                     std::to_string(task_.inputs.size()) + " input(s) (" + names +
                                     ")");
    }
    map_parameters();
    for (const json& step : model().at("steps")) {
      int line = step.value("line", 1);
      std::vector<CallArg> args;
      for (const json& a : step.at("args")) args.push_back(argument(a, line));
      std::vector<int> slots = run_->call(step.at("function").get<std::string>(), args);
      values_[step.at("result").get<std::string>()] = slots;
    }
  }

  // forward()'s self.X.Y parameters: the task's inputs after forward()'s arguments, by name
  // (the importer names them X_Y), else by order when the counts agree.
  void map_parameters() {
    std::vector<std::string> used;
    std::function<void(const json&)> collect = [&](const json& a) {
      if (a.contains("param")) {
        std::string p = a["param"].get<std::string>();
        if (std::find(used.begin(), used.end(), p) == used.end()) used.push_back(p);
      }
      for (const char* k : {"size", "numel"})
        if (a.contains(k)) collect(a[k]);
    };
    for (const json& step : model().at("steps"))
      for (const json& a : step.at("args")) collect(a);
    std::set<size_t> taken;
    std::vector<std::string> unmatched;
    for (const std::string& p : used) {
      std::string flat = p;
      std::replace(flat.begin(), flat.end(), '.', '_');
      bool found = false;
      for (size_t k = forward_inputs_; k < task_.inputs.size() && !found; ++k)
        if (task_.inputs[k].name == flat && !taken.count(k)) {
          params_[p] = k;
          taken.insert(k);
          found = true;
        }
      if (!found) unmatched.push_back(p);
    }
    std::vector<size_t> free;
    for (size_t k = forward_inputs_; k < task_.inputs.size(); ++k)
      if (!taken.count(k)) free.push_back(k);
    if (unmatched.empty()) return;
    if (unmatched.size() != free.size()) {
      std::string names;
      for (size_t k : free) names += (names.empty() ? "" : ", ") + task_.inputs[k].name;
      refuse(
          model_line("line"),
          "ModelNew passes self." + unmatched[0] + " to the kernels, and task " + task_.id() +
              " has no input for it (its inputs after forward()'s arguments that no parameter "
              "named: " +
              (names.empty() ? "none" : names) +
              "); kforge maps a parameter to the input named like its path (" +
              [&] {
                std::string f = unmatched[0];
                std::replace(f.begin(), f.end(), '.', '_');
                return f;
              }() +
              "), or in order when as many inputs are left as parameters");
    }
    for (size_t k = 0; k < unmatched.size(); ++k) {
      params_[unmatched[k]] = free[k];
      notes_.push_back("self." + unmatched[k] + " is the task's input '" +
                       task_.inputs[free[k]].name + "' (in order: no input is named " +
                       unmatched[k] + ")");
    }
  }

  CallArg argument(const json& a, int line) {
    CallArg c;
    if (a.contains("input")) {
      c.tensor = input_slot(a["input"].get<size_t>());
    } else if (a.contains("param")) {
      c.tensor = input_slot(params_.at(a["param"].get<std::string>()));
    } else if (a.contains("value")) {
      auto it = values_.find(a["value"].get<std::string>());
      if (it == values_.end() || it->second.size() != 1)
        refuse(line, "forward() passes a result kforge cannot follow (a tuple, or none)");
      c.tensor = it->second[0];
    } else if (a.contains("int")) {
      c.kind = CallArg::Kind::Int;
      c.value = sym_const(a["int"].get<int64_t>());
    } else if (a.contains("float")) {
      c.kind = CallArg::Kind::Real;
      c.real = a["float"].get<double>();
    } else if (a.contains("size") || a.contains("numel")) {
      CallArg t = argument(a.contains("size") ? a["size"] : a["numel"], line);
      if (t.kind != CallArg::Kind::Tensor) refuse(line, "a size of something that is not a tensor");
      const std::vector<SymP>& shape = run_->tensors[t.tensor].shape;
      c.kind = CallArg::Kind::Int;
      if (a.contains("numel")) {
        c.value = sym_const(1);
        for (const SymP& d : shape) c.value = sym_mul(c.value, d);
      } else {
        int64_t d = a["dim"].get<int64_t>(), n = static_cast<int64_t>(shape.size());
        if (d < -n || d >= n)
          refuse(line, "forward() reads size " + std::to_string(d) + " of a tensor with " +
                           std::to_string(n) + " dimension(s)");
        c.value = shape[static_cast<size_t>(d < 0 ? d + n : d)];
      }
    } else {
      refuse(line, "kforge's reader gave an argument it does not know (a kforge bug)");
    }
    return c;
  }

  // ---- tensors -------------------------------------------------------------------------------

  int root(int slot) const {
    while (run_->tensors[slot].base >= 0) slot = run_->tensors[slot].base;
    return slot;
  }

  void name_tensors() {
    std::vector<int> results;
    for (const json& r : model().at("returns")) {
      auto it = values_.find(r.get<std::string>());
      if (it == values_.end())
        refuse(model_line("return_line"), "forward() returns something kforge cannot follow");
      results.insert(results.end(), it->second.begin(), it->second.end());
    }
    int line = model_line("return_line");
    if (results.size() != outputs_.size())
      refuse(line, "forward() returns " + std::to_string(results.size()) + " tensor(s); task " +
                       task_.id() + " has " + std::to_string(outputs_.size()) + " output(s)");
    for (size_t k = 0; k < results.size(); ++k) output(results[k], k, line);
    std::set<std::string> taken = reserved_names();
    for (const HostLaunch& l : run_->launches)
      for (const LaunchArg& a : l.args)
        if (a.kind == LaunchArg::Kind::Tensor && !tensor_name_.count(a.tensor)) {
          TensorSlot& s = run_->tensors[a.tensor];
          if (s.input) {
            tensor_name_[a.tensor] = s.name;
            continue;
          }
          std::string name = is_identifier(s.name) ? s.name : "scratch";
          for (int n = 2; taken.count(name); ++n) name = s.name + "_" + std::to_string(n);
          taken.insert(name);
          tensor_name_[a.tensor] = name;
          workspaces_.push_back(a.tensor);
        }
  }

  std::set<std::string> reserved_names() const {
    std::set<std::string> out = {"num_sms", "warp_size", "max_shared_per_block"};
    for (const auto& [d, v] : task_.dims) out.insert(d);
    for (const auto& in : task_.inputs) out.insert(in.name);
    for (const auto& o : outputs_) out.insert(o.name);
    return out;
  }

  void output(int slot, size_t k, int line) {
    const KernelBenchOutput& o = outputs_[k];
    int base = root(slot);
    TensorSlot& s = run_->tensors[base];
    if (s.input)
      refuse(line, "forward() returns the task's input '" + s.name +
                       "' (written in place?); a "
                       "kforge candidate writes its outputs, and its inputs are read-only");
    if (tensor_name_.count(base)) refuse(line, "forward() returns one tensor as two outputs");
    tensor_name_[base] = o.name;
    std::optional<int> made = src_.answer_line(s.line);
    std::string at = "the wrapper's result '" + s.name + "' (" + s.how +
                     (made ? " at line " + std::to_string(*made)
                           : ", cuda_sources line " + std::to_string(s.line)) +
                     ")";
    if (s.dtype != o.dtype)
      refuse(line, at + " is " + dtype_text(s.dtype) + "; the task's output '" + o.name + "' is " +
                       dtype_text(o.dtype));
    check_shape(run_->tensors[slot].shape, k, at, line);
    if (slot != base) check_view(run_->tensors[slot], s, at, line);
    if (s.zeroed) zeroed_outputs_.push_back(base);
  }

  std::vector<int64_t> sizes_at(const std::vector<SymP>& shape, const tasks::Dims& d) const {
    std::vector<int64_t> out;
    for (const SymP& s : shape) out.push_back(Expr::parse(sym_text(s)).eval_int(d));
    return out;
  }

  static std::string sizes_text(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
    return "[" + s + "]";
  }

  // The wrapper's result must have the task's output shape: the declared one at every dims
  // configuration, else the reference's at the timed dims.
  void check_shape(const std::vector<SymP>& shape, size_t k, const std::string& at, int line) {
    const KernelBenchOutput& o = outputs_[k];
    const tasks::OutputSpec* declared = nullptr;
    for (const auto& spec : task_.outputs)
      if (spec.name == o.name && !spec.shape.empty()) declared = &spec;
    std::vector<std::pair<tasks::Dims, std::vector<int64_t>>> expected;
    if (declared) {
      for (const tasks::Dims& d : task_.all_dims()) {
        std::vector<int64_t> v;
        for (const Expr& e : declared->shape) v.push_back(e.eval_int(d));
        expected.push_back({d, v});
      }
    } else if (o.timed_sizes) {
      expected.push_back({task_.dims, *o.timed_sizes});
    } else {
      if (shape.size() != o.rank)
        refuse(line, at + " has " + std::to_string(shape.size()) +
                         " dimension(s); the task's "
                         "output '" +
                         o.name + "' has " + std::to_string(o.rank));
      notes_.push_back(
          "the output's sizes were not checked, only its rank (LibTorch's meta "
          "device cannot tell the reference's sizes without running it); the judge "
          "compares the values");
      return;
    }
    for (const auto& [d, want] : expected) {
      std::vector<int64_t> got;
      try {
        got = sizes_at(shape, d);
      } catch (const Error& e) {
        refuse(line, at + ": its shape cannot be evaluated at " + tasks::format_dims(d) + " (" +
                         e.what() + ")");
      }
      if (got != want)
        refuse(line, at + " has shape " + sizes_text(got) + " at " + tasks::format_dims(d) +
                         "; the task's output '" + o.name + "' has shape " + sizes_text(want));
    }
  }

  void check_view(const TensorSlot& view, const TensorSlot& base, const std::string& at, int line) {
    for (const tasks::Dims& d : task_.all_dims()) {
      int64_t a = 1, b = 1;
      for (int64_t x : sizes_at(view.shape, d)) a *= x;
      for (int64_t x : sizes_at(base.shape, d)) b *= x;
      if (a != b)
        refuse(line, at + " is returned through " + view.how + " with " + std::to_string(a) +
                         " elements of its " + std::to_string(b) + " at " + tasks::format_dims(d));
    }
  }

  // ---- the plan ------------------------------------------------------------------------------

  static ordered_json expr_json(const SymP& s) {
    if (auto c = sym_constant(s)) return *c;
    return sym_text(s);
  }

  static ordered_json dims_json(const std::vector<SymP>& d) {
    ordered_json out = ordered_json::array();
    for (const SymP& s : d) out.push_back(expr_json(s));
    return out;
  }

  static SymP numel(const std::vector<SymP>& shape) {
    SymP n = sym_const(1);
    for (const SymP& d : shape) n = sym_mul(n, d);
    return n;
  }

  ordered_json plan() {
    ordered_json launches = ordered_json::array();
    for (int slot : zeroed_outputs_) launches.push_back(zero_launch(slot));
    for (const HostLaunch& l : run_->launches) launches.push_back(launch(l));
    ordered_json p;
    p["launch"] = launches;
    if (!workspaces_.empty()) {
      p["workspace"] = ordered_json::array();
      for (int slot : workspaces_) {
        const TensorSlot& s = run_->tensors[slot];
        p["workspace"].push_back({{"name", tensor_name_.at(slot)},
                                  {"dtype", dtype_text(s.dtype)},
                                  {"count", expr_json(numel(s.shape))},
                                  {"zero_init", s.zeroed}});
      }
    }
    return p;
  }

  ordered_json zero_launch(int slot) {
    const TensorSlot& s = run_->tensors[slot];
    zero_types_.insert(c_type(s.dtype));
    SymP n = numel(s.shape);
    notes_.push_back("the output '" + tensor_name_.at(slot) + "' is zeroed by " + kZeroKernel +
                     ", a kernel kforge adds (the wrapper allocates it with " + s.how +
                     ", and kforge fills outputs with NaN before each run)");
    return {{"kernel", std::string(kZeroKernel) + "<" + c_type(s.dtype) + ">"},
            {"grid", {expr_json(sym_min(sym_ceil_div(n, sym_const(256)), sym_const(65535)))}},
            {"block", {256}},
            {"shared_bytes", 0},
            {"args", {tensor_name_.at(slot), expr_json(n)}}};
  }

  ordered_json launch(const HostLaunch& l) {
    const Function& k = *l.kernel;
    if (l.args.size() != k.params.size())
      throw SourceRefusal(l.line, "the launch of '" + k.name + "' passes " +
                                      std::to_string(l.args.size()) + " argument(s); it takes " +
                                      std::to_string(k.params.size()));
    ordered_json args = ordered_json::array();
    for (size_t i = 0; i < l.args.size(); ++i) {
      const LaunchArg& a = l.args[i];
      if (a.kind == LaunchArg::Kind::Tensor) {
        args.push_back(tensor_name_.at(a.tensor));
        if (run_->tensors[a.tensor].input) make_const(k, i);
      } else if (a.kind == LaunchArg::Kind::Int) {
        args.push_back(expr_json(a.value));
      } else {
        bake(k, i, a, l.line);
      }
    }
    return {{"kernel", l.name},
            {"grid", dims_json(l.grid)},
            {"block", dims_json(l.block)},
            {"shared_bytes", expr_json(l.shared_bytes)},
            {"args", args}};
  }

  // The kernel's definitions and declarations (same name and parameter count).
  std::vector<const Function*> declarations(const Function& k) const {
    std::vector<const Function*> out;
    for (const Function& f : parts_.functions)
      if (f.kernel && f.name == k.name && f.params.size() == k.params.size()) out.push_back(&f);
    return out;
  }

  // An input pointer parameter without const: kforge's inputs are read-only, and its signature
  // check wants `const T*`, so the conversion adds it (a kernel that writes its input then fails
  // to compile, as it should).
  void make_const(const Function& k, size_t i) {
    const Param& p = k.params[i];
    if (!p.pointer || p.is_const || !made_const_.insert({k.name, i}).second) return;
    for (const Function* f : declarations(k))
      edits_.push_back({parts_.tokens[f->params[i].begin].begin,
                        parts_.tokens[f->params[i].begin].begin, "const "});
    notes_.push_back("kernel " + k.name + "'s parameter '" + p.name +
                     "' is made const: it reads a task input, and kforge's inputs are read-only");
  }

  // A float argument: a plan passes integers only, so the constant is written into the kernel
  // in place of its parameter.
  void bake(const Function& k, size_t i, const LaunchArg& a, int line) {
    const Param& p = k.params[i];
    if (!std::isfinite(a.real))
      throw SourceRefusal(line, "the kernel's float argument '" + a.text + "' is not finite");
    if (p.name.empty())
      throw SourceRefusal(line, "the kernel " + k.name + " has an unnamed float parameter");
    std::string value = format_real(a.real, a.is_double);
    auto [it, fresh] = baked_.insert({{k.name, i}, value});
    if (!fresh) {
      if (it->second != value)
        throw SourceRefusal(line, "kernel " + k.name + " is launched with " + p.name + " = " +
                                      it->second + " and " + value +
                                      "; kforge writes a float argument into the kernel (a plan "
                                      "passes integers only), so it must be the same everywhere");
      return;
    }
    std::string type = p.type;
    for (const char* w : {"const ", "volatile "})
      if (size_t at = type.find(w); at != std::string::npos) type.erase(at, std::strlen(w));
    type = trim(type);
    std::string init =
        type == "float" || type == "double" ? value : "static_cast<" + type + ">(" + value + ")";
    for (const Function* f : declarations(k)) {
      remove_param(*f, i);
      if (f->body_open)
        edits_.push_back({parts_.tokens[*f->body_open].end, parts_.tokens[*f->body_open].end,
                          " const " + type + " " + p.name + " = " + init + ";"});
    }
    notes_.push_back("kernel " + k.name + "'s float parameter '" + p.name + "' is written into " +
                     "the kernel as " + value + " (from '" + a.text +
                     "'): a plan passes integers only");
  }

  void remove_param(const Function& f, size_t i) {
    const std::vector<Token>& t = parts_.tokens;
    const Param& p = f.params[i];
    size_t b = t[p.begin].begin, e = t[p.end - 1].end;
    if (i + 1 < f.params.size())
      e = t[f.params[i + 1].begin].begin;  // and the comma after it
    else if (i > 0)
      b = t[f.params[i - 1].end - 1].end;  // or the one before it
    edits_.push_back({b, e, ""});
  }

  std::string source() {
    std::vector<Edit> edits = edits_;
    for (const Removed& r : parts_.removed) edits.push_back(removal(src_.text, r));
    std::string out = apply_edits(src_.text, edits);
    if (!zero_types_.empty()) {
      out +=
          "\n// kforge: zeroes an output the answer's wrapper allocated with zeros (kforge fills "
          "outputs with NaN before each run).\n";
      if (zero_types_.count("__half")) out += "#include <cuda_fp16.h>\n";
      if (zero_types_.count("__nv_bfloat16")) out += "#include <cuda_bf16.h>\n";
      out += "template <typename T>\n__global__ void " + std::string(kZeroKernel) +
             "(T* __restrict__ out, long long n) {\n"
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
             "       i += (long long)gridDim.x * blockDim.x)\n"
             "    out[i] = T();\n}\n";
    }
    return out;
  }

  const json& parsed_;
  const std::string& file_;
  const tasks::Task& task_;
  const std::vector<KernelBenchOutput>& outputs_;
  JoinedSource src_;
  SourceParts parts_;
  HostRun* run_ = nullptr;
  size_t forward_inputs_ = 0;
  std::map<size_t, int> input_slots_;
  std::map<std::string, size_t> params_;
  std::map<std::string, std::vector<int>> values_;
  std::map<int, std::string> tensor_name_;
  std::vector<int> workspaces_, zeroed_outputs_;
  std::set<std::string> zero_types_;
  std::set<std::pair<std::string, size_t>> made_const_;
  std::map<std::pair<std::string, size_t>, std::string> baked_;
  std::vector<Edit> edits_;
  std::vector<std::string> notes_;
};

}  // namespace

KernelBenchCandidate convert_kernelbench_answer(const nlohmann::json& parsed,
                                                const std::string& answer_file,
                                                const tasks::Task& task,
                                                const std::vector<KernelBenchOutput>& outputs) {
  try {
    return Converter(parsed, answer_file, task, outputs).run();
  } catch (const nlohmann::json::exception& e) {
    throw KernelBenchRefused(answer_file +
                             ": kforge's reader of the answer replied with "
                             "something malformed (a kforge bug): " +
                             e.what());
  }
}

std::string kernelbench_markdown(const KernelBenchCandidate& c, const tasks::Task& task,
                                 const std::string& answer_file) {
  std::string md = "<!-- task: " + task.id() + " -->\n";
  md += "Converted by kforge from the KernelBench answer `" + answer_file +
        "` (`kforge compile --kernelbench`): its device code, and a launch plan read from its "
        "host wrapper.\n";
  if (!c.notes.empty()) {
    md += "\n";
    for (const std::string& n : c.notes) md += "- " + n + "\n";
  }
  md += "\n```cuda\n" + c.source + "```\n\n```json\n" + c.plan + "\n```\n";
  return md;
}

}  // namespace kforge::compile
