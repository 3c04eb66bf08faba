#include "kforge/tasks/reference.h"
#include "kforge/tasks/reference_cache.h"

#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/loop_unrolling.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/csrc/jit/passes/remove_mutation.h>
#include <torch/csrc/jit/passes/symbolic_shape_analysis.h>
#include <torch/jit.h>
#include <torch/version.h>

#include <cstring>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "kforge/common/hash.h"

#include "tasks_prelude.h"

namespace kforge::tasks {
namespace {

std::optional<int> line_in_message(const std::string& msg) {
  static const std::regex re(R"(line (\d+))");
  std::smatch m;
  if (std::regex_search(msg, m, re)) return std::stoi(m[1]);
  return std::nullopt;
}

int count_lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// TorchScript's message, trimmed to what a user needs: the first lines with the source excerpt, and
// where it is longer, its last lines too, which name the cause (the interpreter's traceback of a
// failed operation comes first, its "RuntimeError: CUDA out of memory ..." last).
std::string trim_message(const std::string& msg) {
  constexpr size_t kHead = 12, kTail = 3;
  std::vector<std::string> lines;
  std::istringstream in(msg);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (std::string& line : lines)
    if (!line.empty() && line.back() == '\r') line.pop_back();
  while (!lines.empty() && lines.back().find_first_not_of(" \t") == std::string::npos)
    lines.pop_back();
  std::string out;
  auto add = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) out += (out.empty() ? "" : "\n") + lines[i];
  };
  if (lines.size() <= kHead + kTail + 1) {
    add(0, lines.size());
  } else {
    add(0, kHead);
    out += "\n[...]";
    add(lines.size() - kTail, lines.size());
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// TorchScript compiles `number - tensor` through its builtin `sub(a: number, b: Tensor)`, written
// as `torch.neg(b) + a`: two kernels, where PyTorch run from Python makes one (Tensor.__rsub__ is
// torch.rsub). kforge's eager baseline is what PyTorch users run, so such a pair becomes one
// aten::rsub(b, a, 1) again: the same numbers (negation is exact, the addition the same), one pass
// over the data (level1/hinge_loss's eager was 20 % slower than PyTorch's before; decisions.md).
// Only pairs that came from that builtin: a reference that writes `torch.neg(x) + 1` keeps its two
// ops.
bool from_builtin_rsub(const torch::jit::Node* neg) {
  const std::string where = neg->sourceRange().str();
  return where.find("def sub(a : ") != std::string::npos &&
         where.find("torch.neg(b) + a") != std::string::npos;
}

void restore_rsub(torch::jit::Block* block) {
  using torch::jit::Node;
  std::vector<Node*> pairs;
  for (Node* n : block->nodes()) {
    for (torch::jit::Block* inner : n->blocks()) restore_rsub(inner);
    if (n->kind() != c10::Symbol::aten("add") || n->inputs().size() != 3) continue;
    Node* neg = n->input(0)->node();
    auto alpha = torch::jit::toIValue(n->input(2));
    if (neg->kind() == c10::Symbol::aten("neg") && neg->output()->uses().size() == 1 && alpha &&
        alpha->isInt() && alpha->toInt() == 1 && from_builtin_rsub(neg))
      pairs.push_back(n);
  }
  for (Node* add : pairs) {
    Node* neg = add->input(0)->node();
    torch::jit::Graph* graph = block->owningGraph();
    Node* rsub =
        graph->create(c10::Symbol::aten("rsub"), {neg->input(0), add->input(1), add->input(2)});
    rsub->insertBefore(add);
    rsub->output()->setType(add->output()->type());
    add->output()->replaceAllUsesWith(rsub->output());
    add->destroy();
    neg->destroy();
  }
}

}  // namespace

std::string_view prelude_version() {
  return TORCH_VERSION_MAJOR >= 2 ? "v2" : "v1";
}

const std::string& prelude_source() {
  static const std::string src =
      std::string(embedded::tasks_prelude_common) + "\n" +
      std::string(TORCH_VERSION_MAJOR >= 2 ? embedded::tasks_prelude_v2
                                           : embedded::tasks_prelude_v1) +
      "\n";
  return src;
}

const std::vector<std::string>& prelude_functions() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    static const std::regex re(R"(\ndef F_(\w+)\()");
    const std::string& src = prelude_source();
    for (auto it = std::sregex_iterator(src.begin(), src.end(), re); it != std::sregex_iterator();
         ++it)
      out.push_back((*it)[1]);
    std::sort(out.begin(), out.end());
    return out;
  }();
  return names;
}

std::string rewrite_functional(const std::string& source, const std::string& file,
                               std::optional<int> first_line) {
  const auto& known = prelude_functions();
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  size_t i = 0;
  while (i < source.size()) {
    bool boundary = i == 0 || (!is_word(source[i - 1]) && source[i - 1] != '.');
    size_t prefix = 0;
    for (const char* p : {"torch.nn.functional.", "F."})
      if (boundary && source.compare(i, std::strlen(p), p) == 0) {
        prefix = std::strlen(p);
        break;
      }
    size_t name_end = i + prefix;
    while (prefix && name_end < source.size() && is_word(source[name_end])) ++name_end;
    size_t paren = name_end;
    while (prefix && paren < source.size() && (source[paren] == ' ' || source[paren] == '\t'))
      ++paren;
    if (!prefix || name_end == i + prefix || paren >= source.size() || source[paren] != '(') {
      out += source[i++];
      continue;
    }
    std::string fn = source.substr(i + prefix, name_end - i - prefix);
    if (!std::binary_search(known.begin(), known.end(), fn)) {
      int line_in_ref = count_lines(source.substr(0, i)) + 1;
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw InputError(
          file, first_line ? std::optional<int>(*first_line + line_in_ref - 1) : std::nullopt,
          "reference",
          "F." + fn +
              " is not in kforge's TorchScript prelude; use a torch.<op> builtin "
              "or one of: " +
              list);
    }
    out += "F_" + fn;
    i = name_end;
  }
  return out;
}

Reference Reference::compile(const Task& task, std::optional<int> first_line) {
  const std::string file = task.file.string();
  std::string body = rewrite_functional(task.reference, file, first_line);
  const std::string& prelude = prelude_source();
  auto fail = [&](const std::string& problem, std::optional<int> line_in_ref) {
    std::optional<int> line;
    if (first_line && line_in_ref) line = *first_line + *line_in_ref - 1;
    throw InputError(file, line, "reference", problem);
  };
  Reference r;
  try {
    r.unit_ = torch::jit::compile(prelude + body);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    std::optional<int> line = line_in_message(msg);
    if (line) *line -= count_lines(prelude);
    if (line && *line < 1) {
      throw Error(
          "kforge's TorchScript prelude (tasks/prelude/) does not compile with "
          "LibTorch " TORCH_VERSION " (a kforge bug):\n" +
          trim_message(msg));
    }
    // Point TorchScript's excerpt at the task file rather than the compiled string.
    if (line && first_line) {
      static const std::regex where(R"(File "<string>", line \d+)");
      msg = std::regex_replace(
          msg, where, "File \"" + file + "\", line " + std::to_string(*first_line + *line - 1));
    }
    fail("does not compile as TorchScript:\n" + trim_message(msg), line);
  }
  if (!r.unit_->find_function("forward")) fail("defines no forward() function", std::nullopt);
  for (torch::jit::Function* f : r.unit_->get_functions())
    restore_rsub(torch::jit::toGraphFunction(*f).graph()->block());
  const c10::FunctionSchema& schema = r.unit_->get_function("forward").getSchema();
  const auto& args = schema.arguments();
  if (args.size() != task.inputs.size())
    fail("forward() takes " + std::to_string(args.size()) + " argument(s) but the task declares " +
             std::to_string(task.inputs.size()) + " input(s)",
         std::nullopt);
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].type()->kind() != c10::TypeKind::TensorType)
      fail("forward() argument " + std::to_string(i + 1) + " ('" + args[i].name() +
               "') must be a Tensor (annotate it ': Tensor'), got " + args[i].type()->str(),
           std::nullopt);
  const auto& ret = schema.returns();
  if (ret.size() == 1 && ret[0].type()->kind() == c10::TypeKind::TupleType) {
    auto elems = ret[0].type()->containedTypes();
    for (const auto& t : elems)
      if (t->kind() != c10::TypeKind::TensorType)
        fail("forward() must return a Tensor or a tuple of Tensors, got " + ret[0].type()->str(),
             std::nullopt);
    r.output_count_ = elems.size();
  } else if (ret.size() == 1 && ret[0].type()->kind() == c10::TypeKind::TensorType) {
    r.output_count_ = 1;
  } else {
    fail("forward() must return a Tensor or a tuple of Tensors (annotate '-> Tensor')",
         std::nullopt);
  }
  if (!task.outputs.empty() && task.outputs.size() != r.output_count_)
    throw InputError(file, std::nullopt, "outputs",
                     "declares " + std::to_string(task.outputs.size()) +
                         " output(s) but forward() returns " + std::to_string(r.output_count_));
  return r;
}

std::vector<torch::Tensor> Reference::run(const std::vector<torch::Tensor>& inputs) const {
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  c10::IValue result;
  try {
    result = unit_->get_function("forward")(std::move(args));
  } catch (const std::exception& e) {
    throw UsageError("the reference failed: " + trim_message(e.what()));
  }
  std::vector<torch::Tensor> out;
  if (result.isTuple()) {
    for (const auto& v : result.toTupleRef().elements()) out.push_back(v.toTensor());
  } else {
    out.push_back(result.toTensor());
  }
  return out;
}

std::string Reference::graph_text() const {
  return torch::jit::toGraphFunction(unit_->get_function("forward")).graph()->toString();
}

std::shared_ptr<torch::jit::Graph> Reference::graph_copy() const {
  return torch::jit::toGraphFunction(unit_->get_function("forward")).graph()->copy();
}

void validate_reference(const Task& task, std::optional<int> first_line) {
  shared_references().adopt(task, Reference::compile(task, first_line));
}

std::vector<std::string> output_names(const Task& task, size_t count) {
  std::vector<std::string> names;
  if (!task.outputs.empty()) {
    for (const auto& o : task.outputs) names.push_back(o.name);
    return names;
  }
  if (count == 1) return {"out"};
  for (size_t i = 0; i < count; ++i) names.push_back("out" + std::to_string(i));
  return names;
}

}  // namespace kforge::tasks

namespace kforge::tasks {

int64_t TensorShape::bytes() const {
  int64_t n = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t s : sizes) n *= s;
  return n;
}

std::optional<std::vector<TensorShape>> output_shapes(const Task& task, const Reference& ref,
                                                      const Dims& dims) {
  std::vector<torch::Tensor> inputs;
  for (const InputSpec& in : task.inputs)
    inputs.push_back(
        torch::empty(task.shape_of(in, dims),
                     torch::TensorOptions().dtype(to_scalar_type(in.dtype)).device(torch::kMeta)));
  try {
    std::vector<TensorShape> out;
    for (const torch::Tensor& t : ref.run(inputs)) {
      auto dtype = from_scalar_type(t.scalar_type());
      if (!dtype) return std::nullopt;
      out.push_back({t.sizes().vec(), *dtype});
    }
    return out;
  } catch (const std::exception&) {
    return std::nullopt;  // an op without a meta kernel: the shapes are simply unknown here
  }
}

namespace {

using Sizes = std::vector<std::vector<int64_t>>;

// Every output's sizes at `dims` from LibTorch's symbolic shape analysis of forward()'s graph,
// inlined, with the inputs' sizes given: each op's shape function, no data. nullopt when an
// output's sizes stay unknown (an op without a shape function, or one that needs values) or the
// pass fails.
std::optional<Sizes> analysed_sizes(const Task& task, const Reference& ref, const Dims& dims) {
  // LibTorch calls the pass a work in progress; one at a time, and any failure is "unknown".
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  try {
    std::shared_ptr<torch::jit::Graph> g = ref.graph_copy();
    torch::jit::Inline(*g);
    if (g->inputs().size() != task.inputs.size() || g->outputs().size() != 1) return std::nullopt;
    for (size_t i = 0; i < task.inputs.size(); ++i) {
      std::vector<int64_t> sizes = task.shape_of(task.inputs[i], dims);
      g->inputs()[i]->setType(c10::TensorType::create(
          to_scalar_type(task.inputs[i].dtype), c10::Device(c10::kCPU),
          c10::VaryingShape<int64_t>(sizes), c10::VaryingShape<int64_t>(sizes.size()), false));
    }
    torch::jit::ConstantPropagation(g);
    torch::jit::PeepholeOptimize(g);  // x.size(0), x.dim() become constants
    torch::jit::ConstantPropagation(g);
    torch::jit::UnrollConstantLoops(g);  // the prelude's [stride for _ in range(n)]...
    torch::jit::RemoveListMutation(g);   // ...a list of constants
    torch::jit::ConstantPropagation(g);
    torch::jit::EliminateDeadCode(g);
    // Ops whose output has their first input's shape by definition, some without a shape function
    // in LibTorch (group_norm, instance_norm in 1.13): where the analysis stops at one, its output
    // takes that shape, and the analysis goes on from there.
    static const std::set<std::string> same_shape = {
        "aten::group_norm", "aten::instance_norm", "aten::softmax", "aten::log_softmax",
        "aten::cumsum",     "aten::cumprod",       "aten::selu"};
    for (size_t round = 0; round <= same_shape.size() * 8; ++round) {
      torch::jit::PropagateShapesOnGraph(g);
      torch::jit::Node* stuck = nullptr;
      for (torch::jit::Node* n : g->nodes()) {
        bool unknown = false;
        for (torch::jit::Value* o : n->outputs())
          if (auto type = o->type()->cast<c10::TensorType>())
            unknown = unknown || !type->sizes().concrete_sizes();
        if (unknown) {
          stuck = n;
          break;
        }
      }
      if (!stuck || !same_shape.count(stuck->kind().toQualString()) ||
          stuck->outputs().size() != 1 || stuck->inputs().empty())
        break;
      auto in = stuck->input(0)->type()->cast<c10::TensorType>();
      auto out = stuck->output()->type()->cast<c10::TensorType>();
      if (!in || !out || !in->sizes().concrete_sizes()) break;
      stuck->output()->setType(out->withSizes(*in->sizes().concrete_sizes()));
    }
    std::vector<torch::jit::Value*> outs{g->outputs()[0]};
    if (outs[0]->node()->kind() == c10::prim::TupleConstruct)
      outs.assign(outs[0]->node()->inputs().begin(), outs[0]->node()->inputs().end());
    Sizes out;
    for (torch::jit::Value* v : outs) {
      auto type = v->type()->cast<c10::TensorType>();
      if (!type) return std::nullopt;
      auto sizes = type->sizes().concrete_sizes();
      if (!sizes) return std::nullopt;
      out.push_back(*sizes);
    }
    return out;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The reference run on the CPU at `dims` on the task's own draws (seed 1), float16/bfloat16 run
// upcast as describe_outputs does (sizes do not depend on it; their float32 outputs are reported
// in the low-precision dtype). nullopt when the inputs pass kCpuShapeBytes or the run fails.
std::optional<std::vector<TensorShape>> cpu_shapes(const Task& task, const Reference& ref,
                                                   const Dims& dims) {
  if (task.input_bytes(dims) > kCpuShapeBytes) return std::nullopt;
  try {
    std::optional<Dtype> low;
    for (const InputSpec& in : task.inputs)
      if (in.dtype == Dtype::Float16 || in.dtype == Dtype::BFloat16) low = in.dtype;
    std::vector<torch::Tensor> inputs;
    for (size_t k = 0; k < task.inputs.size(); ++k) {
      torch::Tensor t = generate_cpu(task, k, dims, 1, 0);
      if (low && (t.scalar_type() == torch::kFloat16 || t.scalar_type() == torch::kBFloat16))
        t = t.to(torch::kFloat32);
      inputs.push_back(t);
    }
    std::vector<TensorShape> out;
    for (const torch::Tensor& t : ref.run(inputs)) {
      std::optional<Dtype> dtype = from_scalar_type(t.scalar_type());
      if (!dtype) return std::nullopt;
      if (low && *dtype == Dtype::Float32) dtype = low;
      out.push_back({t.sizes().vec(), *dtype});
    }
    return out;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// What the reference itself gives at `dims`: the meta device, else a CPU run of small inputs.
std::optional<std::vector<TensorShape>> run_shapes(const Task& task, const Reference& ref,
                                                   const Dims& dims) {
  if (auto s = output_shapes(task, ref, dims)) return s;
  return cpu_shapes(task, ref, dims);
}

// The shape analysis at `dims`, where it agrees with the reference's own outputs at every check
// configuration that can be run (at least one); their dtypes.
std::optional<std::vector<TensorShape>> checked_analysis(const Task& task, const Reference& ref,
                                                         const Dims& dims) {
  std::optional<Sizes> at_dims = analysed_sizes(task, ref, dims);
  if (!at_dims) return std::nullopt;
  std::optional<std::vector<TensorShape>> seen;
  for (const Dims& d : task.check_dims) {
    std::optional<std::vector<TensorShape>> ran = run_shapes(task, ref, d);
    if (!ran) continue;
    std::optional<Sizes> analysed = analysed_sizes(task, ref, d);
    if (!analysed || analysed->size() != ran->size()) return std::nullopt;
    for (size_t i = 0; i < ran->size(); ++i)
      if ((*analysed)[i] != (*ran)[i].sizes) return std::nullopt;
    seen = ran;
  }
  if (!seen || seen->size() != at_dims->size()) return std::nullopt;
  std::vector<TensorShape> out;
  for (size_t i = 0; i < at_dims->size(); ++i) out.push_back({(*at_dims)[i], (*seen)[i].dtype});
  return out;
}

}  // namespace

std::optional<std::vector<TensorShape>> known_output_shapes(const Task& task, const Reference& ref,
                                                            const Dims& dims) {
  // What the answer reads of the task: its reference, inputs, check configurations and `dims`.
  std::string key = task.content_hash + '\n' + task.reference + '\n' + format_dims(dims) + '\n';
  for (const InputSpec& in : task.inputs)
    key += in.name + ':' + std::string(dtype_name(in.dtype)) + ':' + shape_expressions(in) + ':' +
           in.transform + '\n';
  for (const Dims& d : task.check_dims) key += format_dims(d) + ';';
  key = content_hash(key);
  static std::mutex mutex;
  static std::map<std::string, std::optional<std::vector<TensorShape>>> known;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  std::optional<std::vector<TensorShape>> shapes = output_shapes(task, ref, dims);
  if (!shapes) shapes = checked_analysis(task, ref, dims);
  if (!shapes) shapes = cpu_shapes(task, ref, dims);
  std::lock_guard<std::mutex> lock(mutex);
  if (known.size() >= 1024) known.clear();  // a process sent ever new tasks does not grow
  known[key] = shapes;
  return shapes;
}

std::optional<double> bytes_that_must_move(const Task& task, const Reference& ref,
                                           const Dims& dims) {
  if (task.min_bytes) return task.min_bytes->eval_real(dims);
  auto outs = output_shapes(task, ref, dims);
  if (!outs) return std::nullopt;
  double bytes = static_cast<double>(task.input_bytes(dims));
  for (const auto& o : *outs) bytes += static_cast<double>(o.bytes());
  return bytes;
}

}  // namespace kforge::tasks

namespace kforge::tasks {

std::vector<OutputInfo> describe_outputs(const Task& task, const Reference& ref) {
  std::vector<std::string> names = output_names(task, ref.output_count());
  std::vector<OutputInfo> out;
  auto finish = [&](std::vector<OutputInfo> infos) {
    for (size_t i = 0; i < infos.size() && i < task.outputs.size(); ++i)
      if (task.outputs[i].dtype) infos[i].dtype = *task.outputs[i].dtype;
    return infos;
  };
  Dims smallest = task.dims;
  for (const Dims& d : task.check_dims)
    if (task.input_bytes(d) < task.input_bytes(smallest)) smallest = d;
  if (auto shapes = output_shapes(task, ref, smallest)) {
    for (size_t i = 0; i < shapes->size(); ++i)
      out.push_back({names[i], (*shapes)[i].dtype, (*shapes)[i].sizes.size()});
    return finish(out);
  }
  std::optional<Dtype> low;
  for (const InputSpec& in : task.inputs)
    if (in.dtype == Dtype::Float16 || in.dtype == Dtype::BFloat16) low = in.dtype;
  std::vector<torch::Tensor> inputs;
  for (size_t k = 0; k < task.inputs.size(); ++k) {
    torch::Tensor t = generate_cpu(task, k, smallest, 1, 0);
    if (low && (t.scalar_type() == torch::kFloat16 || t.scalar_type() == torch::kBFloat16))
      t = t.to(torch::kFloat32);
    inputs.push_back(t);
  }
  std::vector<torch::Tensor> results = ref.run(inputs);
  for (size_t i = 0; i < results.size(); ++i) {
    auto dtype = from_scalar_type(results[i].scalar_type());
    if (!dtype)
      throw Error(task.id() + ": output " + names[i] + " has a dtype kforge does not support");
    if (low && *dtype == Dtype::Float32) dtype = low;
    out.push_back({names[i], *dtype, static_cast<size_t>(results[i].dim())});
  }
  return finish(out);
}

}  // namespace kforge::tasks
