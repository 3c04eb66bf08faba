#include "kforge/tasks/task.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "kforge/common/hash.h"
#include "kforge/common/input_file.h"
#include "kforge/common/strings.h"
#include "kforge/common/toml_limits.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/transform.h"

namespace fs = std::filesystem;

namespace kforge::tasks {
namespace {

constexpr std::pair<Dtype, std::string_view> kDtypes[] = {
    {Dtype::Float32, "float32"}, {Dtype::Float16, "float16"}, {Dtype::BFloat16, "bfloat16"},
    {Dtype::Float64, "float64"}, {Dtype::Int32, "int32"},     {Dtype::Int64, "int64"},
    {Dtype::Bool, "bool"}};

const std::set<std::string> kTopLevelKeys = {
    "name",       "summary", "tags",      "reference",   "dims",
    "inputs",     "outputs", "check",     "constraints", "deterministic",
    "allow_tf32", "flops",   "min_bytes", "degenerate",  "batch_dim"};

// Bounds on what the loader hands to toml++ and TorchScript (both recurse on nesting and crashed
// on deep or long input): checked by linear scans before either parser runs (TOML nesting and
// dotted keys: kforge/common/toml_limits.h).
constexpr size_t kMaxTaskFileBytes = 1 << 20;
constexpr size_t kMaxReferenceBytes = 32 * 1024;
constexpr int kMaxReferenceLines = 1000;
constexpr size_t kMaxReferenceLineChars = 1000;
constexpr int kMaxReferenceDepth = 32;  // nested ( [ {

struct Problem {
  int line;
  std::string what;
};

// The first reason the reference is too large for TorchScript's recursive compiler, with its
// line relative to the reference's first line (1-based).
std::optional<Problem> reference_problem(const std::string& ref) {
  if (ref.size() > kMaxReferenceBytes)
    return Problem{1, std::to_string(ref.size()) + " bytes; a reference may have at most " +
                          std::to_string(kMaxReferenceBytes)};
  int lines = static_cast<int>(std::count(ref.begin(), ref.end(), '\n')) +
              (ref.empty() || ref.back() == '\n' ? 0 : 1);
  if (lines > kMaxReferenceLines)
    return Problem{kMaxReferenceLines + 1, std::to_string(lines) +
                                               " lines; a reference may have at most " +
                                               std::to_string(kMaxReferenceLines)};
  int line = 1, depth = 0;
  size_t line_start = 0;
  char quote = 0;
  for (size_t i = 0; i <= ref.size(); ++i) {
    char c = i < ref.size() ? ref[i] : '\n';
    if (c == '\n') {
      if (i - line_start > kMaxReferenceLineChars)
        return Problem{line, "a line of " + std::to_string(i - line_start) +
                                 " characters; the limit is " +
                                 std::to_string(kMaxReferenceLineChars)};
      ++line;
      line_start = i + 1;
      quote = 0;  // a string that runs past its line: TorchScript reports it
      continue;
    }
    if (quote) {
      if (c == '\\')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      while (i + 1 < ref.size() && ref[i + 1] != '\n') ++i;
    } else if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxReferenceDepth)
        return Problem{line, "brackets nested more than " + std::to_string(kMaxReferenceDepth) +
                                 " levels deep"};
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

// Reads one task file, remembering where each node came from for error messages.
class Loader {
 public:
  Loader(fs::path file, std::string text) : file_(std::move(file)), text_(std::move(text)) {}

  Task load() {
    if (text_.size() > kMaxTaskFileBytes)
      throw InputError(file_.string(), std::nullopt, "",
                       "more than " + std::to_string(kMaxTaskFileBytes) +
                           " bytes; a task file may have at most that");
    if (auto p = toml_problem(text_)) throw InputError(file_.string(), p->line, "", p->what);
    toml::table root;
    try {
      root = toml::parse(text_, file_.string());
    } catch (const toml::parse_error& e) {
      throw InputError(file_.string(), static_cast<int>(e.source().begin.line), "",
                       "not valid TOML: " + std::string(e.description()));
    }
    for (auto&& [key, node] : root) {
      if (!kTopLevelKeys.count(std::string(key.str())))
        fail(&node, std::string(key.str()),
             "unknown key (known: name, summary, tags, reference, dims, inputs, outputs, check, "
             "constraints, deterministic, allow_tf32, flops, min_bytes, degenerate, batch_dim)");
    }
    Task t;
    t.file = file_;
    t.suite = file_.parent_path().filename().string();
    t.content_hash = content_hash(text_);
    t.name = required_string(root, "name");
    if (t.name != file_.stem().string())
      fail(root["name"].node(), "name",
           "'" + t.name + "' must equal the file name '" + file_.stem().string() + "'");
    if (!is_identifier(t.name)) fail(root["name"].node(), "name", "must be an identifier");
    t.summary = required_string(root, "summary");
    t.tags = string_array(root, "tags");
    t.degenerate = string_array(root, "degenerate");
    t.reference = required_string(root, "reference");
    reference_line_ = first_content_line(root["reference"].node());
    if (auto p = reference_problem(t.reference))
      throw InputError(
          file_.string(),
          reference_line_ ? std::optional<int>(*reference_line_ + p->line - 1) : std::nullopt,
          "reference", p->what);
    t.dims = load_dims(root);
    t.check_dims = load_check(root, t.dims);
    t.inputs = load_inputs(root, t.dims);
    t.outputs = load_outputs(root, t.dims);
    t.constraints = load_expressions(root, "constraints", t.dims);
    t.deterministic = optional_bool(root, "deterministic");
    t.allow_tf32 = optional_bool(root, "allow_tf32");
    t.flops = optional_expression(root, "flops", t.dims);
    t.min_bytes = optional_expression(root, "min_bytes", t.dims);
    t.batch_dim = load_batch_dim(root, t);
    validate_configurations(root, t);
    return t;
  }

  std::optional<int> reference_line() const { return reference_line_; }

 private:
  [[noreturn]] void fail(const toml::node* node, const std::string& field,
                         const std::string& problem) const {
    throw InputError(file_.string(), line_of(node), field, problem);
  }
  // The file line of a string value's first line: a multi-line string opened by """ and a line
  // break starts on the next line.
  std::optional<int> first_content_line(const toml::node* node) const {
    std::optional<int> line = line_of(node);
    if (!line) return line;
    std::istringstream lines(text_);
    std::string l;
    for (int i = 0; i < *line && std::getline(lines, l); ++i) {
    }
    while (!l.empty() && (l.back() == ' ' || l.back() == '\r')) l.pop_back();
    bool opens_block = l.size() >= 3 && (l.compare(l.size() - 3, 3, "\"\"\"") == 0 ||
                                         l.compare(l.size() - 3, 3, "'''") == 0);
    return opens_block ? *line + 1 : *line;
  }
  static std::optional<int> line_of(const toml::node* node) {
    if (!node || node->source().begin.line == 0) return std::nullopt;
    return static_cast<int>(node->source().begin.line);
  }

  std::string required_string(const toml::table& t, const std::string& key) const {
    const toml::node* n = t.get(key);
    if (!n) fail(&t, key, "missing (a string is required)");
    if (!n->is_string()) fail(n, key, "must be a string");
    std::string s = **n->as_string();
    if (s.find_first_not_of(" \t\r\n") == std::string::npos) fail(n, key, "must not be empty");
    return s;
  }
  bool optional_bool(const toml::table& t, const std::string& key) const {
    const toml::node* n = t.get(key);
    if (!n) return false;
    if (!n->is_boolean()) fail(n, key, "must be true or false");
    return **n->as_boolean();
  }
  std::vector<std::string> string_array(const toml::table& t, const std::string& key) const {
    std::vector<std::string> out;
    const toml::node* n = t.get(key);
    if (!n) return out;
    const toml::array* a = n->as_array();
    if (!a) fail(n, key, "must be an array of strings");
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      if (!e.is_string()) fail(&e, key + "[" + std::to_string(i) + "]", "must be a string");
      out.push_back(**e.as_string());
    }
    return out;
  }

  // An expression given as a TOML integer or string, whose names must all be dims.
  Expr expression(const toml::node* n, const std::string& field, const Dims& dims) const {
    Expr e = Expr::constant(0);
    if (n->is_integer()) {
      e = Expr::constant(**n->as_integer());
    } else if (n->is_string()) {
      try {
        e = Expr::parse(**n->as_string());
      } catch (const ExprError& err) {
        fail(n, field, err.what());
      }
    } else {
      fail(n, field, "must be an integer or an expression string");
    }
    for (const std::string& name : e.names())
      if (!dims.count(name))
        fail(n, field, "'" + name + "' is not a dim (dims: " + dim_list(dims) + ")");
    return e;
  }
  std::optional<Expr> optional_expression(const toml::table& t, const std::string& key,
                                          const Dims& dims) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    return expression(n, key, dims);
  }
  std::vector<Expr> load_expressions(const toml::table& t, const std::string& key,
                                     const Dims& dims) const {
    std::vector<Expr> out;
    const toml::node* n = t.get(key);
    if (!n) return out;
    const toml::array* a = n->as_array();
    if (!a) fail(n, key, "must be an array of expression strings");
    for (size_t i = 0; i < a->size(); ++i)
      out.push_back(expression(a->get(i), key + "[" + std::to_string(i) + "]", dims));
    return out;
  }
  static std::string dim_list(const Dims& dims) {
    std::string s;
    for (const auto& [k, v] : dims) s += (s.empty() ? "" : ", ") + k;
    return s.empty() ? "none" : s;
  }

  Dims dims_table(const toml::node* n, const std::string& field) const {
    const toml::table* t = n->as_table();
    if (!t) fail(n, field, "must be a table of dim = positive integer");
    Dims d;
    for (auto&& [key, value] : *t) {
      std::string k(key.str());
      if (!is_identifier(k)) fail(&value, field + "." + k, "a dim name must be an identifier");
      if (!value.is_integer()) fail(&value, field + "." + k, "must be an integer");
      int64_t v = **value.as_integer();
      if (v < 1) fail(&value, field + "." + k, "must be at least 1, got " + std::to_string(v));
      d[k] = v;
    }
    return d;
  }
  Dims load_dims(const toml::table& root) const {
    const toml::node* n = root.get("dims");
    if (!n) fail(&root, "dims", "missing: a [dims] table gives the timed configuration");
    Dims d = dims_table(n, "dims");
    if (d.empty()) fail(n, "dims", "must name at least one dim");
    return d;
  }
  std::vector<Dims> load_check(const toml::table& root, const Dims& timed) const {
    std::vector<Dims> out;
    const toml::node* n = root.get("check");
    if (!n) return out;
    const toml::table* t = n->as_table();
    if (!t) fail(n, "check", "must be a table");
    for (auto&& [key, value] : *t)
      if (key.str() != "dims")
        fail(&value, "check." + std::string(key.str()), "unknown key (known: dims)");
    const toml::node* dn = t->get("dims");
    if (!dn) return out;
    const toml::array* a = dn->as_array();
    if (!a) fail(dn, "check.dims", "must be an array of tables like { B = 1, N = 3 }");
    for (size_t i = 0; i < a->size(); ++i) {
      std::string field = "check.dims[" + std::to_string(i) + "]";
      Dims d = dims_table(a->get(i), field);
      for (const auto& [k, v] : timed)
        if (!d.count(k))
          fail(a->get(i), field, "missing dim '" + k + "' (every configuration gives every dim)");
      for (const auto& [k, v] : d)
        if (!timed.count(k))
          fail(a->get(i), field, "'" + k + "' is not a dim (dims: " + dim_list(timed) + ")");
      out.push_back(std::move(d));
    }
    return out;
  }

  Init parse_init(const toml::node* n, const std::string& field, Dtype dtype,
                  const Dims& dims) const {
    if (!n)
      fail(nullptr, field,
           "missing (randn, rand, uniform(lo, hi), normal(mean, std), randint(lo, hi), "
           "bernoulli(p))");
    if (!n->is_string()) fail(n, field, "must be a string such as \"randn\" or \"uniform(-1, 1)\"");
    std::string text = **n->as_string();
    Init init;
    init.text = text;
    size_t open = text.find('(');
    std::string kind = text.substr(0, open);
    kind.erase(std::remove_if(kind.begin(), kind.end(), ::isspace), kind.end());
    std::vector<std::string> args;
    if (open != std::string::npos) {
      if (text.back() != ')') fail(n, field, "'" + text + "': missing ')'");
      std::string inner = text.substr(open + 1, text.size() - open - 2);
      int depth = 0;
      std::string cur;
      for (char c : inner) {
        if (c == '(') ++depth;
        if (c == ')') --depth;
        if (c == ',' && depth == 0) {
          args.push_back(cur);
          cur.clear();
        } else {
          cur += c;
        }
      }
      if (!cur.empty() || !args.empty()) args.push_back(cur);
    }
    struct KindInfo {
      InitKind kind;
      size_t arity;
    };
    static const std::map<std::string, KindInfo> kinds = {
        {"randn", {InitKind::Randn, 0}},     {"rand", {InitKind::Rand, 0}},
        {"normal", {InitKind::Normal, 2}},   {"uniform", {InitKind::Uniform, 2}},
        {"randint", {InitKind::Randint, 2}}, {"bernoulli", {InitKind::Bernoulli, 1}}};
    auto it = kinds.find(kind);
    if (it == kinds.end())
      fail(n, field,
           "unknown init '" + kind +
               "' (known: randn, rand, uniform(lo, hi), normal(mean, std), randint(lo, hi), "
               "bernoulli(p))");
    init.kind = it->second.kind;
    if (args.size() != it->second.arity)
      fail(n, field,
           "'" + kind + "' takes " + std::to_string(it->second.arity) + " argument(s), got " +
               std::to_string(args.size()));
    for (const std::string& a : args) {
      Expr e = Expr::constant(0);
      try {
        e = Expr::parse(a);
      } catch (const ExprError& err) {
        fail(n, field, err.what());
      }
      for (const std::string& name : e.names())
        if (!dims.count(name))
          fail(n, field, "'" + name + "' is not a dim (dims: " + dim_list(dims) + ")");
      init.params.push_back(std::move(e));
    }
    bool ok =
        is_floating(dtype) ? (init.kind != InitKind::Randint && init.kind != InitKind::Bernoulli)
        : dtype == Dtype::Bool ? (init.kind == InitKind::Rand || init.kind == InitKind::Bernoulli)
                               : init.kind == InitKind::Randint;
    if (!ok)
      fail(n, field,
           "'" + kind + "' cannot draw " + std::string(dtype_name(dtype)) +
               " values (floating: randn, normal, rand, uniform; integer: randint; bool: rand, "
               "bernoulli)");
    return init;
  }

  // docs/task-format.md, "range_shift": a power of two for the second distribution of a
  // float32 input drawn as it is (no transform), within float32's range with room to spare.
  int range_shift_of(const toml::node* n, const InputSpec& in, const std::string& field) const {
    const auto* v = n->as_integer();
    if (!v || **v < -kMaxRangeShift || **v > kMaxRangeShift)
      fail(n, field,
           "must be an integer from -" + std::to_string(kMaxRangeShift) + " to " +
               std::to_string(kMaxRangeShift) +
               " (the second distribution's values times 2^range_shift)");
    if (in.dtype != Dtype::Float32 || !in.transform.empty())
      fail(n, field,
           "only a float32 input drawn as it is (no transform) takes a range_shift: float16 and "
           "bfloat16 values cannot hold it, and a transform would see shifted draws");
    if (in.init.kind == InitKind::Randint || in.init.kind == InitKind::Bernoulli)
      fail(n, field, "'" + in.init.text + "' draws no real values to shift");
    return static_cast<int>(**v);
  }
  static constexpr int kMaxRangeShift = 40;

  Dtype dtype_of(const toml::node* dt, const toml::node* parent, const std::string& field) const {
    if (!dt || !dt->is_string())
      fail(dt ? dt : parent, field,
           "missing (float32, float16, bfloat16, float64, int32, int64, bool)");
    auto dtype = parse_dtype(**dt->as_string());
    if (!dtype)
      fail(dt, field,
           "unknown dtype '" + **dt->as_string() +
               "' (known: float32, float16, bfloat16, float64, int32, int64, bool)");
    return *dtype;
  }
  std::vector<Expr> shape_of(const toml::table& t, const std::string& field,
                             const Dims& dims) const {
    const toml::node* sh = t.get("shape");
    if (!sh || !sh->is_array())
      fail(sh ? sh : &t, field, "missing: an array of dim names, integers or expressions");
    const toml::array& sa = *sh->as_array();
    std::vector<Expr> out;
    for (size_t j = 0; j < sa.size(); ++j)
      out.push_back(expression(sa.get(j), field + "[" + std::to_string(j) + "]", dims));
    return out;
  }

  // A computed input's transform: one line of TorchScript, compiled here (and kept compiled).
  std::string transform_of(const toml::node* n, const std::string& field) const {
    if (!n->is_string())
      fail(n, field, "must be a string: a TorchScript expression over the input's draws");
    std::string text = **n->as_string();
    size_t b = text.find_first_not_of(" \t"), e = text.find_last_not_of(" \t");
    text = b == std::string::npos ? "" : text.substr(b, e - b + 1);
    if (text.empty()) fail(n, field, "must not be empty");
    if (text.find_first_of("\r\n") != std::string::npos)
      fail(n, field, "must be one line (one TorchScript expression)");
    if (text.size() > kMaxTransformChars)
      fail(n, field,
           std::to_string(text.size()) + " characters; a transform may have at most " +
               std::to_string(kMaxTransformChars));
    if (auto p = reference_problem(text)) fail(n, field, p->what);
    return text;
  }
  std::vector<InputSpec> draws_of(const toml::node* n, const InputSpec& in,
                                  const std::string& field, const Dims& dims) const {
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables())
      fail(n, field, "must be an array of tables ([[inputs.draws]]: name, dtype, shape, init)");
    if (a->size() > kMaxInputDraws)
      fail(n, field,
           std::to_string(a->size()) + " draws; an input may have at most " +
               std::to_string(kMaxInputDraws));
    std::vector<InputSpec> out;
    std::set<std::string> names{in.name};
    for (size_t j = 0; j < a->size(); ++j) {
      const toml::table& t = *a->get(j)->as_table();
      InputSpec d;
      d.name = required_string(t, "name");
      std::string f = field + "[" + std::to_string(j) + "] (" + d.name + ")";
      for (auto&& [key, value] : t) {
        std::string k(key.str());
        if (k != "name" && k != "dtype" && k != "shape" && k != "init")
          fail(&value, f + "." + k, "unknown key (known: name, dtype, shape, init)");
      }
      if (!is_identifier(d.name)) fail(t.get("name"), f + ".name", "must be an identifier");
      if (!names.insert(d.name).second)
        fail(t.get("name"), f + ".name",
             "'" + d.name + "' is taken (the input's own draw is '" + in.name +
                 "'; each draw needs a name of its own)");
      d.dtype = t.get("dtype") ? dtype_of(t.get("dtype"), &t, f + ".dtype") : in.dtype;
      d.shape = shape_of(t, f + ".shape", dims);
      d.init = parse_init(t.get("init"), f + ".init", d.dtype, dims);
      out.push_back(std::move(d));
    }
    return out;
  }

  std::vector<InputSpec> load_inputs(const toml::table& root, const Dims& dims) const {
    const toml::node* n = root.get("inputs");
    if (!n) fail(&root, "inputs", "missing: declare each input with [[inputs]]");
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables())
      fail(n, "inputs", "must be an array of tables ([[inputs]])");
    if (a->empty()) fail(n, "inputs", "at least one input is required");
    std::vector<InputSpec> out;
    std::set<std::string> names;
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table& t = *a->get(i)->as_table();
      InputSpec in;
      in.name = required_string(t, "name");
      std::string field = "inputs[" + std::to_string(i) + "] (" + in.name + ")";
      for (auto&& [key, value] : t) {
        std::string k(key.str());
        if (k != "name" && k != "dtype" && k != "shape" && k != "init" && k != "transform" &&
            k != "draw_dtype" && k != "draws" && k != "range_shift")
          fail(&value, field + "." + k,
               "unknown key (known: name, dtype, shape, init, range_shift, transform, draw_dtype, "
               "draws)");
      }
      if (!is_identifier(in.name)) fail(t.get("name"), field + ".name", "must be an identifier");
      if (!names.insert(in.name).second)
        fail(t.get("name"), field + ".name", "duplicate input name");
      if (dims.count(in.name))
        fail(t.get("name"), field + ".name", "an input may not share a dim's name");
      in.dtype = dtype_of(t.get("dtype"), &t, field + ".dtype");
      in.shape = shape_of(t, field + ".shape", dims);
      const toml::node* transform = t.get("transform");
      if (transform) in.transform = transform_of(transform, field + ".transform");
      for (const char* key : {"draw_dtype", "draws"})
        if (!transform && t.get(key))
          fail(t.get(key), field + "." + key,
               "only a computed input (one with a transform, which reads its draws) has " +
                   std::string(key));
      if (const toml::node* dd = t.get("draw_dtype"))
        in.draw_dtype = dtype_of(dd, &t, field + ".draw_dtype");
      in.init = parse_init(t.get("init"), field + ".init", in.drawn_dtype(), dims);
      if (const toml::node* rs = t.get("range_shift"))
        in.init.range_shift = range_shift_of(rs, in, field + ".range_shift");
      if (const toml::node* dn = t.get("draws"))
        in.draws = draws_of(dn, in, field + ".draws", dims);
      if (transform) {
        try {
          compile_transform(in, file_.string());
        } catch (const InputError& e) {  // an F.x the prelude lacks
          fail(transform, field + ".transform", e.problem());
        } catch (const UsageError& e) {  // TorchScript's excerpt, pointed at the task file
          static const std::regex where(R"(File "<string>", line \d+)");
          std::optional<int> line = line_of(transform);
          fail(transform, field + ".transform",
               std::regex_replace(std::string(e.what()), where,
                                  "File \"" + file_.string() + "\"" +
                                      (line ? ", line " + std::to_string(*line) : "")));
        }
      }
      out.push_back(std::move(in));
    }
    return out;
  }

  std::vector<OutputSpec> load_outputs(const toml::table& root, const Dims& dims) const {
    std::vector<OutputSpec> out;
    const toml::node* n = root.get("outputs");
    if (!n) return out;
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables())
      fail(n, "outputs", "must be an array of tables ([[outputs]])");
    std::set<std::string> names;
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table& t = *a->get(i)->as_table();
      std::string field = "outputs[" + std::to_string(i) + "]";
      for (auto&& [key, value] : t) {
        std::string k(key.str());
        if (k != "name" && k != "dtype" && k != "tolerance" && k != "shape")
          fail(&value, field + "." + k, "unknown key (known: name, dtype, tolerance, shape)");
      }
      OutputSpec o;
      o.name = required_string(t, "name");
      if (!is_identifier(o.name)) fail(t.get("name"), field + ".name", "must be an identifier");
      if (!names.insert(o.name).second)
        fail(t.get("name"), field + ".name", "duplicate output name");
      if (const toml::node* dt = t.get("dtype")) {
        auto d = dt->is_string() ? parse_dtype(**dt->as_string()) : std::nullopt;
        if (!d)
          fail(dt, field + ".dtype",
               "unknown dtype (known: float32, float16, bfloat16, float64, int32, int64, bool)");
        o.dtype = d;
      }
      if (const toml::node* tol = t.get("tolerance")) {
        if (!tol->is_number()) fail(tol, field + ".tolerance", "must be a number");
        double v = tol->value<double>().value();
        if (!(v > 0 && v < 1)) fail(tol, field + ".tolerance", "must be in (0, 1)");
        o.tolerance = v;
      }
      if (t.get("shape")) o.shape = shape_of(t, field + ".shape", dims);
      out.push_back(std::move(o));
    }
    return out;
  }

  // A dim that every input's and every declared output's shape begins with (docs/task-format.md,
  // "batch_dim"); empty when the task declares none.
  std::string load_batch_dim(const toml::table& root, const Task& t) const {
    const toml::node* n = root.get("batch_dim");
    if (!n) return "";
    if (!n->is_string()) fail(n, "batch_dim", "must be a string naming a dim");
    std::string dim = **n->as_string();
    if (!t.dims.count(dim)) fail(n, "batch_dim", "'" + dim + "' is not one of the task's dims");
    auto begins_with_dim = [&](const std::vector<Expr>& shape) {
      return !shape.empty() && trim(shape[0].text()) == dim;
    };
    for (size_t i = 0; i < t.inputs.size(); ++i)
      if (!begins_with_dim(t.inputs[i].shape))
        fail(root["inputs"][i]["shape"].node(),
             "inputs[" + std::to_string(i) + "] (" + t.inputs[i].name + ").shape",
             "must begin with the batch_dim '" + dim + "' (the reference is computed a slice of '" +
                 dim + "' at a time where it does not fit whole)");
    for (size_t o = 0; o < t.outputs.size(); ++o)
      if (!t.outputs[o].shape.empty() && !begins_with_dim(t.outputs[o].shape))
        fail(root["outputs"][o]["shape"].node(), "outputs[" + std::to_string(o) + "].shape",
             "must begin with the batch_dim '" + dim + "'");
    return dim;
  }

  // Every configuration: constraints hold, shapes are positive, init bounds are sane.
  void validate_configurations(const toml::table& root, const Task& t) const {
    std::vector<Dims> configs = t.all_dims();
    for (size_t c = 0; c < configs.size(); ++c) {
      const Dims& d = configs[c];
      std::string where = c == 0 ? "the timed dims" : "check.dims[" + std::to_string(c - 1) + "]";
      for (size_t i = 0; i < t.constraints.size(); ++i) {
        bool ok = false;
        try {
          ok = t.constraints[i].eval_bool(d);
        } catch (const ExprError& e) {
          fail(root["constraints"][i].node(), "constraints[" + std::to_string(i) + "]", e.what());
        }
        if (!ok)
          fail(root["constraints"][i].node(), "constraints[" + std::to_string(i) + "]",
               "'" + t.constraints[i].text() + "' does not hold for " + where + " (" +
                   format_dims(d) + ")");
      }
      for (size_t i = 0; i < t.inputs.size(); ++i) {
        const InputSpec& in = t.inputs[i];
        const toml::node* node = root["inputs"][i].node();
        const toml::node* shape_node = root["inputs"][i]["shape"].node();
        const toml::node* init_node = root["inputs"][i]["init"].node();
        std::string field = "inputs[" + std::to_string(i) + "] (" + in.name + ")";
        try {
          for (size_t j = 0; j < in.shape.size(); ++j) {
            int64_t v = in.shape[j].eval_int(d);
            if (v < 1)
              fail(shape_node, field + ".shape[" + std::to_string(j) + "]",
                   "'" + in.shape[j].text() + "' is " + std::to_string(v) + " for " + where + " (" +
                       format_dims(d) + "); sizes must be at least 1");
          }
          (void)t.numel_of(in, d);  // overflow check
          check_init_bounds(in, d, init_node, field + ".init", where);
          for (size_t j = 0; j < in.draws.size(); ++j) {
            const InputSpec& e = in.draws[j];
            auto draw_node = root["inputs"][i]["draws"][j];
            std::string f = field + ".draws[" + std::to_string(j) + "] (" + e.name + ")";
            for (size_t k = 0; k < e.shape.size(); ++k)
              if (int64_t v = e.shape[k].eval_int(d); v < 1)
                fail(draw_node["shape"].node(), f + ".shape[" + std::to_string(k) + "]",
                     "'" + e.shape[k].text() + "' is " + std::to_string(v) + " for " + where +
                         " (" + format_dims(d) + "); sizes must be at least 1");
            (void)t.numel_of(e, d);
            check_init_bounds(e, d, draw_node["init"].node(), f + ".init", where);
          }
        } catch (const ExprError& e) {
          fail(node, field, std::string(e.what()) + " for " + where);
        }
      }
      try {
        (void)t.input_bytes(d);  // overflow check
      } catch (const ExprError& e) {
        fail(root["inputs"].node(), "inputs",
             std::string(e.what()) + " for " + where + " (" + format_dims(d) + ")");
      }
      try {
        if (t.flops) (void)t.flops->eval_real(d);
        if (t.min_bytes) (void)t.min_bytes->eval_real(d);
      } catch (const ExprError& e) {
        fail(&root, t.flops ? "flops" : "min_bytes", e.what());
      }
    }
  }
  void check_init_bounds(const InputSpec& in, const Dims& d, const toml::node* node,
                         const std::string& field, const std::string& where) const {
    const Init& init = in.init;
    auto value = [&](size_t k) { return init.params[k].eval_real(d); };
    std::string at = " for " + where + " (" + format_dims(d) + ")";
    switch (init.kind) {
      case InitKind::Uniform:
        if (!(value(0) < value(1)))
          fail(node, field, "'" + init.text + "': lo must be below hi" + at);
        break;
      case InitKind::Randint:
        for (size_t k = 0; k < 2; ++k)
          if (!std::holds_alternative<int64_t>(init.params[k].eval(d)))
            fail(node, field, "'" + init.text + "': randint bounds must be integers");
        if (init.params[1].eval_int(d) - init.params[0].eval_int(d) < 1)
          fail(node, field, "'" + init.text + "': needs lo < hi" + at);
        if (in.drawn_dtype() == Dtype::Int32 &&
            (init.params[0].eval_int(d) < INT32_MIN || init.params[1].eval_int(d) - 1 > INT32_MAX))
          fail(node, field, "'" + init.text + "': bounds do not fit int32" + at);
        break;
      case InitKind::Normal:
        if (!(value(1) > 0)) fail(node, field, "'" + init.text + "': std must be positive" + at);
        break;
      case InitKind::Bernoulli:
        if (!(value(0) >= 0 && value(0) <= 1))
          fail(node, field, "'" + init.text + "': p must be in [0, 1]" + at);
        break;
      default:
        break;
    }
  }

  fs::path file_;
  std::string text_;
  std::optional<int> reference_line_;
};

}  // namespace

std::string_view dtype_name(Dtype d) {
  for (const auto& [dt, name] : kDtypes)
    if (dt == d) return name;
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view name) {
  for (const auto& [dt, n] : kDtypes)
    if (n == name) return dt;
  return std::nullopt;
}

size_t dtype_size(Dtype d) {
  switch (d) {
    case Dtype::Float64:
    case Dtype::Int64:
      return 8;
    case Dtype::Float32:
    case Dtype::Int32:
      return 4;
    case Dtype::Float16:
    case Dtype::BFloat16:
      return 2;
    case Dtype::Bool:
      return 1;
  }
  return 0;
}

bool is_floating(Dtype d) {
  return d == Dtype::Float32 || d == Dtype::Float16 || d == Dtype::BFloat16 || d == Dtype::Float64;
}

std::vector<int64_t> Task::shape_of(const InputSpec& in, const Dims& d) const {
  std::vector<int64_t> s;
  for (const Expr& e : in.shape) s.push_back(e.eval_int(d));
  return s;
}

int64_t Task::numel_of(const InputSpec& in, const Dims& d) const {
  int64_t n = 1;
  for (int64_t v : shape_of(in, d))
    if (__builtin_mul_overflow(n, v, &n))
      throw ExprError("the shape of input '" + in.name + "' overflows 64 bits");
  return n;
}

int64_t Task::input_bytes(const Dims& d) const {
  int64_t total = 0;
  for (const InputSpec& in : inputs) {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(numel_of(in, d), static_cast<int64_t>(dtype_size(in.dtype)),
                               &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      throw ExprError("the bytes of the inputs (up to '" + in.name + "') overflow 64 bits");
  }
  return total;
}

std::vector<Dims> Task::all_dims() const {
  std::vector<Dims> out{dims};
  out.insert(out.end(), check_dims.begin(), check_dims.end());
  return out;
}

std::vector<Dims> draw_unseen_dims(const Task& task, uint64_t seed, int count,
                                   int64_t max_input_bytes,
                                   const std::function<bool(const Dims&)>& accept) {
  std::map<std::string, int64_t> high;
  for (const auto& [name, timed] : task.dims) {
    int64_t checked = 1;
    for (const Dims& d : task.check_dims) checked = std::max(checked, d.at(name));
    high[name] = std::max<int64_t>(1, std::min(timed, 2 * checked));
  }
  std::vector<Dims> seen = task.all_dims(), out;
  std::mt19937_64 rng(seed);
  auto valid = [&](const Dims& d) {
    if (std::find(seen.begin(), seen.end(), d) != seen.end()) return false;
    try {
      for (const Expr& c : task.constraints)
        if (!c.eval_bool(d)) return false;
      for (const InputSpec& in : task.inputs) {
        for (int64_t v : task.shape_of(in, d))
          if (v < 1) return false;
        for (const InputSpec& draw : in.draws)  // a computed input's further draws
          for (int64_t v : task.shape_of(draw, d))
            if (v < 1) return false;
      }
      return task.input_bytes(d) <= max_input_bytes && (!accept || accept(d));
    } catch (const ExprError&) {
      return false;
    }
  };
  // Attempts: the usual range; then, for a candidate's own conditions, up to the timed values; then
  // small values (for constraints that big ones break).
  int wide_from = 10000, small_from = accept ? 15000 : 10000;
  for (int attempt = 0; attempt < 20000 && static_cast<int>(out.size()) < count; ++attempt) {
    Dims d;
    for (const auto& [name, hi] : high) {
      int64_t top = attempt >= wide_from && attempt < small_from
                        ? std::max<int64_t>(1, task.dims.at(name))
                        : hi;
      int64_t v = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(top));
      if (rng() % 3 == 0 && v % 2 == 0 && v > 1)
        v -= 1;  // odd sizes catch vector-width assumptions
      if (attempt >= small_from)
        v = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::min<int64_t>(hi, 64)));
      d[name] = v;
    }
    if (valid(d)) {
      out.push_back(d);
      seen.push_back(d);
    }
  }
  return out;
}

std::string format_dims(const Dims& d) {
  std::string s;
  for (const auto& [k, v] : d) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return s;
}

std::string shape_expressions(const InputSpec& in) {
  std::string out = "[";
  for (size_t i = 0; i < in.shape.size(); ++i) out += (i ? ", " : "") + in.shape[i].text();
  return out + "]";
}

std::string values_text(const InputSpec& in) {
  std::string init = in.init.text.empty() ? "randn" : in.init.text;
  if (in.init.range_shift != 0)
    init += " (second: times 2^" + std::to_string(in.init.range_shift) + ")";
  if (in.transform.empty()) return init;
  if (in.draw_dtype) init += " (" + std::string(dtype_name(*in.draw_dtype)) + ")";
  std::string out = init + ", then " + in.transform;
  std::string draws;
  for (const InputSpec& d : in.draws)
    draws += (draws.empty() ? "" : "; ") + d.name + ": " + d.init.text + " " +
             std::string(dtype_name(d.dtype)) + " " + shape_expressions(d);
  return draws.empty() ? out : out + " (" + draws + ")";
}

Task load_task(const fs::path& file) {
  // A regular file of bounded size only: a FIFO or a link to /dev/zero named *.toml hung the read.
  return parse_task(file, read_input_file(file.string(), kMaxTaskFileBytes));
}

Task parse_task(const fs::path& file, std::string text) {
  Loader loader(file, std::move(text));
  Task t = loader.load();
  validate_reference(t, loader.reference_line());
  return t;
}

std::vector<Task> load_suite(const fs::path& dir) {
  std::vector<Task> out;
  for (const fs::path& p : resolve_tasks(dir.string(), dir.parent_path()))
    out.push_back(load_task(p));
  return out;
}

std::vector<fs::path> resolve_tasks(const std::string& spec, const fs::path& tasks_root) {
  // No std::filesystem call here may throw: a symlink loop or an unreadable folder is the user's
  // input, named with the reason.
  auto fail = [&](const fs::path& p, const std::error_code& ec) -> void {
    throw InputError(p.string(), std::nullopt, "", "cannot read: " + ec.message());
  };
  auto kind = [&](const fs::path& p) {
    std::error_code ec;
    fs::file_status st = fs::status(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
      fail(p, ec);
    return st.type();
  };
  auto toml_files_in = [&](const fs::path& dir) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".toml" && kind(it->path()) == fs::file_type::regular)
        files.push_back(it->path());
    if (ec) fail(dir, ec);
    std::sort(files.begin(), files.end());
    return files;
  };
  fs::path p(spec);
  if (kind(p) == fs::file_type::regular) return {p};
  if (kind(p) == fs::file_type::directory) return toml_files_in(p);
  if (kind(tasks_root / (spec + ".toml")) == fs::file_type::regular)
    return {tasks_root / (spec + ".toml")};
  if (kind(tasks_root / spec) == fs::file_type::directory) return toml_files_in(tasks_root / spec);
  std::vector<fs::path> found;
  if (kind(tasks_root) == fs::file_type::directory) {
    std::error_code ec;
    for (fs::directory_iterator it(tasks_root, ec), end; !ec && it != end; it.increment(ec))
      if (kind(it->path()) == fs::file_type::directory &&
          kind(it->path() / (spec + ".toml")) == fs::file_type::regular)
        found.push_back(it->path() / (spec + ".toml"));
    if (ec) fail(tasks_root, ec);
  }
  std::sort(found.begin(), found.end());
  if (found.size() == 1) return found;
  if (found.empty()) {
    // The suites there, to pick from: the folders holding task files.
    std::vector<std::string> suites;
    std::error_code ec;
    if (kind(tasks_root) == fs::file_type::directory)
      for (fs::directory_iterator it(tasks_root, ec), end; !ec && it != end; it.increment(ec))
        if (kind(it->path()) == fs::file_type::directory && !toml_files_in(it->path()).empty())
          suites.push_back(it->path().filename().string());
    std::sort(suites.begin(), suites.end());
    std::string there;
    for (const std::string& suite : suites) there += (there.empty() ? "" : ", ") + suite;
    throw UsageError("no task or suite named '" + spec +
                     "' (looked for a file, a folder, and under " + tasks_root.string() + "; " +
                     (there.empty() ? "no suites there" : "suites there: " + there) + ")");
  }
  std::string names;
  for (const auto& f : found) names += " " + f.parent_path().filename().string() + "/" + spec;
  throw UsageError("'" + spec + "' is ambiguous; say which:" + names);
}

fs::path default_tasks_root() {
  if (const char* env = std::getenv("KFORGE_TASKS"); env && *env) return env;
  if (fs::is_directory("tasks/smoke")) return fs::absolute("tasks");
  return KFORGE_SOURCE_TASKS_DIR;
}

}  // namespace kforge::tasks
