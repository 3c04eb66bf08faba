// The C++ an exported library holds per op: its plain API (declaration and launch code generated
// from the launch plan, calling kforge_launch.h), its PyTorch op, and its embedded images.
#include <algorithm>
#include <set>
#include <sstream>

#include "generated_text.h"
#include "kforge/common/error.h"
#include "kforge/common/strings.h"
#include "kforge/export/exporter.h"

namespace kforge::exporter {

std::string cpp_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    }
  }
  return out;
}

const std::string& checked_name(const std::string& name, const std::string& who,
                                const std::string& field) {
  if (!is_identifier(name))
    throw Error(who + ": " + field + ": '" + cpp_text(name) +
                "' is not a C++ identifier (letters, digits, _); kforge export writes it as code "
                "and refuses it");
  return name;
}

void check_generated_names(const Op& op) {
  const std::string who = op.task ? op.task->id() : op.op;
  checked_name(op.op, who, "op name");
  for (const compile::TensorInfo& t : op.tensors) checked_name(t.name, who, "tensors");
  if (op.task) {
    for (const auto& [name, value] : op.task->dims) checked_name(name, who, "dims");
    for (const tasks::InputSpec& in : op.task->inputs) checked_name(in.name, who, "inputs");
  }
  for (const auto& [name, value] : op.tunables) checked_name(name, who, "tunables");
  for (const compile::WorkspaceSpec& w : op.plan.workspaces)
    checked_name(w.name, who, "plan.workspace");
}

namespace {

using compile::TensorRole;
using nlohmann::json;

// Task and archive text in generated C++: generated_text.h (one rule).
std::string literal(const std::string& s) {
  return cpp_literal(s);
}

std::string c_type(tasks::Dtype d) {
  switch (d) {
    case tasks::Dtype::Float32:
      return "float";
    case tasks::Dtype::Float64:
      return "double";
    case tasks::Dtype::Int32:
      return "int32_t";
    case tasks::Dtype::Int64:
      return "int64_t";
    case tasks::Dtype::Bool:
      return "bool";
    default:
      return "void";  // float16, bfloat16: the bits, as the kernel reads them
  }
}

std::string aten_type(tasks::Dtype d) {
  switch (d) {
    case tasks::Dtype::Float32:
      return "at::kFloat";
    case tasks::Dtype::Float64:
      return "at::kDouble";
    case tasks::Dtype::Float16:
      return "at::kHalf";
    case tasks::Dtype::BFloat16:
      return "at::kBFloat16";
    case tasks::Dtype::Int32:
      return "at::kInt";
    case tasks::Dtype::Int64:
      return "at::kLong";
    case tasks::Dtype::Bool:
      return "at::kBool";
  }
  return "at::kFloat";
}

std::vector<std::string> dim_names(const Op& op) {
  std::vector<std::string> out;
  for (const auto& [name, value] : op.task->dims) out.push_back(name);
  return out;
}

std::string dims_params(const Op& op) {
  std::string out;
  for (const std::string& d : dim_names(op)) out += ", int64_t " + d;
  return out;
}

// Names in generated code: dims d_X, tunables t_X, device facts f_X.
std::string code(const Expr& e, const Op& op) {
  return e.to_code(
      [&](const std::string& n) {
        if (op.tunables.count(n)) return "t_" + n;
        if (n == "num_sms" || n == "warp_size" || n == "max_shared_per_block") return "f_" + n;
        return "d_" + n;
      },
      "I");
}

// `I`, the expression arithmetic of the op: detail::op_int naming the op and the expression `e`.
const char* kIntLambda =
    "  const char* e = \"\";\n"
    "  auto I = [&](kforge_launch::IntOp o, int64_t a, int64_t b) { return detail::op_int(o, a, b, "
    "op, e); };\n"
    "  (void)I;\n";

// " at B=4, N=7" at run time, for errors.
std::string dims_in_words(const Op& op) {
  std::string out;
  for (const std::string& d : dim_names(op))
    out += out.empty() ? "std::string(\" at " + d + "=\") + std::to_string(d_" + d + ")"
                       : " + \", " + d + "=\" + std::to_string(d_" + d + ")";
  return out.empty() ? "std::string()" : out;
}

const compile::TensorInfo& tensor_named(const Op& op, const std::string& name) {
  if (const compile::TensorInfo* t = op.plan.tensor(name)) return *t;
  throw Error("the plan names a tensor the task lacks: " + name);
}

// C++ for the bytes of tensor `t` at the call's dims (w: its index, for a workspace).
std::string tensor_bytes_code(const Op& op, const compile::TensorInfo& t, size_t w) {
  if (t.role == TensorRole::Workspace) return "int64_t(ws" + std::to_string(w) + "_bytes)";
  const std::vector<Expr>* shape = nullptr;
  if (t.role == TensorRole::Input) {
    for (const tasks::InputSpec& in : op.task->inputs)
      if (in.name == t.name) shape = &in.shape;
  } else {
    size_t k = 0;  // its place among the outputs
    for (const compile::TensorInfo& u : op.tensors) {
      if (u.name == t.name) break;
      if (u.role == TensorRole::Output) ++k;
    }
    if (k < op.output_shapes.size()) shape = &op.output_shapes[k];
  }
  if (!shape)
    throw Error("the shape of tensor '" + t.name +
                "' is not known, so its tensor map "
                "cannot be checked");
  std::string out = "int64_t{" + std::to_string(tasks::dtype_size(t.dtype)) + "}";
  for (const Expr& e : *shape)
    out = "I(kforge_launch::IntOp::Mul, " + out + ", " + code(e, op) + ")";
  return out;
}

// The facts and the workspaces' byte offsets, shared by NAME_workspace_bytes and NAME.
std::string workspace_code(const Op& op) {
  std::ostringstream o;
  o << "  const detail::Loaded& m = detail::load(" << op.op << "_images);\n"
    << "  const int64_t f_num_sms = m.num_sms, f_warp_size = m.warp_size, f_max_shared_per_block = "
       "m.max_shared_per_block;\n"
    << "  (void)f_num_sms, (void)f_warp_size, (void)f_max_shared_per_block;\n";
  for (const auto& [name, value] : op.tunables)
    o << "  constexpr int64_t t_" << name << " = " << value << ";\n  (void)t_" << name << ";\n";
  for (const std::string& d : dim_names(op)) o << "  (void)d_" << d << ";\n";
  o << "  uint64_t ws_end = 0;\n";
  for (size_t i = 0; i < op.plan.workspaces.size(); ++i) {
    const compile::WorkspaceSpec& w = op.plan.workspaces[i];
    o << "  e = " << literal(w.count.text()) << ";\n"
      << "  const int64_t ws" << i << "_count = " << code(w.count, op) << ";\n"
      << "  if (ws" << i << "_count < 1) throw Error(std::string(op) + "
      << literal(": workspace " + w.name + " would hold ") << " + std::to_string(ws" << i
      << "_count) + \" elements\" + " << dims_in_words(op) << ");\n"
      << "  const uint64_t ws" << i << "_offset = ws_end, ws" << i << "_bytes = uint64_t(ws" << i
      << "_count) * " << tasks::dtype_size(w.dtype) << ";\n"
      << "  ws_end = (ws" << i << "_offset + ws" << i << "_bytes + 255) / 256 * 256;\n";
  }
  return o.str();
}

}  // namespace

std::string op_declaration(const Op& op) {
  std::ostringstream o;
  o << "// " << cpp_text(op.task->id() + ": " + op.task->summary) << "\n//  ";
  for (const compile::TensorInfo& t : op.tensors) {
    if (t.role == TensorRole::Workspace) continue;
    o << " " << (t.role == TensorRole::Input ? "in " : "out ") << t.name << " "
      << tasks::dtype_name(t.dtype);
  }
  o << "\n";
  o << "size_t " << op.op << "_workspace_bytes(" << dims_params(op).substr(2) << ");\n";
  o << "void " << op.op << "(";
  for (const compile::TensorInfo& t : op.tensors) {
    if (t.role == TensorRole::Workspace) continue;
    o << (t.role == TensorRole::Input ? "const " : "") << c_type(t.dtype) << "* " << t.name << ", ";
  }
  o << dims_params(op).substr(2) << ", CUstream stream, void* workspace = nullptr);\n";
  return o.str();
}

std::string op_definition(const Op& op, const std::string& ns) {
  std::ostringstream o;
  std::string params;
  for (const compile::TensorInfo& t : op.tensors) {
    if (t.role == TensorRole::Workspace) continue;
    params +=
        (t.role == TensorRole::Input ? "const " : "") + c_type(t.dtype) + "* x_" + t.name + ", ";
  }
  std::string dp = dims_params(op).substr(2);
  for (const std::string& d : dim_names(op)) {
    std::string from = "int64_t " + d;
    dp.replace(dp.find(from), from.size(), "int64_t d_" + d);
  }
  const json* candidate = op.manifest.is_object() && op.manifest.contains("candidate")
                              ? &op.manifest["candidate"]
                              : nullptr;
  std::string identity =
      candidate && candidate->is_object() ? candidate->value("identity", "") : "";
  o << "// " << cpp_text(op.task->id() + ", candidate " + identity.substr(0, 16)) << "\n";
  o << "size_t " << op.op << "_workspace_bytes(" << dp
    << ") {\n  static const char* const op = " << literal(op.op) << ";\n"
    << kIntLambda << workspace_code(op) << "  return size_t(ws_end);\n}\n\n";
  o << "void " << op.op << "(" << params << dp << ", CUstream stream, void* workspace) {\n"
    << "  static const char* const op = " << literal(op.op) << ";\n"
    << kIntLambda;
  for (const std::string& d : dim_names(op))
    o << "  if (d_" << d << " < 1) throw Error(std::string(op) + \": size " << d
      << " is \" + std::to_string(d_" << d << ") + \"; every size must be at least 1\");\n";
  for (const Expr& c : op.task->constraints)
    o << "  e = " << literal(c.text()) << ";\n  if (" << code(c, op)
      << " == 0) throw Error(std::string(op) + " << literal(": the task needs " + c.text()) << " + "
      << dims_in_words(op) << ");\n";
  o << workspace_code(op);
  // The plan's constraints chose its tunables at the timed dims; as in kforge's judge they are not
  // checked per call (the kernel was verified at every check configuration with these tunables,
  // wherever a constraint held or not: docs/export.md).
  for (const Expr& c : op.plan.constraints)
    o << "  // plan constraint (chose the tunables): " << cpp_text(c.text()) << "\n";
  for (const compile::TensorInfo& t : op.tensors)
    if (t.role != TensorRole::Workspace)
      o << "  detail::check_aligned(x_" << t.name << ", 16, op, " << literal(t.name) << ");\n";
  o << "  if (ws_end > 0 && workspace == nullptr) throw Error(std::string(op) + \": needs a "
       "workspace of \" + "
       "std::to_string(ws_end) + \" bytes ("
    << op.op << "_workspace_bytes)\");\n"
    << "  if (ws_end > 0) detail::check_aligned(workspace, 256, op, \"workspace\");\n"
    << "  const uint64_t ws_base = reinterpret_cast<uint64_t>(workspace);\n  (void)ws_base;\n";
  for (size_t i = 0; i < op.plan.workspaces.size(); ++i)
    if (op.plan.workspaces[i].zero_init)
      o << "  detail::check(cuMemsetD8Async(CUdeviceptr(ws_base + ws" << i << "_offset), 0, ws" << i
        << "_bytes, stream), op, " << literal("zeroing workspace " + op.plan.workspaces[i].name)
        << ");\n";
  // Every launch conditional: at dims where none holds the op refuses, as kforge's plan check does.
  const bool all_conditional =
      std::all_of(op.plan.launches.begin(), op.plan.launches.end(),
                  [](const compile::LaunchSpec& l) { return l.when.has_value(); });
  if (all_conditional) o << "  bool launched = false;\n";
  for (size_t k = 0; k < op.plan.launches.size(); ++k) {
    const compile::LaunchSpec& l = op.plan.launches[k];
    size_t kernel = 0;
    for (size_t i = 0; i < op.kernels.size(); ++i)
      if (op.kernels[i].name == l.kernel) kernel = i;
    if (l.when)  // the plan makes this launch only where `when` holds
      o << "  e = " << literal(l.when->text()) << ";\n  if (" << code(*l.when, op) << " != 0) {";
    else
      o << "  {";
    o << "  // launch[" << k << "]: " << cpp_text(l.kernel) << "\n    kforge_launch::Launch l;\n";
    if (all_conditional) o << "    launched = true;\n";
    auto field = [&](const std::string& lhs, const Expr& e) {
      o << "    e = " << literal(e.text()) << ";\n    " << lhs << " = " << code(e, op) << ";\n";
    };
    for (size_t i = 0; i < l.grid.size(); ++i)
      field("l.grid[" + std::to_string(i) + "]", l.grid[i]);
    for (size_t i = 0; i < l.block.size(); ++i)
      field("l.block[" + std::to_string(i) + "]", l.block[i]);
    for (size_t i = 0; i < l.cluster.size(); ++i)
      field("l.cluster[" + std::to_string(i) + "]", l.cluster[i]);
    field("l.shared_bytes", l.shared_bytes);
    if (l.cooperative) o << "    l.cooperative = true;\n";
    o << "    kforge_launch::LimitProblem p = kforge_launch::check_limits(l, m.limits);\n"
      << "    if (!p.ok()) throw Error(std::string(op) + \": launch[" << k
      << "].\" + p.field + \": \" + kforge_launch::place(p.why, " << dims_in_words(op) << "));\n"
      << "    std::vector<kforge_launch::Arg> args;\n";
    const std::vector<compile::ParamType>& params = op.kernels.at(kernel).params;
    for (size_t a = 0; a < l.args.size(); ++a) {
      const compile::ArgSpec& arg = l.args[a];
      if (arg.is_tensor) {
        const compile::TensorInfo& t = tensor_named(op, arg.text);
        size_t w = 0;
        if (t.role == TensorRole::Workspace)
          while (op.plan.workspaces[w].name != arg.text) ++w;
        const std::string pointer = t.role == TensorRole::Workspace
                                        ? "ws_base + ws" + std::to_string(w) + "_offset"
                                        : "reinterpret_cast<uint64_t>(x_" + t.name + ")";
        if (!arg.map) {
          o << "    args.push_back({true, " << pointer << ", 8, {}});\n";
          continue;
        }
        // A tensor map: encoded at launch, checked against the tensor's bytes first.
        const std::string af = "launch[" + std::to_string(k) + "].args[" + std::to_string(a) + "]";
        o << "    {\n      kforge_launch::Arg a{true, " << pointer << ", 8, {}};\n"
          << "      a.map.rank = " << arg.map->dims.size() << ";\n";
        for (size_t d = 0; d < arg.map->dims.size(); ++d) {
          field("a.map.dims[" + std::to_string(d) + "]", arg.map->dims[d]);
          field("a.map.box[" + std::to_string(d) + "]", arg.map->box[d]);
        }
        o << "      a.map.element_bytes = " << tasks::dtype_size(t.dtype) << ";\n"
          << "      a.map.type = static_cast<CUtensorMapDataType>("
          << static_cast<int>(compile::tensor_map_type(t.dtype)) << ");\n"
          << "      a.map.swizzle = " << arg.map->swizzle << ";\n"
          << "      e = " << literal("the bytes of tensor " + t.name) << ";\n"
          << "      std::string why = kforge_launch::check_tensor_map(a.map, "
          << tensor_bytes_code(op, t, w) << ");\n"
          << "      if (!why.empty()) throw Error(std::string(op) + \": " << af
          << ".\" + kforge_launch::place(why, " << dims_in_words(op) << "));\n"
          << "      args.push_back(a);\n    }\n";
      } else {
        o << "    e = " << literal(arg.value.text()) << ";\n    args.push_back({false, uint64_t("
          << code(arg.value, op) << "), "
          << kforge_launch::int_arg_bytes(a < params.size() ? params[a].bits : 64) << ", {}});\n";
      }
    }
    o << "    std::string what;\n"
      << "    detail::check(kforge_launch::launch(kforge_launch::Driver::linked(), m.functions["
      << kernel << "], l, args, stream, &what), op, \"launch[" << k << "]: \" + what);\n  }\n";
  }
  if (all_conditional)
    o << "  if (!launched) throw Error(std::string(op) + \": no launch's `when` holds\" + "
      << dims_in_words(op) << ");\n";
  o << "}\n";
  (void)ns;
  return o.str();
}

std::string torch_schema(const Op& op) {
  std::string in, out;
  size_t outputs = 0;
  for (const compile::TensorInfo& t : op.tensors) {
    if (t.role == TensorRole::Input) in += std::string(in.empty() ? "" : ", ") + "Tensor " + t.name;
    if (t.role == TensorRole::Output) ++outputs;
  }
  out = "Tensor";
  if (outputs > 1) {
    out = "(";
    for (size_t i = 0; i < outputs; ++i) out += std::string(i ? ", " : "") + "Tensor";
    out += ")";
  }
  return op.op + "(" + in + ") -> " + out;
}

std::string torch_definition(const Op& op, const std::string& ns) {
  std::vector<const compile::TensorInfo*> ins, outs;
  for (const compile::TensorInfo& t : op.tensors) {
    if (t.role == TensorRole::Input) ins.push_back(&t);
    if (t.role == TensorRole::Output) outs.push_back(&t);
  }
  std::string ret = outs.size() == 1 ? "at::Tensor" : "std::tuple<" + std::string();
  if (outs.size() > 1) {
    for (size_t i = 0; i < outs.size(); ++i) ret += std::string(i ? ", " : "") + "at::Tensor";
    ret += ">";
  }
  std::ostringstream o;
  if (op.fallback) {  // the task's reference, compiled once, on the inputs' device
    o << ret << " " << op.op << "_cuda(";
    for (size_t i = 0; i < ins.size(); ++i)
      o << (i ? ", " : "") << "const at::Tensor& x_" << ins[i]->name;
    o << ") {\n  static const char* const op = " << literal(op.op) << ";\n";
    for (size_t i = 0; i < ins.size(); ++i)
      o << "  check_input(op, " << literal(ins[i]->name) << ", x_" << ins[i]->name << ", "
        << aten_type(ins[i]->dtype) << ", " << op.task->inputs[i].shape.size() << ", x_"
        << ins[0]->name << ");\n";
    o << "  static const std::shared_ptr<torch::jit::CompilationUnit> unit =\n      "
         "torch::jit::compile("
      << literal(op.manifest.value("reference_torchscript", "")) << ");\n"
      << "  c10::IValue result = unit->get_function(\"forward\")({";
    for (size_t i = 0; i < ins.size(); ++i) o << (i ? ", " : "") << "x_" << ins[i]->name;
    o << "});\n";
    if (outs.size() == 1) {
      o << "  return result.toTensor();\n}\n";
    } else {
      o << "  auto items = result.toTuple()->elements();\n  return {";
      for (size_t k = 0; k < outs.size(); ++k)
        o << (k ? ", " : "") << "items[" << k << "].toTensor()";
      o << "};\n}\n";
    }
    return o.str();
  }
  o << ret << " " << op.op << "_cuda(";
  for (size_t i = 0; i < ins.size(); ++i)
    o << (i ? ", " : "") << "const at::Tensor& x_" << ins[i]->name;
  o << ") {\n  static const char* const op = " << literal(op.op) << ";\n"
    << "  const char* e = \"\";\n"
    << "  auto I = [&](kforge_launch::IntOp o, int64_t a, int64_t b) { return " << ns
    << "::detail::op_int(o, a, b, op, e); };\n"
    << "  (void)I;\n  try {\n";
  // Every input: on a CUDA device (the first input's), its dtype, its rank, contiguous.
  const tasks::Task& task = *op.task;
  for (size_t i = 0; i < ins.size(); ++i)
    o << "    check_input(op, " << literal(ins[i]->name) << ", x_" << ins[i]->name << ", "
      << aten_type(ins[i]->dtype) << ", " << task.inputs[i].shape.size() << ", x_" << ins[0]->name
      << ");\n";
  // Each dim read from the first input axis whose shape entry is that dim alone.
  std::set<std::string> known;
  for (const std::string& d : dim_names(op)) {
    bool found = false;
    for (size_t i = 0; i < task.inputs.size() && !found; ++i)
      for (size_t a = 0; a < task.inputs[i].shape.size() && !found; ++a)
        if (trim(task.inputs[i].shape[a].text()) == d) {
          o << "    const int64_t d_" << d << " = x_" << ins[i]->name << ".size(" << a << ");\n";
          found = true;
        }
    if (!found)
      throw Error("size " + d +
                  " is no input's dimension on its own, so the op cannot read it from its inputs");
  }
  auto shape_code = [&](const std::vector<Expr>& shape) {
    std::string s = "{";
    for (size_t a = 0; a < shape.size(); ++a) {
      s += (a ? ", " : "") + std::string("(e = ") + literal(shape[a].text()) + ", " +
           code(shape[a], op) + ")";
    }
    return s + "}";
  };
  for (size_t i = 0; i < ins.size(); ++i)
    o << "    check_shape(op, " << literal(ins[i]->name) << ", x_" << ins[i]->name << ", "
      << shape_code(task.inputs[i].shape) << ");\n";
  o << "    const c10::cuda::CUDAGuard guard(x_" << ins[0]->name << ".device());\n"
    << "    CUstream stream = reinterpret_cast<CUstream>(c10::cuda::getCurrentCUDAStream(x_"
    << ins[0]->name << ".device().index()).stream());\n";
  for (size_t k = 0; k < outs.size(); ++k)
    o << "    at::Tensor out" << k << " = at::empty(" << shape_code(op.output_shapes.at(k))
      << ", x_" << ins[0]->name << ".options().dtype(" << aten_type(outs[k]->dtype) << "));\n";
  std::string dims_args;
  for (const std::string& d : dim_names(op)) dims_args += ", d_" + d;
  o << "    size_t ws = " << ns << "::" << op.op << "_workspace_bytes(" << dims_args.substr(2)
    << ");\n"
    << "    at::Tensor workspace = at::empty({int64_t(ws)}, x_" << ins[0]->name
    << ".options().dtype(at::kByte));\n"
    << "    " << ns << "::" << op.op << "(";
  for (size_t i = 0; i < ins.size(); ++i)
    o << "static_cast<const " << c_type(ins[i]->dtype) << "*>(x_" << ins[i]->name
      << ".data_ptr()), ";
  for (size_t k = 0; k < outs.size(); ++k)
    o << "static_cast<" << c_type(outs[k]->dtype) << "*>(out" << k << ".data_ptr()), ";
  o << dims_args.substr(2) << ", stream, ws ? workspace.data_ptr() : nullptr);\n";
  if (outs.size() == 1) {
    o << "    return out0;\n";
  } else {
    o << "    return {";
    for (size_t k = 0; k < outs.size(); ++k) o << (k ? ", " : "") << "out" << k;
    o << "};\n";
  }
  o << "  } catch (const " << ns
    << "::Error& err) {\n    TORCH_CHECK(false, err.what());\n  }\n}\n";
  return o.str();
}

}  // namespace kforge::exporter
