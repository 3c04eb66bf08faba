#include "kernelbench/host_code.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>

#include "kforge/common/strings.h"

namespace kforge::compile::kb {
namespace {

using tasks::Dtype;

constexpr int kMaxCallDepth = 8;
constexpr int kMaxIterations = 4096;
constexpr int kMaxMacroDepth = 16;
constexpr size_t kMaxLaunches = 16;

// What an expression of the wrapper is worth, symbolically.
enum class K {
  Void,
  Int,
  Real,
  Tensor,
  Ptr,
  Options,
  Dtype,
  Dim3,
  List,
  Str,
  Stream,
  Status,
  Type,
  Device,
  Ignored,
  Lambda,
  Props,
  Ref,
  Unknown
};

struct Value {
  K k = K::Void;
  SymP i;                      // Int
  std::optional<double> rc;    // Real: a constant...
  SymP num, den;               // ...or the quotient num / den of integers
  bool dbl = false;            // Real: double rather than float
  int tensor = -1;             // Tensor, Ptr
  std::optional<Dtype> dtype;  // Options, Dtype
  std::vector<Value> items;    // List, Dim3 (x, y, z)
  std::string text;            // Str, Type (a C type), Ref (a variable), Unknown (why)
  size_t lb = 0, le = 0;       // Lambda: its body's `{` and `}`
};

Value v_int(SymP s) {
  Value v;
  v.k = K::Int;
  v.i = std::move(s);
  return v;
}
Value v_int(int64_t n) {
  return v_int(sym_const(n));
}
Value v_real(double d, bool dbl) {
  Value v;
  v.k = K::Real;
  v.rc = d;
  v.dbl = dbl;
  return v;
}
Value v_kind(K k, std::string text = "") {
  Value v;
  v.k = k;
  v.text = std::move(text);
  return v;
}
Value v_unknown(const std::string& why) {
  return v_kind(K::Unknown, why);
}
Value v_dtype(K k, std::optional<Dtype> d) {
  Value v;
  v.k = k;
  v.dtype = d;
  return v;
}

std::optional<Dtype> dtype_named(std::string name) {
  for (const char* prefix : {"torch::", "at::", "c10::"})
    if (name.rfind(prefix, 0) == 0) name = name.substr(std::strlen(prefix));
  if (name.rfind("ScalarType::", 0) == 0) name = "k" + name.substr(12);
  static const std::map<std::string, Dtype> names = {
      {"kFloat", Dtype::Float32},   {"kFloat32", Dtype::Float32},   {"kHalf", Dtype::Float16},
      {"kFloat16", Dtype::Float16}, {"kBFloat16", Dtype::BFloat16}, {"kDouble", Dtype::Float64},
      {"kFloat64", Dtype::Float64}, {"kInt", Dtype::Int32},         {"kInt32", Dtype::Int32},
      {"kLong", Dtype::Int64},      {"kInt64", Dtype::Int64},       {"kBool", Dtype::Bool}};
  auto it = names.find(name);
  if (it == names.end()) return std::nullopt;
  return it->second;
}

// C types: their size, and whether they are floating (for casts and declarations).
struct CType {
  size_t size = 0;
  bool real = false, dbl = false, integer = false;
};
std::optional<CType> c_type_named(const std::string& t) {
  static const std::map<std::string, CType> types = {
      {"float", {4, true, false, false}},         {"double", {8, true, true, false}},
      {"half", {2, true, false, false}},          {"__half", {2, true, false, false}},
      {"__nv_bfloat16", {2, true, false, false}}, {"int", {4, false, false, true}},
      {"unsigned", {4, false, false, true}},      {"unsigned int", {4, false, false, true}},
      {"long", {8, false, false, true}},          {"long long", {8, false, false, true}},
      {"unsigned long", {8, false, false, true}}, {"unsigned long long", {8, false, false, true}},
      {"short", {2, false, false, true}},         {"char", {1, false, false, true}},
      {"unsigned char", {1, false, false, true}}, {"bool", {1, false, false, true}},
      {"size_t", {8, false, false, true}},        {"int64_t", {8, false, false, true}},
      {"int32_t", {4, false, false, true}},       {"uint32_t", {4, false, false, true}},
      {"uint64_t", {8, false, false, true}},      {"int8_t", {1, false, false, true}},
      {"uint8_t", {1, false, false, true}},       {"ptrdiff_t", {8, false, false, true}},
      {"float2", {8, false, false, false}},       {"float4", {16, false, false, false}},
      {"double2", {16, false, false, false}},     {"int2", {8, false, false, false}},
      {"int4", {16, false, false, false}},        {"__half2", {4, false, false, false}},
      {"half2", {4, false, false, false}},        {"__nv_bfloat162", {4, false, false, false}}};
  auto it = types.find(t);
  if (it == types.end()) return std::nullopt;
  return it->second;
}

bool type_word(const std::string& w) {
  static const std::set<std::string> words = {"const",        "unsigned",   "signed",
                                              "long",         "short",      "volatile",
                                              "__restrict__", "__restrict", "void"};
  return words.count(w) || c_type_named(w).has_value() || w == "scalar_t" || w == "auto";
}

const std::set<std::string>& check_statements() {
  static const std::set<std::string> names = {"TORCH_CHECK",
                                              "TORCH_CHECK_VALUE",
                                              "TORCH_CHECK_INDEX",
                                              "TORCH_CHECK_TYPE",
                                              "TORCH_INTERNAL_ASSERT",
                                              "TORCH_WARN",
                                              "TORCH_WARN_ONCE",
                                              "AT_ASSERT",
                                              "AT_ASSERTM",
                                              "AT_CHECK",
                                              "assert",
                                              "static_assert",
                                              "C10_CUDA_KERNEL_LAUNCH_CHECK",
                                              "C10_CUDA_CHECK",
                                              "AT_CUDA_CHECK",
                                              "CUDA_CHECK",
                                              "checkCudaErrors",
                                              "gpuErrchk",
                                              "cudaCheckError",
                                              "CUDA_KERNEL_CHECK",
                                              "printf",
                                              "fprintf",
                                              "puts",
                                              "std::printf",
                                              "std::fprintf",
                                              "std::cout",
                                              "std::cerr",
                                              "std::clog",
                                              "cout",
                                              "cerr"};
  return names;
}

// Whether `full` is `name` in a namespace ("ns::k" for "k").
bool in_namespace(const std::string& full, const std::string& name) {
  std::string tail = "::" + name;
  return full.size() > tail.size() &&
         full.compare(full.size() - tail.size(), tail.size(), tail) == 0;
}

bool assignment_op(const std::string& x) {
  return x == "=" || x == "+=" || x == "-=" || x == "*=" || x == "/=" || x == "%=" || x == "<<=" ||
         x == "&=" || x == "|=" || x == "^=";
}

}  // namespace

std::string c_type(Dtype d) {
  switch (d) {
    case Dtype::Float32:
      return "float";
    case Dtype::Float16:
      return "__half";
    case Dtype::BFloat16:
      return "__nv_bfloat16";
    case Dtype::Float64:
      return "double";
    case Dtype::Int32:
      return "int";
    case Dtype::Int64:
      return "int64_t";
    case Dtype::Bool:
      return "bool";
  }
  return "float";
}

// One run of host code: frames of calls, each over its function's body with macros expanded.
class HostRun::Interp {
 public:
  Interp(HostRun& run) : run_(run), parts_(run.parts_) {}

  std::vector<int> call_wrapper(const std::string& name, const std::vector<CallArg>& args) {
    const Function* f = parts_.host_function(name);
    if (!f) {
      for (const Function& g : parts_.functions)
        if ((g.name == name || in_namespace(g.name, name)) && g.body_open) f = &g;
    }
    if (!f)
      throw SourceRefusal(1, "cuda_sources defines no host function '" + name +
                                 "' (the function forward() calls, listed in functions=[...])");
    std::vector<Value> values;
    for (const CallArg& a : args) {
      Value v;
      if (a.kind == CallArg::Kind::Tensor)
        v.k = K::Tensor, v.tensor = a.tensor;
      else if (a.kind == CallArg::Kind::Int)
        v = v_int(a.value);
      else
        v = v_real(a.real, true);
      values.push_back(v);
    }
    Value r = call_function(*f, values, f->line);
    std::vector<int> out;
    std::vector<Value> results = r.k == K::List ? r.items : std::vector<Value>{r};
    for (const Value& v : results) {
      if (v.k != K::Tensor)
        throw SourceRefusal(
            f->line, "host function '" + name + "' does not return a tensor kforge can follow");
      out.push_back(v.tensor);
    }
    return out;
  }

 private:
  struct Frame {
    std::vector<Token> code;
    std::vector<std::map<std::string, Value>> scopes;
    std::optional<Value> result;
    std::string function;
  };
  enum class Flow { Normal, Return, Break, Continue };

  [[noreturn]] void refuse(int line, const std::string& why) { throw SourceRefusal(line, why); }
  [[noreturn]] void refuse_at(size_t i, const std::string& why) { refuse(line(i), why); }
  int line(size_t i) const {
    const auto& t = *T_;
    return t.empty() ? 1 : t[std::min(i, t.size() - 1)].line;
  }
  const Token& tok(size_t i) const { return (*T_)[i]; }
  bool is(size_t i, size_t e, const char* text) const { return i < e && tok(i).text == text; }
  // Past the template arguments `<...>` that start at `i` (nested ones included), before `e`.
  size_t past_angles(size_t i, size_t e) const {
    int angle = 0;
    do {
      if (tok(i).text == "<") ++angle;
      if (tok(i).text == ">") --angle;
      ++i;
    } while (i < e && angle > 0);
    return i;
  }
  void expect(size_t& i, size_t e, const char* text) {
    if (!is(i, e, text))
      refuse_at(i, std::string("expected '") + text + "' in '" +
                       spelled(*T_, i, std::min(e, i + 8)) +
                       "' (kforge reads a subset of C++ in host code)");
    ++i;
  }
  std::string code(size_t b, size_t e) const { return spelled(*T_, b, e); }

  // ---- macros --------------------------------------------------------------------------------

  std::vector<Token> expand(const std::vector<Token>& in, std::set<std::string> hide, int depth) {
    std::vector<Token> out;
    for (size_t i = 0; i < in.size(); ++i) {
      const Token& t = in[i];
      auto m = parts_.macros.find(t.text);
      if (t.kind != Tok::Identifier || m == parts_.macros.end() || hide.count(t.text) ||
          depth >= kMaxMacroDepth) {
        out.push_back(t);
        continue;
      }
      std::vector<Token> body = m->second.body;
      if (m->second.function_like) {
        if (i + 1 >= in.size() || in[i + 1].text != "(") {
          out.push_back(t);
          continue;
        }
        size_t close = matching(in, i + 1, in.size());
        body = substitute(m->second, arguments(in, i + 2, close), hide, depth);
        i = close;
      }
      for (Token& b : body) b.line = t.line, b.begin = t.begin, b.end = t.end;
      std::set<std::string> inner = hide;
      inner.insert(t.text);
      std::vector<Token> x = expand(body, inner, depth + 1);
      out.insert(out.end(), x.begin(), x.end());
    }
    return out;
  }

  static std::vector<std::vector<Token>> arguments(const std::vector<Token>& in, size_t b,
                                                   size_t e) {
    std::vector<std::vector<Token>> args(1);
    int depth = 0;
    for (size_t i = b; i < e; ++i) {
      const std::string& x = in[i].text;
      if (x == "(" || x == "[" || x == "{") ++depth;
      if (x == ")" || x == "]" || x == "}") --depth;
      if (x == "," && depth == 0)
        args.emplace_back();
      else
        args.back().push_back(in[i]);
    }
    if (args.size() == 1 && args[0].empty()) args.clear();
    return args;
  }

  std::vector<Token> substitute(const Macro& m, const std::vector<std::vector<Token>>& args,
                                const std::set<std::string>& hide, int depth) {
    std::vector<Token> out;
    auto param = [&](const std::string& name) -> int {
      for (size_t k = 0; k < m.params.size(); ++k)
        if (m.params[k] == name && m.params[k] != "...") return static_cast<int>(k);
      return -1;
    };
    for (size_t k = 0; k < m.body.size(); ++k) {
      const Token& b = m.body[k];
      if (b.text == "#" && k + 1 < m.body.size() && param(m.body[k + 1].text) >= 0) {
        int p = param(m.body[++k].text);
        const auto& a = static_cast<size_t>(p) < args.size() ? args[p] : std::vector<Token>{};
        out.push_back({Tok::String, "\"" + spelled(a, 0, a.size(), 200) + "\"", b.line, 0, 0});
      } else if (b.text == "##" && !out.empty() && k + 1 < m.body.size()) {
        int p = param(m.body[k + 1].text);
        std::string next = p >= 0 && static_cast<size_t>(p) < args.size() && !args[p].empty()
                               ? args[p][0].text
                               : m.body[k + 1].text;
        out.back().text += next;
        ++k;
      } else if (int p = param(b.text); p >= 0) {
        if (static_cast<size_t>(p) < args.size()) {
          std::vector<Token> a = expand(args[p], hide, depth + 1);
          out.insert(out.end(), a.begin(), a.end());
        }
      } else if (b.text == "__VA_ARGS__") {
        for (size_t a = m.params.size() ? m.params.size() - 1 : 0; a < args.size(); ++a) {
          if (a + 1 > m.params.size()) out.push_back({Tok::Punct, ",", b.line, 0, 0});
          out.insert(out.end(), args[a].begin(), args[a].end());
        }
      } else {
        out.push_back(b);
      }
    }
    return out;
  }

  // ---- calls ---------------------------------------------------------------------------------

  Value call_function(const Function& f, const std::vector<Value>& args, int call_line) {
    if (depth_ >= kMaxCallDepth)
      refuse(call_line,
             "host functions call each other more than " + std::to_string(kMaxCallDepth) + " deep");
    if (args.size() != f.params.size())
      refuse(call_line, "'" + f.name + "' takes " + std::to_string(f.params.size()) +
                            " argument(s) and is given " + std::to_string(args.size()));
    Frame frame;
    frame.function = f.name;
    std::vector<Token> body(parts_.tokens.begin() + static_cast<long>(*f.body_open) + 1,
                            parts_.tokens.begin() + static_cast<long>(f.body_close));
    frame.code = expand(body, {}, 0);
    frame.scopes.emplace_back();
    for (size_t k = 0; k < args.size(); ++k)
      frame.scopes.back()[f.params[k].name] =
          converted(f.params[k].type, args[k], f.line, f.params[k].name);
    Frame* saved_frame = frame_;
    const std::vector<Token>* saved_tokens = T_;
    frame_ = &frame;
    T_ = &frame.code;
    ++depth_;
    block(0, frame.code.size());
    --depth_;
    frame_ = saved_frame;
    T_ = saved_tokens;
    return frame.result.value_or(Value{});
  }

  // A value as a declared C++ type holds it (ints truncate reals, dim3 from an int, ...).
  Value converted(const std::string& type, const Value& v, int at, const std::string& name) {
    std::string t = type;
    for (const char* w : {"const ", "constexpr ", "static ", "volatile ", "&", "inline "}) {
      size_t p;
      while ((p = t.find(w)) != std::string::npos) t.erase(p, std::strlen(w));
    }
    t = trim(t);
    if (t == "scalar_t") {
      if (const Value* s = lookup_local("scalar_t")) t = s->text;
    }
    if (v.k == K::Unknown || t == "auto" || t.empty()) return v;
    if (t.find("Tensor") != std::string::npos && t.find("Options") == std::string::npos) {
      if (v.k != K::Tensor) refuse(at, "'" + name + "' is a tensor, and is given something else");
      return v;
    }
    if (t.find('*') != std::string::npos) return v;
    if (t == "dim3") {
      if (v.k == K::Dim3) return v;
      if (v.k == K::Int) return dim3(v.i, sym_const(1), sym_const(1));
      refuse(at, "'" + name + "' is a dim3, and is given something else");
    }
    if (auto c = c_type_named(t)) {
      if (c->integer) return as_int(v, at);
      if (c->real) {
        Value r = as_real(v, at);
        r.dbl = c->dbl;
        return r;
      }
    }
    if (t.find("TensorOptions") != std::string::npos && v.k == K::Dtype)
      return v_dtype(K::Options, v.dtype);
    return v;
  }

  Value dim3(SymP x, SymP y, SymP z) {
    Value v;
    v.k = K::Dim3;
    v.items = {v_int(std::move(x)), v_int(std::move(y)), v_int(std::move(z))};
    return v;
  }

  Value as_int(const Value& v, int at) {
    if (v.k == K::Int || v.k == K::Unknown) return v;
    if (v.k == K::Real) {
      if (v.rc) return v_int(static_cast<int64_t>(*v.rc));
      if (v.num) return v_int(sym_div(v.num, v.den));
      return v_unknown("a float kforge cannot follow");
    }
    if (v.k == K::Dtype || v.k == K::Status) return v_unknown("not an integer");
    refuse(at, "an integer is expected here");
  }

  Value as_real(const Value& v, int at) {
    if (v.k == K::Real || v.k == K::Unknown) return v;
    if (v.k == K::Int) {
      Value r;
      r.k = K::Real;
      if (auto c = sym_constant(v.i))
        r.rc = static_cast<double>(*c);
      else
        r.num = v.i, r.den = sym_const(1);
      return r;
    }
    refuse(at, "a number is expected here");
  }

  // ---- statements ----------------------------------------------------------------------------

  Flow block(size_t b, size_t e) {
    for (size_t i = b; i < e;) {
      size_t next = statement_end(i, e);
      Flow f = statement(i, next, e);
      if (f != Flow::Normal) return f;
      i = next;
    }
    return Flow::Normal;
  }

  // The index after the statement that starts at `i`.
  size_t statement_end(size_t i, size_t e) {
    const std::string& x = tok(i).text;
    if (tok(i).kind == Tok::Directive) return i + 1;
    if (x == "{") return matching(*T_, i, e) + 1;
    if (x == "if" || x == "while" || x == "for" || x == "switch") {
      if (!is(i + 1, e, "(")) refuse_at(i, "'" + x + "' without a condition");
      size_t after = statement_end(matching(*T_, i + 1, e) + 1, e);
      if (x == "if" && is(after, e, "else")) after = statement_end(after + 1, e);
      return after;
    }
    if (x == "do") {
      size_t after = statement_end(i + 1, e);
      if (!is(after, e, "while") || !is(after + 1, e, "("))
        refuse_at(i, "'do' without 'while (...)'");
      size_t close = matching(*T_, after + 1, e);
      return is(close + 1, e, ";") ? close + 2 : close + 1;
    }
    for (size_t j = i; j < e; ++j) {
      const std::string& y = tok(j).text;
      if (y == "(" || y == "[" || y == "{")
        j = matching(*T_, j, e);
      else if (y == ";")
        return j + 1;
    }
    refuse_at(i, "a statement without ';' ('" + code(i, std::min(e, i + 8)) + "')");
  }

  Flow statement(size_t i, size_t end, size_t e) {
    try {
      return run_statement(i, end, e);
    } catch (const ExprError& err) {
      refuse_at(i, err.what());
    }
  }

  Flow run_statement(size_t i, size_t end, size_t e) {
    const Token& t = tok(i);
    const std::string& x = t.text;
    if (t.kind == Tok::Directive || x == ";") return Flow::Normal;
    if (x == "{") {
      frame_->scopes.emplace_back();
      Flow f = block(i + 1, end - 1);
      frame_->scopes.pop_back();
      return f;
    }
    if (x == "return") {
      size_t j = i + 1;
      frame_->result = j + 1 < end ? expr(j, end - 1) : Value{};
      return Flow::Return;
    }
    if (x == "if") return if_statement(i, end, e);
    if (x == "for" || x == "while" || x == "do") return loop(i, end, e);
    if (x == "break") return Flow::Break;
    if (x == "continue") return Flow::Continue;
    if (x == "switch" || x == "goto" || x == "try")
      refuse_at(i, "'" + x +
                       "' in host code; kforge follows straight-line code, loops of known "
                       "count and conditions it can evaluate");
    if (x == "throw") refuse_at(i, "the wrapper throws unconditionally ('" + code(i, end) + "')");
    if (x == "using" || x == "typedef") return alias(i, end);
    std::string head = qualified_at(i, end);
    if (check_statements().count(head)) return Flow::Normal;
    if (head.rfind("AT_DISPATCH_", 0) == 0) return dispatch(i, end, head);
    for (size_t j = i; j < end; ++j) {
      if (tok(j).text == "(" || tok(j).text == "{" || tok(j).text == "[") {
        if (tok(j).text == "[" || tok(j).text == "{") {
          j = matching(*T_, j, end);
          continue;
        }
        break;  // a launch's name comes before any parenthesis
      }
      if (tok(j).text == "<<<") return launch(i, j, end);
    }
    if (declaration_at(i, end)) return declare(i, end);
    return expression_statement(i, end);
  }

  std::string qualified_at(size_t i, size_t e) {
    std::string name;
    size_t j = i;
    while (j < e && (tok(j).kind == Tok::Identifier || tok(j).text == "::")) name += tok(j++).text;
    return name;
  }

  // `using scalar_t = float;`, `typedef float T;`: type aliases; `using namespace` is ignored.
  Flow alias(size_t i, size_t end) {
    if (is(i + 1, end, "namespace")) return Flow::Normal;
    std::string name, type;
    if (tok(i).text == "using" && is(i + 2, end, "=")) {
      name = tok(i + 1).text;
      type = code(i + 3, end - 1);
    } else if (tok(i).text == "typedef" && end >= i + 4) {
      name = tok(end - 2).text;
      type = code(i + 1, end - 2);
    }
    if (type == "scalar_t")
      if (const Value* s = lookup_local("scalar_t")) type = s->text;
    frame_->scopes.back()[name] = v_kind(K::Type, type);
    return Flow::Normal;
  }

  Flow if_statement(size_t i, size_t end, size_t e) {
    size_t close = matching(*T_, i + 1, e);
    size_t j = i + 2;
    Value c = expr(j, close);
    size_t then_end = statement_end(close + 1, e);
    bool has_else = then_end < end && tok(then_end).text == "else";
    std::optional<bool> taken = truth(c, i);
    if (taken) {
      if (*taken) return statement(close + 1, then_end, e);
      if (has_else) return statement(then_end + 1, end, e);
      return Flow::Normal;
    }
    for (auto [b, f] : {std::pair{close + 1, then_end}, std::pair{then_end + 1, end}}) {
      if (b >= f || (b == then_end + 1 && !has_else)) continue;
      if (std::string effect = effects(b, f); !effect.empty())
        refuse_at(i, "'if (" + code(i + 2, close) + ")' decides " + effect +
                         " on a condition kforge cannot evaluate for the task's sizes (" +
                         printable(c.k == K::Unknown ? c.text : "it depends on the sizes") +
                         "); a plan's launches are the same at every size");
    }
    return Flow::Normal;  // a branch that only reports errors
  }

  // What the statements in [b, e) would change that kforge must know: "" when nothing (error
  // reporting: messages, throws, checks).
  std::string effects(size_t b, size_t e) {
    for (size_t j = b; j < e; ++j) {
      const std::string& x = tok(j).text;
      if (x == "<<<") return "a kernel launch";
      if (x == "return" && j + 1 < e && tok(j + 1).text != ";") return "the result";
      if (assignment_op(x) && j > b && tok(j - 1).kind == Tok::Identifier &&
          lookup_local(tok(j - 1).text))
        return "the value of '" + tok(j - 1).text + "'";
      if ((x == "++" || x == "--") && ((j + 1 < e && lookup_local(tok(j + 1).text)) ||
                                       (j > b && lookup_local(tok(j - 1).text))))
        return "a variable's value";
      if (tok(j).kind == Tok::Identifier && j + 1 < e && tok(j + 1).text == "(" &&
          parts_.host_function(tok(j).text))
        return "a call of '" + x + "'";
      if (x == "zero_" || x == "fill_") return "a tensor's values";
    }
    return "";
  }

  // A condition's value: known, or the same at every dims configuration of the task.
  std::optional<bool> truth(const Value& c, size_t at) {
    SymP s;
    if (c.k == K::Int)
      s = c.i;
    else if (c.k == K::Real && c.rc)
      return *c.rc != 0;
    else if (c.k == K::Ptr || c.k == K::Tensor)
      return true;
    else
      return std::nullopt;
    if (auto k = sym_constant(s)) return *k != 0;
    std::optional<bool> all;
    try {
      Expr ex = Expr::parse(sym_text(s));
      for (const tasks::Dims& d : run_.configs_) {
        bool v = ex.eval_bool(d);
        if (all && *all != v) return std::nullopt;
        all = v;
      }
    } catch (const Error&) {
      return std::nullopt;
    }
    if (all)
      run_.notes.push_back({line(at), "'" + sym_text(s) + "' is " + (*all ? "true" : "false") +
                                          " at every size the task checks, so that branch is "
                                          "taken"});
    return all;
  }

  Flow loop(size_t i, size_t end, size_t e) {
    const std::string kind = tok(i).text;
    size_t init_b = 0, init_e = 0, cond_b, cond_e, step_b = 0, step_e = 0, body_b, body_e;
    if (kind == "do") {
      body_b = i + 1;
      body_e = statement_end(i + 1, e);
      cond_b = body_e + 2;
      cond_e = matching(*T_, body_e + 1, e);
    } else {
      size_t close = matching(*T_, i + 1, e);
      body_b = close + 1;
      body_e = end;
      cond_b = i + 2;
      cond_e = close;
      if (kind == "for") {
        init_b = i + 2;
        init_e = init_b;
        while (init_e < close && tok(init_e).text != ";") ++init_e;
        cond_b = init_e + 1;
        cond_e = cond_b;
        while (cond_e < close && tok(cond_e).text != ";") ++cond_e;
        step_b = cond_e + 1;
        step_e = close;
        if (init_e >= close || cond_e >= close)
          refuse_at(i, "a for loop kforge cannot read ('" + code(i, close + 1) + "')");
      }
    }
    frame_->scopes.emplace_back();
    if (init_e > init_b) statement(init_b, init_e + 1, init_e + 1);
    Flow out = Flow::Normal;
    for (int n = 0;; ++n) {
      if (n >= kMaxIterations) refuse_at(i, "a loop of more than 4096 iterations in host code");
      if (kind != "do" || n > 0) {
        size_t j = cond_b;
        std::optional<bool> go = cond_e > cond_b ? constant_truth(expr(j, cond_e)) : true;
        if (!go) {
          std::string effect = effects(body_b, body_e);
          if (effect.empty()) break;
          refuse_at(i, "a loop whose count depends on the sizes ('" + code(i, body_b) +
                           "') repeats " + effect +
                           "; a plan's launches are a fixed list (write the loop inside a kernel)");
        }
        if (!*go) break;
      }
      Flow f = statement(body_b, body_e, body_e);
      if (f == Flow::Return) {
        out = f;
        break;
      }
      if (f == Flow::Break) break;
      if (step_e > step_b) expression_statement(step_b, step_e + 1);
    }
    frame_->scopes.pop_back();
    return out;
  }

  std::optional<bool> constant_truth(const Value& c) {
    if (c.k == K::Int)
      if (auto k = sym_constant(c.i)) return *k != 0;
    if (c.k == K::Real && c.rc) return *c.rc != 0;
    return std::nullopt;
  }

  // Whether [i, end) declares variables: a type, then a name followed by = ( { ; , or [.
  bool declaration_at(size_t i, size_t end) {
    static const std::set<std::string> not_types = {"return", "throw", "delete",  "new",
                                                    "goto",   "case",  "default", "else"};
    if (not_types.count(tok(i).text) || tok(i).kind != Tok::Identifier) return false;
    for (size_t j = i; j < end; ++j) {
      const std::string& x = tok(j).text;
      if (x == "=" || x == "(" || x == "{" || x == ";" || x == "," || x == "[") {
        if (j < i + 2 || tok(j - 1).kind != Tok::Identifier) return false;
        const Token& before = tok(j - 2);
        return before.kind == Tok::Identifier || before.text == ">" || before.text == "*" ||
               before.text == "&" || before.text == "&&";
      }
      if (x == "." || x == "->" || assignment_op(x) || x == "<<<" || x == "++" || x == "--")
        return false;
    }
    return false;
  }

  Flow declare(size_t i, size_t end) {
    // The type: everything before the first declarator's name.
    size_t name_at = i;
    for (size_t j = i; j < end; ++j) {
      const std::string& x = tok(j).text;
      if (x == "=" || x == "(" || x == "{" || x == ";" || x == "," || x == "[") {
        name_at = j - 1;
        break;
      }
    }
    std::string type = code(i, name_at);
    size_t j = name_at;
    while (j < end) {
      if (tok(j).kind != Tok::Identifier)
        refuse_at(j, "a declaration kforge cannot read ('" + code(i, end) + "')");
      std::string name = tok(j).text;
      std::string decl_type = type;
      ++j;
      Value v;
      if (is(j, end, "[")) refuse_at(j, "an array in host code ('" + code(i, end) + "')");
      if (is(j, end, "=")) {
        ++j;
        v = expr(j, end - 1);
      } else if (is(j, end, "(") || is(j, end, "{")) {
        size_t close = matching(*T_, j, end);
        std::vector<Value> args = list(j + 1, close);
        j = close + 1;
        v = construct(decl_type, args, line(j - 1));
      } else {
        v = construct(decl_type, {}, line(j));
      }
      v = converted(decl_type, v, line(j - 1), name);
      if (v.k == K::Tensor && v.tensor >= 0 && run_.tensors[v.tensor].name.empty())
        run_.tensors[v.tensor].name = name;
      frame_->scopes.back()[name] = v;
      if (is(j, end, ",")) {
        ++j;
        // `int a = 1, *p = ...`: the pointer marks belong to the declarator
        while (j < end && (tok(j).text == "*" || tok(j).text == "&")) ++j;
        continue;
      }
      break;
    }
    return Flow::Normal;
  }

  // `T name(args)`, `T name{args}`, `T name;`.
  Value construct(const std::string& type, const std::vector<Value>& args, int at) {
    if (type.find("dim3") != std::string::npos) {
      std::vector<SymP> d = {sym_const(1), sym_const(1), sym_const(1)};
      if (args.size() > 3) refuse(at, "dim3 with more than 3 sizes");
      for (size_t k = 0; k < args.size(); ++k) d[k] = as_int(args[k], at).i;
      for (size_t k = 0; k < args.size(); ++k)
        if (!d[k]) refuse(at, "a dim3 size kforge cannot follow (" + args[k].text + ")");
      return dim3(d[0], d[1], d[2]);
    }
    if (type.find("Guard") != std::string::npos) return v_kind(K::Ignored);
    if (type.find("cudaDeviceProp") != std::string::npos) return v_kind(K::Props);
    if (type.find("cudaStream_t") != std::string::npos && args.empty())
      return v_kind(K::Unknown, "a stream the wrapper creates");
    if (args.size() == 1) return args[0];
    if (args.empty()) {
      if (type.find("vector") != std::string::npos) return v_kind(K::List);
      return v_unknown("'" + type + "' declared without a value");
    }
    if (type.find("vector") != std::string::npos || type.find("IntArrayRef") != std::string::npos) {
      Value l;
      l.k = K::List;
      l.items = args;
      return l;
    }
    return v_unknown("a '" + type + "' made from several values");
  }

  // [i, end): the statement with its `;` (a for loop's step: with its `)`).
  Flow expression_statement(size_t i, size_t end) {
    size_t e = end - 1;
    if (is(i, e, "++") || is(i, e, "--")) {
      assign(i + 1, e, tok(i).text == "++" ? "+=" : "-=", v_int(1));
      return Flow::Normal;
    }
    if (e >= i + 2 && (tok(e - 1).text == "++" || tok(e - 1).text == "--")) {
      assign(i, e - 1, tok(e - 1).text == "++" ? "+=" : "-=", v_int(1));
      return Flow::Normal;
    }
    for (size_t j = i; j < e; ++j) {
      const std::string& x = tok(j).text;
      if (x == "(" || x == "[" || x == "{") {
        j = matching(*T_, j, e);
        continue;
      }
      if (assignment_op(x)) {
        size_t k = j + 1;
        Value v = expr(k, e);
        assign(i, j, x, v);
        return Flow::Normal;
      }
    }
    size_t k = i;
    expr(k, e);
    if (k < e) refuse_at(k, "host code kforge cannot read ('" + code(i, e) + "')");
    return Flow::Normal;
  }

  // `name op= v` and `name.x = v` (a dim3's size).
  void assign(size_t b, size_t e, const std::string& op, Value v) {
    if (b >= e || tok(b).kind != Tok::Identifier)
      refuse_at(b, "an assignment kforge cannot follow ('" + code(b, e) + "')");
    Value* target = lookup_local(tok(b).text);
    if (!target)
      refuse_at(b, "'" + tok(b).text + "' is assigned but not declared where kforge can see it");
    if (e == b + 3 && (tok(b + 1).text == "." || tok(b + 1).text == "->") && target->k == K::Dim3) {
      int axis = tok(b + 2).text == "x"   ? 0
                 : tok(b + 2).text == "y" ? 1
                 : tok(b + 2).text == "z" ? 2
                                          : -1;
      if (axis < 0) refuse_at(b, "a dim3 has x, y and z");
      Value& slot = target->items[static_cast<size_t>(axis)];
      slot = op == "=" ? as_int(v, line(b)) : binary(op.substr(0, op.size() - 1), slot, v, b);
      return;
    }
    if (e != b + 1)
      refuse_at(b, "host code writes '" + code(b, e) +
                       "'; kforge follows assignments to local "
                       "variables only (a tensor's values are written by kernels)");
    Value next = op == "=" ? v : binary(op.substr(0, op.size() - 1), *target, v, b);
    if (target->k == K::Int && next.k == K::Real) next = as_int(next, line(b));
    *target = next;
  }

  // ---- launches ------------------------------------------------------------------------------

  Flow launch(size_t i, size_t open, size_t end) {
    std::string name;
    size_t j = i;
    while (j < open && (tok(j).kind == Tok::Identifier || tok(j).text == "::"))
      name += tok(j++).text;
    const Function* k = kernel_named(name);
    if (!k)
      refuse_at(i, "launches '" + name + "', which is not a __global__ function of cuda_sources");
    HostLaunch l;
    l.kernel = k;
    l.name = k->name;
    l.line = line(i);
    if (j < open) {
      if (tok(j).text != "<" || tok(open - 1).text != ">")
        refuse_at(j, "a launch kforge cannot read ('" + code(i, open) + "')");
      l.name += "<" + template_args(j + 1, open - 1) + ">";
    }
    size_t cfg_end = open + 1;
    while (cfg_end < end && tok(cfg_end).text != ">>>") {
      if (tok(cfg_end).text == "(" || tok(cfg_end).text == "{")
        cfg_end = matching(*T_, cfg_end, end);
      ++cfg_end;
    }
    std::vector<Value> cfg = list(open + 1, cfg_end);
    if (cfg.size() < 2 || cfg.size() > 4)
      refuse_at(open,
                "a launch configuration has 2 to 4 parts (grid, block, shared bytes, "
                "stream)");
    l.grid = dims(cfg[0], "grid", i);
    l.block = dims(cfg[1], "block", i);
    l.shared_bytes = cfg.size() > 2 ? as_int(cfg[2], l.line).i : sym_const(0);
    if (!l.shared_bytes)
      refuse_at(i, "dynamic shared memory kforge cannot follow (" + cfg[2].text + ")");
    if (cfg.size() > 3) stream(cfg[3], i);
    if (!is(cfg_end + 1, end, "(")) refuse_at(cfg_end, "a launch without its arguments");
    size_t close = matching(*T_, cfg_end + 1, end);
    std::vector<size_t> starts;
    std::vector<Value> args = list(cfg_end + 2, close, &starts);
    starts.push_back(close + 1);
    for (size_t a = 0; a < args.size(); ++a)
      l.args.push_back(launch_arg(args[a], code(starts[a], starts[a + 1] - 1), l.line));
    if (run_.launches.size() >= kMaxLaunches)
      refuse_at(i, "more than 16 kernel launches: a kforge plan has at most 16");
    run_.launches.push_back(std::move(l));
    return Flow::Normal;
  }

  const Function* kernel_named(const std::string& name) {
    if (const Function* k = parts_.kernel(name)) return k;
    for (const Function& f : parts_.functions)
      if (f.kernel && in_namespace(f.name, name)) return &f;
    return nullptr;
  }

  std::string template_args(size_t b, size_t e) {
    std::string out;
    int angle = 0;
    size_t start = b;
    for (size_t j = b; j <= e; ++j) {
      if (j < e && tok(j).text == "<") ++angle;
      if (j < e && tok(j).text == ">") --angle;
      if (j < e && (tok(j).text == "(" || tok(j).text == "[")) j = matching(*T_, j, e);
      if (j == e || (angle == 0 && tok(j).text == ",")) {
        out += (out.empty() ? "" : ", ") + template_arg(start, j);
        start = j + 1;
      }
    }
    return out;
  }

  std::string template_arg(size_t b, size_t e) {
    std::string type = code(b, e);
    if (type == "scalar_t")
      if (const Value* s = lookup_local("scalar_t")) return s->text;
    if (const Value* s = e == b + 1 ? lookup_local(type) : nullptr; s && s->k == K::Type)
      return s->text;
    bool is_type = true;
    for (size_t j = b; j < e; ++j)
      if (!type_word(tok(j).text) && tok(j).text != "*" && tok(j).text != "::") is_type = false;
    if (is_type) return type;
    size_t j = b;
    Value v = as_int(expr(j, e), line(b));
    auto c = v.k == K::Int ? sym_constant(v.i) : std::nullopt;
    if (!c)
      refuse_at(b, "the template argument '" + type + "' is not a constant kforge can evaluate");
    return std::to_string(*c);
  }

  std::vector<SymP> dims(const Value& v, const char* what, size_t at) {
    if (v.k == K::Dim3) {
      std::vector<SymP> d;
      for (const Value& x : v.items) d.push_back(x.i);
      while (d.size() > 1 && sym_constant(d.back()) == 1) d.pop_back();
      return d;
    }
    Value n = as_int(v, line(at));
    if (n.k != K::Int)
      refuse_at(at, std::string("the launch's ") + what + " is " +
                        (n.k == K::Unknown ? n.text : "not an integer or dim3") +
                        "; a plan computes it from the sizes with integer arithmetic");
    return {n.i};
  }

  void stream(const Value& v, size_t at) {
    if (v.k == K::Stream) return;
    if (v.k == K::Int && sym_constant(v.i) == 0) return;
    refuse_at(at, "the launch runs on a stream of the wrapper's own (" +
                      (v.k == K::Unknown ? v.text : std::string("not the current stream")) +
                      "); a plan's launches run in order on one stream");
  }

  LaunchArg launch_arg(const Value& v, const std::string& text, int at) {
    LaunchArg a;
    a.text = text;
    if (v.k == K::Ptr || v.k == K::Tensor) {
      if (v.k == K::Tensor)
        refuse(at, "the kernel is passed the tensor '" + text +
                       "' itself (a PackedTensorAccessor "
                       "or similar); kforge passes raw pointers (data_ptr<T>())");
      a.kind = LaunchArg::Kind::Tensor;
      a.tensor = root(v.tensor);
      return a;
    }
    if (v.k == K::Int) {
      a.kind = LaunchArg::Kind::Int;
      a.value = v.i;
      return a;
    }
    if (v.k == K::Real && v.rc) {
      a.kind = LaunchArg::Kind::Real;
      a.real = *v.rc;
      a.is_double = v.dbl;
      return a;
    }
    if (v.k == K::Real)
      refuse(at, "the kernel's argument '" + text +
                     "' is a float computed from the sizes; a plan "
                     "passes integers only (pass the integer and compute the float in the kernel)");
    refuse(at, "the kernel's argument '" + text + "' is " +
                   (v.k == K::Unknown ? v.text : std::string("not a pointer or a number")) +
                   "; kforge passes tensors' data pointers and integers");
  }

  int root(int slot) const {
    while (run_.tensors[slot].base >= 0) slot = run_.tensors[slot].base;
    return slot;
  }

  // AT_DISPATCH_*(type, "name", [&] { ... }): the body once, with scalar_t the tensor's C type.
  Flow dispatch(size_t i, size_t end, const std::string& macro) {
    size_t open = i + 1;
    while (open < end && tok(open).text != "(") ++open;
    size_t close = matching(*T_, open, end);
    std::vector<size_t> starts;
    std::vector<Value> args = list(open + 1, close, &starts);
    if (args.size() < 3 || args.back().k != K::Lambda)
      refuse_at(i, macro + " kforge cannot read (it expects the type, a name and a lambda)");
    Value type = args[args.size() - 3];
    if (type.k != K::Dtype || !type.dtype)
      refuse_at(i, macro + " dispatches on something other than a tensor's scalar type");
    std::set<Dtype> cases;
    if (macro.find("FLOATING") != std::string::npos && macro.find("REDUCED") == std::string::npos)
      cases.insert({Dtype::Float32, Dtype::Float64});
    if (macro.find("ALL_TYPES") != std::string::npos || macro.find("INTEGRAL") != std::string::npos)
      cases.insert({Dtype::Int32, Dtype::Int64});
    if (macro.find("ALL_TYPES") != std::string::npos)
      cases.insert({Dtype::Float32, Dtype::Float64});
    if (macro.find("HALF") != std::string::npos) cases.insert(Dtype::Float16);
    if (macro.find("REDUCED") != std::string::npos) cases.insert({Dtype::Float16, Dtype::BFloat16});
    for (size_t k = 0; k + 3 < args.size(); ++k)
      if (args[k].k == K::Dtype && args[k].dtype) cases.insert(*args[k].dtype);
    if (!cases.count(*type.dtype))
      refuse_at(i, macro + " has no case for " + std::string(tasks::dtype_name(*type.dtype)) +
                       ", the task's dtype (PyTorch would raise)");
    const Value& lambda = args.back();
    frame_->scopes.emplace_back();
    frame_->scopes.back()["scalar_t"] = v_kind(K::Type, c_type(*type.dtype));
    Flow f = block(lambda.lb + 1, lambda.le);
    frame_->scopes.pop_back();
    return f == Flow::Return ? Flow::Normal : f;  // the lambda's return ends the lambda only
  }

  // ---- expressions ---------------------------------------------------------------------------

  // Comma-separated expressions in [b, e); `starts` gets where each begins.
  std::vector<Value> list(size_t b, size_t e, std::vector<size_t>* starts = nullptr) {
    std::vector<Value> out;
    size_t j = b;
    while (j < e) {
      if (starts) starts->push_back(j);
      out.push_back(expr(j, e));
      if (j < e) {
        if (tok(j).text != ",") refuse_at(j, "host code kforge cannot read ('" + code(b, e) + "')");
        ++j;
      }
    }
    return out;
  }

  struct BinOp {
    std::string op;
    int prec = 0;
    size_t width = 1;
  };

  std::optional<BinOp> binary_op(size_t j, size_t e) {
    if (j >= e) return std::nullopt;
    const std::string& x = tok(j).text;
    if (x == ">" && j + 1 < e && tok(j + 1).text == ">" && tok(j).end == tok(j + 1).begin &&
        tok(j).end != 0)
      return BinOp{">>", 9, 2};
    static const std::map<std::string, int> prec = {
        {"?", 1},  {"||", 2}, {"&&", 3}, {"|", 4},  {"^", 5},  {"&", 6},
        {"==", 7}, {"!=", 7}, {"<", 8},  {"<=", 8}, {">", 8},  {">=", 8},
        {"<<", 9}, {"+", 10}, {"-", 10}, {"*", 11}, {"/", 11}, {"%", 11}};
    auto it = prec.find(x);
    if (it == prec.end() || tok(j).kind != Tok::Punct) return std::nullopt;
    return BinOp{x, it->second, 1};
  }

  Value expr(size_t& j, size_t e, int min_prec = 0) {
    if (j >= e) refuse_at(j, "an expression is missing");
    Value lhs = unary(j, e);
    for (;;) {
      std::optional<BinOp> op = binary_op(j, e);
      if (!op || op->prec < min_prec) return lhs;
      size_t at = j;
      j += op->width;
      if (op->op == "?") {
        Value a = expr(j, e, 0);
        expect(j, e, ":");
        Value b = expr(j, e, 1);
        lhs = ternary(lhs, a, b, at);
        continue;
      }
      Value rhs = expr(j, e, op->prec + 1);
      lhs = binary(op->op, lhs, rhs, at);
    }
  }

  Value ternary(const Value& c, const Value& a, const Value& b, size_t at) {
    if (std::optional<bool> t = truth(c, at)) return *t ? a : b;
    // `x < y ? x : y` is min, `x > y ? x : y` is max.
    if (c.k == K::Int && c.i->op == Sym::Op::Cmp && a.k == K::Int && b.k == K::Int) {
      const SymP &l = c.i->kids[0], &r = c.i->kids[1];
      bool less = c.i->text == "<" || c.i->text == "<=";
      bool more = c.i->text == ">" || c.i->text == ">=";
      if ((less || more) && sym_same(a.i, l) && sym_same(b.i, r))
        return v_int(less ? sym_min(l, r) : sym_max(l, r));
      if ((less || more) && sym_same(a.i, r) && sym_same(b.i, l))
        return v_int(less ? sym_max(l, r) : sym_min(l, r));
    }
    return v_unknown("a value chosen by a condition on the sizes ('?:')");
  }

  Value binary(const std::string& op, const Value& a, const Value& b, size_t at) {
    if (a.k == K::Unknown) return a;
    if (b.k == K::Unknown) return b;
    if ((a.k == K::Dtype || a.k == K::Options) && (b.k == K::Dtype || b.k == K::Options) &&
        (op == "==" || op == "!="))
      return v_int((a.dtype == b.dtype) == (op == "=="));
    if (a.k == K::Int && b.k == K::Int) return v_int(int_op(op, a.i, b.i, at));
    if ((a.k == K::Int || a.k == K::Real) && (b.k == K::Int || b.k == K::Real))
      return real_op(op, as_real(a, line(at)), as_real(b, line(at)), at);
    if (op == "<<" && (a.k == K::Str || a.k == K::Ignored)) return v_kind(K::Ignored);  // streams
    return v_unknown("'" + op + "' on values that are not numbers");
  }

  SymP int_op(const std::string& op, const SymP& a, const SymP& b, size_t at) {
    if (op == "+") return sym_add(a, b);
    if (op == "-") return sym_sub(a, b);
    if (op == "*") return sym_mul(a, b);
    if (op == "/") return sym_div(a, b);
    if (op == "%") return sym_mod(a, b);
    if (op == "&&") return sym_and(a, b);
    if (op == "||") return sym_or(a, b);
    if (op == "<" || op == "<=" || op == ">" || op == ">=" || op == "==" || op == "!=")
      return sym_cmp(op, a, b);
    std::optional<int64_t> x = sym_constant(a), y = sym_constant(b);
    if ((op == "<<" || op == ">>") && y && *y >= 0 && *y < 62) {
      if (op == "<<") return sym_mul(a, sym_const(int64_t{1} << *y));
      if (x) return sym_const(*x >> *y);
      return sym_div(a, sym_const(int64_t{1} << *y));
    }
    if (x && y) {
      if (op == "&") return sym_const(*x & *y);
      if (op == "|") return sym_const(*x | *y);
      if (op == "^") return sym_const(*x ^ *y);
    }
    refuse_at(at, "'" + op +
                      "' on sizes; a plan's expressions have + - * / %, ceil_div, min and "
                      "max");
  }

  Value real_op(const std::string& op, const Value& a, const Value& b, size_t at) {
    bool dbl = a.dbl || b.dbl;
    if (a.rc && b.rc) {
      double x = *a.rc, y = *b.rc;
      if (op == "+") return v_real(x + y, dbl);
      if (op == "-") return v_real(x - y, dbl);
      if (op == "*") return v_real(x * y, dbl);
      if (op == "/") return v_real(x / y, dbl);
      if (op == "<") return v_int(x < y);
      if (op == "<=") return v_int(x <= y);
      if (op == ">") return v_int(x > y);
      if (op == ">=") return v_int(x >= y);
      if (op == "==") return v_int(x == y);
      if (op == "!=") return v_int(x != y);
      if (op == "&&") return v_int(x != 0 && y != 0);
      if (op == "||") return v_int(x != 0 || y != 0);
    }
    auto quotient = [](const Value& v) -> std::optional<std::pair<SymP, SymP>> {
      if (v.num) return std::pair{v.num, v.den};
      if (v.rc && *v.rc == std::floor(*v.rc) && std::fabs(*v.rc) < 9e15)
        return std::pair{sym_const(static_cast<int64_t>(*v.rc)), sym_const(1)};
      return std::nullopt;
    };
    auto qa = quotient(a), qb = quotient(b);
    if (qa && qb) {
      Value r;
      r.k = K::Real;
      r.dbl = dbl;
      if (op == "/") {
        r.num = sym_mul(qa->first, qb->second), r.den = sym_mul(qa->second, qb->first);
        return r;
      }
      if (op == "*") {
        r.num = sym_mul(qa->first, qb->first), r.den = sym_mul(qa->second, qb->second);
        return r;
      }
      if ((op == "+" || op == "-") && sym_constant(qa->second) == 1 &&
          sym_constant(qb->second) == 1) {
        r.num = op == "+" ? sym_add(qa->first, qb->first) : sym_sub(qa->first, qb->first);
        r.den = sym_const(1);
        return r;
      }
    }
    (void)at;
    return v_unknown("a float computed from the sizes");
  }

  Value unary(size_t& j, size_t e) {
    if (j >= e) refuse_at(j, "an expression is missing");
    const Token& t = tok(j);
    const std::string& x = t.text;
    if (x == "-" || x == "+" || x == "!" || x == "~") {
      ++j;
      Value v = unary(j, e);
      if (x == "+" || v.k == K::Unknown) return v;
      if (x == "-") {
        if (v.k == K::Int) return v_int(sym_neg(v.i));
        if (v.k == K::Real && v.rc) return v_real(-*v.rc, v.dbl);
        if (v.k == K::Real && v.num) {
          Value r = v;
          r.num = sym_neg(v.num);
          return r;
        }
      }
      if (x == "!" && v.k == K::Int) return v_int(sym_not(v.i));
      if (x == "!" && v.k == K::Real && v.rc) return v_int(*v.rc == 0);
      if (x == "~" && v.k == K::Int && sym_constant(v.i)) return v_int(~*sym_constant(v.i));
      return v_unknown("'" + x + "' kforge cannot follow");
    }
    if (x == "&") {
      ++j;
      if (j < e && tok(j).kind == Tok::Identifier && (j + 1 >= e || tok(j + 1).text != "."))
        return v_kind(K::Ref, tok(j++).text);
      return unary(j, e);
    }
    if (x == "*")
      refuse_at(j, "host code reads through a pointer ('" + code(j, std::min(e, j + 6)) + "')");
    if (x == "(") {
      size_t close = matching(*T_, j, e);
      if (cast_at(j + 1, close) && close + 1 < e) {
        std::string type = code(j + 1, close);
        j = close + 1;
        return cast(type, unary(j, e), j);
      }
      ++j;
      Value v = expr(j, close);
      if (j != close) refuse_at(j, "host code kforge cannot read ('" + code(j, close) + "')");
      j = close + 1;
      return postfix(v, j, e);
    }
    if (x == "{") {
      size_t close = matching(*T_, j, e);
      Value l;
      l.k = K::List;
      l.items = list(j + 1, close);
      j = close + 1;
      return l;
    }
    if (x == "[") return lambda(j, e);
    if (t.kind == Tok::Number) {
      ++j;
      return postfix(number(t), j, e);
    }
    if (t.kind == Tok::String) {
      ++j;
      while (j < e && tok(j).kind == Tok::String) ++j;
      return v_kind(K::Str, t.text);
    }
    if (t.kind == Tok::Char) {
      ++j;
      return v_int(t.text.size() > 2 ? static_cast<unsigned char>(t.text[1]) : 0);
    }
    if (t.kind == Tok::Identifier || x == "::") return postfix(name_expression(j, e), j, e);
    refuse_at(j, "host code kforge cannot read ('" + code(j, std::min(e, j + 8)) + "')");
  }

  bool cast_at(size_t b, size_t e) {
    if (b >= e) return false;
    bool any = false;
    for (size_t j = b; j < e; ++j) {
      const std::string& x = tok(j).text;
      if (x == "*" || x == "&" || x == "::") continue;
      if (tok(j).kind != Tok::Identifier) return false;
      if (!type_word(x) && (x.size() < 2 || x.compare(x.size() - 2, 2, "_t") != 0) &&
          !(lookup_local(x) && lookup_local(x)->k == K::Type) && x != "std" && x != "at" &&
          x != "c10" && x != "torch")
        return false;
      any = true;
    }
    return any;
  }

  Value cast(const std::string& type, const Value& v, size_t at) {
    if (type.find('*') != std::string::npos) {
      if (v.k == K::Ptr) return v;
      refuse_at(at, "a pointer cast of something that is not a tensor's data ('(" + type + ")')");
    }
    return converted(type, v, line(at), "(" + type + ")");
  }

  Value number(const Token& t) {
    std::string s;
    for (char c : t.text)
      if (c != '\'') s += c;
    bool hex = s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    bool real = !hex && (s.find('.') != std::string::npos || s.find('e') != std::string::npos ||
                         s.find('E') != std::string::npos ||
                         (!s.empty() && (s.back() == 'f' || s.back() == 'F')));
    if (real) {
      bool is_float = !s.empty() && (s.back() == 'f' || s.back() == 'F');
      return v_real(std::strtod(s.c_str(), nullptr), !is_float);
    }
    while (!s.empty() && std::strchr("uUlLzZ", s.back())) s.pop_back();
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), nullptr, 0);
    if (errno || v > static_cast<unsigned long long>(INT64_MAX))
      refuse(t.line, "the integer " + t.text + " does not fit 64 bits");
    return v_int(static_cast<int64_t>(v));
  }

  Value lambda(size_t& j, size_t e) {
    size_t close = matching(*T_, j, e);
    j = close + 1;
    if (is(j, e, "(")) j = matching(*T_, j, e) + 1;
    while (j < e && tok(j).text != "{") ++j;
    if (j >= e) refuse_at(close, "a lambda without a body");
    Value v;
    v.k = K::Lambda;
    v.lb = j;
    v.le = matching(*T_, j, e);
    j = v.le + 1;
    return v;
  }

  // A name, qualified or not, then its call or its value.
  Value name_expression(size_t& j, size_t e) {
    size_t start = j;
    std::string name;
    while (j < e && (tok(j).kind == Tok::Identifier || tok(j).text == "::")) {
      if (tok(j).kind == Tok::Identifier && !name.empty() && name.back() != ':') break;
      name += tok(j++).text;
    }
    static const std::set<std::string> casts = {"static_cast", "reinterpret_cast", "const_cast",
                                                "dynamic_cast"};
    if (casts.count(name)) {
      expect(j, e, "<");
      size_t b = j;
      int angle = 1;
      while (j < e && angle > 0) {
        if (tok(j).text == "<") ++angle;
        if (tok(j).text == ">") --angle;
        ++j;
      }
      std::string type = code(b, j - 1);
      if (!is(j, e, "(")) refuse_at(j, "a cast without '('");
      size_t close = matching(*T_, j, e);
      ++j;
      Value v = expr(j, close);
      j = close + 1;
      return cast(type, v, start);
    }
    if (name == "sizeof") return size_of(j, e);
    if (name == "true" || name == "false") return v_int(name == "true");
    if (name == "nullptr" || name == "NULL") return v_int(0);
    if (is(j, e, "<") && (name == "std::min" || name == "std::max" || name == "min" ||
                          name == "max" || kernel_named(name))) {
      j = past_angles(j, e);  // template arguments of a function: skipped
    }
    if (is(j, e, "(")) {
      if (c_type_named(name) || name == "scalar_t") {  // a functional cast: float(n)
        size_t close = matching(*T_, j, e);
        ++j;
        Value v = expr(j, close);
        j = close + 1;
        return cast(name, v, start);
      }
      size_t close = matching(*T_, j, e);
      std::vector<Value> args = list(j + 1, close);
      j = close + 1;
      return call(name, args, start);
    }
    return value_of(name, start);
  }

  Value size_of(size_t& j, size_t e) {
    if (!is(j, e, "(")) refuse_at(j, "sizeof without '('");
    size_t close = matching(*T_, j, e);
    std::string type = code(j + 1, close);
    j = close + 1;
    if (type == "scalar_t" || (lookup_local(type) && lookup_local(type)->k == K::Type))
      type = lookup_local(type)->text;
    if (auto c = c_type_named(type)) return v_int(static_cast<int64_t>(c->size));
    if (type.find('*') != std::string::npos) return v_int(8);
    refuse_at(j - 1, "sizeof(" + type + ") kforge does not know");
  }

  Value* lookup_local(const std::string& name) {
    if (!frame_) return nullptr;
    for (auto it = frame_->scopes.rbegin(); it != frame_->scopes.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  Value value_of(const std::string& name, size_t at) {
    if (Value* v = lookup_local(name)) return *v;
    if (auto c = parts_.constants.find(name); c != parts_.constants.end())
      return constant(c->second, at);
    if (auto d = dtype_named(name)) return v_dtype(K::Dtype, d);
    static const std::map<std::string, int64_t> ints = {
        {"INT_MAX", 2147483647},  {"INT32_MAX", 2147483647}, {"UINT_MAX", 4294967295},
        {"INT64_MAX", INT64_MAX}, {"LLONG_MAX", INT64_MAX},  {"cudaSuccess", 0}};
    if (auto it = ints.find(name); it != ints.end()) {
      if (name == "cudaSuccess") return v_kind(K::Status);
      return v_int(it->second);
    }
    if (name == "M_PI") return v_real(M_PI, true);
    if (name.rfind("cudaDevAttr", 0) == 0 || name.rfind("cudaFuncAttribute", 0) == 0 ||
        name.rfind("cudaSharedmem", 0) == 0 || name.rfind("cudaFuncCache", 0) == 0)
      return v_kind(K::Str, name);
    if (name.find("kCUDA") != std::string::npos || name.find("kCPU") != std::string::npos)
      return v_kind(K::Device);
    if (name.find("RestrictPtrTraits") != std::string::npos ||
        name.find("DefaultPtrTraits") != std::string::npos)
      return v_kind(K::Type, name);
    if (c_type_named(name)) return v_kind(K::Type, name);
    refuse_at(at, "'" + name + "' is not defined where kforge can see it in cuda_sources");
  }

  std::map<std::string, Value> constants_;
  // A namespace-scope constant's value (its initializer, macros expanded), worked out once.
  Value constant(std::pair<size_t, size_t> range, size_t at) {
    std::string key = std::to_string(range.first);
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
    std::vector<Token> init =
        expand(std::vector<Token>(parts_.tokens.begin() + static_cast<long>(range.first),
                                  parts_.tokens.begin() + static_cast<long>(range.second)),
               {}, 0);
    const std::vector<Token>* saved = T_;
    T_ = &init;
    size_t j = 0;
    Value v;
    try {
      v = init.empty() ? v_unknown("an empty initializer") : expr(j, init.size());
    } catch (...) {
      T_ = saved;
      throw;
    }
    T_ = saved;
    (void)at;
    return constants_[key] = v;
  }

  // ---- calls of functions and methods --------------------------------------------------------

  static std::string base_name(const std::string& name, bool& torch) {
    torch = false;
    std::string n = name;
    for (const char* prefix : {"torch::", "at::", "c10::"})
      if (n.rfind(prefix, 0) == 0) {
        n = n.substr(std::strlen(prefix));
        torch = true;
      }
    return n;
  }

  Value call(const std::string& name, const std::vector<Value>& args, size_t at) {
    int ln = line(at);
    bool torch = false;
    std::string base = base_name(name, torch);
    if (base == "empty" || base == "zeros" || base == "empty_like" || base == "zeros_like")
      return allocate(base, args, ln, name);
    if (base == "TensorOptions") return v_dtype(K::Options, std::nullopt);
    if (base == "dtype" && !args.empty()) return v_dtype(K::Options, args[0].dtype);
    if (base == "device") return v_dtype(K::Options, std::nullopt);
    if (base.find("getCurrentCUDAStream") != std::string::npos ||
        base.find("getDefaultCUDAStream") != std::string::npos)
      return v_kind(K::Stream);
    if (base.find("getCurrentDeviceProperties") != std::string::npos) return v_kind(K::Props);
    if (name == "std::min" || name == "min" || name == "std::max" || name == "max" ||
        name == "fminf" || name == "fmaxf" || name == "fmin" || name == "fmax")
      return min_max(name, args, at);
    if (std::optional<Value> m = math(name, args, at)) return *m;
    if (name == "dim3") {
      std::vector<Value> a = args;
      return construct("dim3", a, ln);
    }
    if (base == "device_of") return v_kind(K::Device);
    if (name == "std::make_tuple" || name == "std::tie" || name == "std::make_pair") {
      Value l;  // several outputs
      l.k = K::List;
      l.items = args;
      return l;
    }
    // The answer's own host functions first: a helper may be named cuda_something.
    if (const Function* f = parts_.host_function(name)) return call_function(*f, args, ln);
    if (std::optional<Value> c = cuda_call(name, args, at)) return *c;
    if (torch || name.rfind("F::", 0) == 0)
      refuse(ln, name +
                     "(...) is a PyTorch operation in the host code; kforge runs only the "
                     "kernels (write it as a kernel)");
    refuse(ln, "host code calls " + name + "(...), which kforge cannot run or evaluate");
  }

  Value min_max(const std::string& name, const std::vector<Value>& args, size_t at) {
    if (args.size() != 2)
      refuse_at(at, name + " with " + std::to_string(args.size()) + " arguments");
    bool is_min = name.find("min") != std::string::npos;
    const Value &a = args[0], &b = args[1];
    if (a.k == K::Unknown) return a;
    if (b.k == K::Unknown) return b;
    if (a.k == K::Int && b.k == K::Int)
      return v_int(is_min ? sym_min(a.i, b.i) : sym_max(a.i, b.i));
    Value x = as_real(a, line(at)), y = as_real(b, line(at));
    if (x.rc && y.rc)
      return v_real(is_min ? std::min(*x.rc, *y.rc) : std::max(*x.rc, *y.rc), x.dbl || y.dbl);
    return v_unknown("a float computed from the sizes");
  }

  std::optional<Value> math(const std::string& name, const std::vector<Value>& args, size_t at) {
    std::string n = name.rfind("std::", 0) == 0 ? name.substr(5) : name;
    if (!n.empty() && n.back() == 'f' && n != "erf") n.pop_back();
    static const std::set<std::string> known = {"ceil", "floor", "sqrt",  "exp",  "log",  "pow",
                                                "fabs", "abs",   "round", "log2", "rsqrt"};
    if (!known.count(n)) return std::nullopt;
    if (args.empty()) refuse_at(at, name + " without an argument");
    const Value& a = args[0];
    if (a.k == K::Unknown) return a;
    if (n == "abs" && a.k == K::Int) {
      if (auto c = sym_constant(a.i)) return v_int(*c < 0 ? -*c : *c);
      return a;  // sizes are positive
    }
    Value r = as_real(a, line(at));
    if ((n == "ceil" || n == "floor") && r.num) {
      Value q = v_real(0, r.dbl);
      q.rc.reset();
      q.num = n == "ceil" ? sym_ceil_div(r.num, r.den) : sym_div(r.num, r.den);
      q.den = sym_const(1);
      return q;
    }
    if (!r.rc) return v_unknown("a float computed from the sizes (" + name + ")");
    double x = *r.rc;
    double y =
        args.size() > 1 && as_real(args[1], line(at)).rc ? *as_real(args[1], line(at)).rc : 0;
    double out = n == "ceil"    ? std::ceil(x)
                 : n == "floor" ? std::floor(x)
                 : n == "sqrt"  ? std::sqrt(x)
                 : n == "exp"   ? std::exp(x)
                 : n == "log"   ? std::log(x)
                 : n == "log2"  ? std::log2(x)
                 : n == "pow"   ? std::pow(x, y)
                 : n == "round" ? std::round(x)
                 : n == "rsqrt" ? 1 / std::sqrt(x)
                                : std::fabs(x);
    return v_real(out, r.dbl);
  }

  // CUDA runtime calls: those a plan makes unnecessary are read, the others refused.
  std::optional<Value> cuda_call(const std::string& name, const std::vector<Value>& args,
                                 size_t at) {
    int ln = line(at);
    for (const char* p : {"cublas", "cublasLt"})
      if (name.rfind(p, 0) == 0)
        refuse(ln, name +
                       "(...) is a cuBLAS call; kforge judges kernels of the answer's own (no "
                       "libraries on the host side)");
    for (const char* p : {"cudnn", "cusparse", "cufft", "cusolver", "curand", "nccl"})
      if (name.rfind(p, 0) == 0)
        refuse(ln, name +
                       "(...) calls a CUDA library from the host; kforge judges kernels of the "
                       "answer's own");
    if (name == "cudaGetLastError" || name == "cudaPeekAtLastError" ||
        name == "cudaDeviceSynchronize" || name == "cudaStreamSynchronize" ||
        name == "cudaGetErrorString" || name == "cudaSetDevice")
      return name == "cudaGetErrorString" ? v_kind(K::Str) : v_kind(K::Status);
    if (name == "cudaFuncSetAttribute" || name == "cudaFuncSetCacheConfig" ||
        name == "cudaFuncSetSharedMemConfig") {
      run_.notes.push_back({ln, name + " is left to kforge, which sets a kernel's shared memory "
                                       "attribute itself when a launch asks for more than 48 KB"});
      return v_kind(K::Status);
    }
    if (name == "cudaGetDevice") return set_ref(args, 0, v_int(0), ln), v_kind(K::Status);
    if (name == "cudaGetDeviceProperties")
      return set_ref(args, 0, v_kind(K::Props), ln), v_kind(K::Status);
    if (name == "cudaDeviceGetAttribute") {
      if (args.size() < 2 || args[1].k != K::Str) refuse(ln, name + " kforge cannot read");
      set_ref(args, 0, device_fact(args[1].text, ln), ln);
      return v_kind(K::Status);
    }
    if ((name == "cudaMemset" || name == "cudaMemsetAsync") && args.size() >= 3 &&
        args[0].k == K::Ptr && args[1].k == K::Int && sym_constant(args[1].i) == 0) {
      TensorSlot& s = run_.tensors[root(args[0].tensor)];
      if (s.input) refuse(ln, name + " writes the task's input '" + s.name + "'");
      s.zeroed = true;
      return v_kind(K::Status);
    }
    if (name.rfind("cudaMalloc", 0) == 0 || name.rfind("cudaFree", 0) == 0)
      refuse(ln, name +
                     "(...) allocates device memory in the host code; a plan's scratch memory "
                     "is a workspace (allocate it with torch::empty in the wrapper)");
    if (name.rfind("cudaMemcpy", 0) == 0 || name.rfind("cudaMemset", 0) == 0)
      refuse(ln, name +
                     "(...) copies or sets memory outside kernels; kforge runs only the "
                     "kernels");
    if (name.rfind("cudaStream", 0) == 0 || name.rfind("cudaEvent", 0) == 0 ||
        name.rfind("cudaGraph", 0) == 0)
      refuse(ln, name +
                     "(...): streams, events and graphs are kforge's (a plan's launches run in "
                     "order on one stream)");
    if (name.rfind("cudaLaunch", 0) == 0)
      refuse(ln, name +
                     "(...) launches through the runtime API; kforge reads launches written "
                     "kernel<<<grid, block, shared, stream>>>(...)");
    if (name.rfind("cudaOccupancy", 0) == 0)
      refuse(ln, name +
                     "(...) asks the device at run time; a plan may use num_sms, warp_size and "
                     "max_shared_per_block");
    if (name.rfind("cuda", 0) == 0 || (name.rfind("cu", 0) == 0 && name.size() > 2 &&
                                       std::isupper(static_cast<unsigned char>(name[2]))))
      refuse(ln, name + "(...) is a CUDA API call kforge will not run");
    return std::nullopt;
  }

  void set_ref(const std::vector<Value>& args, size_t k, const Value& v, int ln) {
    if (k >= args.size() || args[k].k != K::Ref) refuse(ln, "expected '&variable' here");
    Value* target = lookup_local(args[k].text);
    if (!target) refuse(ln, "'" + args[k].text + "' is not declared where kforge can see it");
    *target = v;
  }

  Value device_fact(const std::string& what, int ln) {
    if (what == "cudaDevAttrMultiProcessorCount") return v_int(sym_atom("num_sms"));
    if (what == "cudaDevAttrWarpSize") return v_int(sym_atom("warp_size"));
    if (what == "cudaDevAttrMaxSharedMemoryPerBlockOptin")
      return v_int(sym_atom("max_shared_per_block"));
    if (what == "cudaDevAttrMaxSharedMemoryPerBlock") return v_int(49152);
    if (what == "cudaDevAttrMaxThreadsPerBlock") return v_int(1024);
    refuse(ln, what +
                   " is a device fact a plan does not have (it has num_sms, warp_size and "
                   "max_shared_per_block)");
  }

  Value props_field(const std::string& field, size_t at) {
    if (field == "multiProcessorCount") return v_int(sym_atom("num_sms"));
    if (field == "warpSize") return v_int(sym_atom("warp_size"));
    if (field == "sharedMemPerBlockOptin") return v_int(sym_atom("max_shared_per_block"));
    if (field == "sharedMemPerBlock") return v_int(49152);
    if (field == "maxThreadsPerBlock") return v_int(1024);
    refuse_at(at, "the device property '" + field +
                      "' is not one a plan has (it has num_sms, "
                      "warp_size and max_shared_per_block)");
  }

  Value allocate(const std::string& base, const std::vector<Value>& args, int ln,
                 const std::string& how) {
    TensorSlot s;
    s.line = ln;
    s.zeroed = base.rfind("zeros", 0) == 0;
    s.how = how + "(...)";
    size_t options_at = 1;
    if (base.find("_like") != std::string::npos) {
      if (args.empty() || args[0].k != K::Tensor)
        refuse(ln, how + " of something that is not a tensor");
      const TensorSlot& like = run_.tensors[args[0].tensor];
      s.shape = like.shape;
      s.dtype = like.dtype;
    } else {
      if (args.empty()) refuse(ln, how + " without sizes");
      const Value& sizes = args[0];
      std::vector<Value> items = sizes.k == K::List ? sizes.items : std::vector<Value>{sizes};
      for (const Value& v : items) {
        Value n = as_int(v, ln);
        if (n.k != K::Int) refuse(ln, how + " with a size kforge cannot follow (" + n.text + ")");
        s.shape.push_back(n.i);
      }
      s.dtype = Dtype::Float32;  // PyTorch's default dtype
    }
    for (size_t k = options_at; k < args.size(); ++k) {
      if ((args[k].k == K::Options || args[k].k == K::Dtype) && args[k].dtype)
        s.dtype = *args[k].dtype;
      else if (args[k].k == K::Unknown)
        refuse(ln, how + " with options kforge cannot follow (" + args[k].text + ")");
    }
    Value v;
    v.k = K::Tensor;
    v.tensor = static_cast<int>(run_.tensors.size());
    run_.tensors.push_back(std::move(s));
    return v;
  }

  // ---- postfix: members, methods, indexing ---------------------------------------------------

  Value postfix(Value v, size_t& j, size_t e) {
    for (;;) {
      if (j >= e) return v;
      const std::string& x = tok(j).text;
      if (x == "." || x == "->") {
        if (j + 1 >= e || tok(j + 1).kind != Tok::Identifier)
          refuse_at(j, "a member name is missing");
        std::string m = tok(j + 1).text;
        size_t at = j;
        j += 2;
        std::string targ;
        if (is(j, e, "<") &&
            (m.find("data") != std::string::npos || m.find("accessor") != std::string::npos ||
             m == "to" || m == "item")) {
          size_t b = j + 1;
          j = past_angles(j, e);
          targ = code(b, j - 1);
        }
        if (is(j, e, "(")) {
          size_t close = matching(*T_, j, e);
          std::vector<Value> args = list(j + 1, close);
          j = close + 1;
          v = method(v, m, targ, args, at);
        } else {
          v = member(v, m, at);
        }
      } else if (x == "[") {
        size_t close = matching(*T_, j, e);
        size_t k = j + 1;
        Value index = as_int(expr(k, close), line(j));
        j = close + 1;
        v = subscript(v, index, j - 1);
      } else if (x == "(" && v.k == K::Lambda) {
        size_t close = matching(*T_, j, e);
        j = close + 1;
        frame_->scopes.emplace_back();
        block(v.lb + 1, v.le);
        frame_->scopes.pop_back();
        v = frame_->result.value_or(Value{});
        frame_->result.reset();
      } else {
        return v;
      }
    }
  }

  Value subscript(const Value& v, const Value& index, size_t at) {
    auto k = index.k == K::Int ? sym_constant(index.i) : std::nullopt;
    if (v.k == K::List) {
      if (!k) refuse_at(at, "an index kforge cannot evaluate");
      int64_t n = static_cast<int64_t>(v.items.size());
      int64_t i = *k < 0 ? *k + n : *k;
      if (i < 0 || i >= n) refuse_at(at, "index " + std::to_string(*k) + " is out of range");
      return v.items[static_cast<size_t>(i)];
    }
    if (v.k == K::Unknown) return v;
    refuse_at(at,
              "host code indexes something kforge cannot follow (a tensor's values are the "
              "kernels' to read)");
  }

  Value member(const Value& v, const std::string& m, size_t at) {
    if (v.k == K::Dim3 && (m == "x" || m == "y" || m == "z"))
      return v.items[m == "x" ? 0 : m == "y" ? 1 : 2];
    if (v.k == K::Props) return props_field(m, at);
    if (v.k == K::Unknown) return v;
    refuse_at(at, "the member '" + m + "' kforge cannot follow");
  }

  Value list_of(std::vector<SymP> sizes) {
    Value l;
    l.k = K::List;
    for (SymP& s : sizes) l.items.push_back(v_int(std::move(s)));
    return l;
  }

  Value method(const Value& v, const std::string& m, const std::string& targ,
               const std::vector<Value>& args, size_t at) {
    int ln = line(at);
    if (v.k == K::Unknown) return v;
    if (v.k == K::Tensor) return tensor_method(v.tensor, m, targ, args, at);
    if (v.k == K::Options || v.k == K::Dtype) {
      if (m == "dtype" && !args.empty() && args[0].dtype) return v_dtype(K::Options, args[0].dtype);
      if (m == "device" || m == "layout" || m == "requires_grad" || m == "memory_format" ||
          m == "pinned_memory")
        return v_dtype(K::Options, v.dtype);
    }
    if (v.k == K::Stream && m == "stream") return v;
    if (v.k == K::List) {
      if (m == "size") return v_int(static_cast<int64_t>(v.items.size()));
      if (m == "vec") return v;
      if (m == "back" && !v.items.empty()) return v.items.back();
      if (m == "front" && !v.items.empty()) return v.items.front();
      if (m == "push_back" && args.size() == 1) {
        refuse(ln, "host code builds a list with push_back; kforge reads sizes written out");
      }
    }
    if (v.k == K::Device || v.k == K::Ignored) return v_kind(K::Ignored);
    refuse(ln, "the call ." + m + "(...) kforge cannot follow");
  }

  Value tensor_method(int slot, const std::string& m, const std::string& targ,
                      const std::vector<Value>& args, size_t at) {
    int ln = line(at);
    TensorSlot& s = run_.tensors[slot];
    auto index = [&](size_t k) -> size_t {
      if (args.size() <= k || args[k].k != K::Int || !sym_constant(args[k].i))
        refuse(ln, "." + m + "() with a dimension kforge cannot evaluate");
      int64_t d = *sym_constant(args[k].i), n = static_cast<int64_t>(s.shape.size());
      int64_t i = d < 0 ? d + n : d;
      if (i < 0 || i >= n)
        refuse(ln, "." + m + "(" + std::to_string(d) + ") of a tensor with " + std::to_string(n) +
                       " dimension(s)");
      return static_cast<size_t>(i);
    };
    if (m == "size" || m == "sizes" || m == "shape") {
      if (args.empty()) return list_of(s.shape);
      return v_int(s.shape[index(0)]);
    }
    if (m == "numel") return v_int(numel(s.shape));
    if (m == "dim" || m == "ndimension") return v_int(static_cast<int64_t>(s.shape.size()));
    if (m == "stride") {
      size_t d = index(0);
      SymP p = sym_const(1);
      for (size_t k = d + 1; k < s.shape.size(); ++k) p = sym_mul(p, s.shape[k]);
      return v_int(p);
    }
    if (m == "strides") {
      std::vector<SymP> st(s.shape.size(), sym_const(1));
      for (size_t k = s.shape.size(); k-- > 1;) st[k - 1] = sym_mul(st[k], s.shape[k]);
      return list_of(st);
    }
    if (m == "element_size" || m == "itemsize")
      return v_int(static_cast<int64_t>(tasks::dtype_size(s.dtype)));
    if (m == "scalar_type" || m == "dtype" || m == "type") return v_dtype(K::Dtype, s.dtype);
    if (m == "options") return v_dtype(K::Options, s.dtype);
    if (m == "device" || m == "get_device") return v_kind(K::Device);
    if (m == "is_cuda" || m == "is_contiguous" || m == "defined") return v_int(1);
    if (m == "contiguous" || m == "cuda") {
      Value v;
      v.k = K::Tensor;
      v.tensor = slot;
      return v;
    }
    if (m == "data_ptr" || m == "data" || m == "mutable_data_ptr" || m == "const_data_ptr") {
      Value p;
      p.k = K::Ptr;
      p.tensor = slot;
      p.text = targ;
      return p;
    }
    if (m == "view" || m == "reshape") return view(slot, args, ln, m);
    if (m == "zero_" ||
        (m == "fill_" && args.size() == 1 && args[0].k == K::Int && sym_constant(args[0].i) == 0)) {
      TensorSlot& r = run_.tensors[root(slot)];
      if (r.input) refuse(ln, "." + m + "() writes the task's input '" + r.name + "'");
      r.zeroed = true;
      Value v;
      v.k = K::Tensor;
      v.tensor = slot;
      return v;
    }
    if (m.find("accessor") != std::string::npos)
      refuse(ln, "." + m + "<" + targ +
                     ">() passes a tensor accessor; kforge passes raw "
                     "pointers (data_ptr<T>())");
    if (m == "item") refuse(ln, ".item() reads a value back from the GPU in the host code");
    refuse(ln, "." + m +
                   "(...) is a PyTorch operation in the host code; kforge runs only the "
                   "kernels (write it as a kernel)");
  }

  static SymP numel(const std::vector<SymP>& shape) {
    SymP p = sym_const(1);
    for (const SymP& d : shape) p = sym_mul(p, d);
    return p;
  }

  Value view(int slot, const std::vector<Value>& args, int ln, const std::string& m) {
    std::vector<Value> items = args.size() == 1 && args[0].k == K::List ? args[0].items : args;
    std::vector<SymP> shape;
    int infer = -1;
    for (size_t k = 0; k < items.size(); ++k) {
      Value n = as_int(items[k], ln);
      if (n.k != K::Int) refuse(ln, "." + m + "() with a size kforge cannot follow");
      if (sym_constant(n.i) == -1) infer = static_cast<int>(k);
      shape.push_back(n.i);
    }
    SymP total = numel(run_.tensors[slot].shape);
    if (infer >= 0) {
      SymP rest = sym_const(1);
      for (size_t k = 0; k < shape.size(); ++k)
        if (static_cast<int>(k) != infer) rest = sym_mul(rest, shape[k]);
      shape[static_cast<size_t>(infer)] = sym_div(total, rest);
    }
    TensorSlot v = run_.tensors[slot];
    v.base = slot;
    v.shape = shape;
    v.how = "." + m + "(...)";
    v.line = ln;
    Value out;
    out.k = K::Tensor;
    out.tensor = static_cast<int>(run_.tensors.size());
    run_.tensors.push_back(std::move(v));
    return out;
  }

  HostRun& run_;
  const SourceParts& parts_;
  Frame* frame_ = nullptr;
  const std::vector<Token>* T_ = nullptr;
  int depth_ = 0;
};

HostRun::HostRun(const SourceParts& parts, std::vector<tasks::Dims> configs)
    : parts_(parts), configs_(std::move(configs)) {}

HostRun::~HostRun() = default;

int HostRun::add_tensor(TensorSlot slot) {
  tensors.push_back(std::move(slot));
  return static_cast<int>(tensors.size()) - 1;
}

std::vector<int> HostRun::call(const std::string& function, const std::vector<CallArg>& args) {
  Interp interp(*this);
  return interp.call_wrapper(function, args);
}

}  // namespace kforge::compile::kb
