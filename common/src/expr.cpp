#include "kforge/common/expr.h"

#include <kforge_launch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

namespace kforge {

struct Expr::Node {
  // Chain: args[0] ops[0] args[1] ops[1] args[2] ..., left to right, for the left-associative
  // operators (|| && + - * / %), so that long sums are one wide node, not a deep tree.
  enum class Kind { Number, Name, Unary, Binary, Chain, Call } kind;
  Value number{int64_t{0}};
  std::string name;  // identifier, operator or function name
  std::vector<std::shared_ptr<const Node>> args;
  std::vector<std::string> ops;  // Chain only
  int height = 1;                // 1 for a leaf; evaluation recurses this deep
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;
using Kind = Expr::Node::Kind;

// The expression for an error message: at most 120 characters, control and non-ASCII bytes
// escaped (the text may come from an LLM).
std::string quoted(const std::string& text, bool say_length = true) {
  std::string shown = text.size() > 120 ? text.substr(0, 120) : text;
  std::string out = "\"";
  for (char ch : shown) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  out += "\"";
  if (text.size() > 120 && say_length)
    out += " (" + std::to_string(text.size()) + " characters, shown in part)";
  return out;
}

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  NodePtr parse() {
    if (s_.size() > kMaxExprChars)
      throw ExprError("in expression " + quoted(s_, false) + "...: " + std::to_string(s_.size()) +
                      " characters; an expression may have at most " +
                      std::to_string(kMaxExprChars));
    for (size_t i = 0; i < s_.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(s_[i]);
      if ((c < 0x20 && !std::isspace(c)) || c >= 0x7f) {
        pos_ = i;
        char buf[8];
        std::snprintf(buf, sizeof buf, "0x%02X", c);
        fail(std::string("the byte ") + buf +
             " is not allowed: expressions are ASCII (names, numbers, operators)");
      }
    }
    NodePtr n = parse_or();
    skip_space();
    if (pos_ != s_.size()) fail("unexpected '" + s_.substr(pos_, 1) + "'");
    return n;
  }

 private:
  // Counts the parser's nesting (parentheses, calls, unary operators): the recursion stops at
  // kMaxExprDepth levels, whatever the input.
  class Nesting {
   public:
    explicit Nesting(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxExprDepth) p_.too_deep();
    }
    ~Nesting() { --p_.depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& p_;
  };

  [[noreturn]] void fail(const std::string& what) const {
    throw ExprError("in expression " + quoted(s_) + " at column " + std::to_string(pos_ + 1) +
                    ": " + what);
  }
  [[noreturn]] void too_deep() const {
    fail("nests more than " + std::to_string(kMaxExprDepth) +
         " levels deep (parentheses, calls, operators)");
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool accept(const std::string& tok) {
    skip_space();
    if (s_.compare(pos_, tok.size(), tok) != 0) return false;
    // Keyword operators must not be the prefix of an identifier ("order" is not "or" + "der").
    if (std::isalpha(static_cast<unsigned char>(tok[0]))) {
      size_t end = pos_ + tok.size();
      if (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_'))
        return false;
    }
    pos_ += tok.size();
    return true;
  }
  NodePtr make(Kind k, std::string name, std::vector<NodePtr> args,
               std::vector<std::string> ops = {}) const {
    auto n = std::make_shared<Expr::Node>();
    n->kind = k;
    n->name = std::move(name);
    n->args = std::move(args);
    n->ops = std::move(ops);
    for (const auto& a : n->args) n->height = std::max(n->height, a->height + 1);
    if (n->height > kMaxExprDepth) too_deep();
    return n;
  }
  // A left-associative chain of one precedence level: one node, however many operands.
  template <typename Next>
  NodePtr chain(Next next, std::initializer_list<std::pair<const char*, const char*>> ops) {
    std::vector<NodePtr> args{(this->*next)()};
    std::vector<std::string> names;
    while (true) {
      const char* found = nullptr;
      for (const auto& [tok, op] : ops)
        if (accept(tok)) {
          found = op;
          break;
        }
      if (!found) break;
      names.push_back(found);
      args.push_back((this->*next)());
    }
    if (args.size() == 1) return args[0];
    return make(Kind::Chain, "", std::move(args), std::move(names));
  }

  NodePtr parse_or() {
    Nesting nest(*this);
    return chain(&Parser::parse_and, {{"||", "||"}, {"or", "||"}});
  }
  NodePtr parse_and() { return chain(&Parser::parse_not, {{"&&", "&&"}, {"and", "&&"}}); }
  NodePtr parse_not() {
    skip_space();
    if (s_.compare(pos_, 2, "!=") != 0 && (accept("!") || accept("not"))) {
      Nesting nest(*this);
      return make(Kind::Unary, "!", {parse_not()});
    }
    return parse_cmp();
  }
  NodePtr parse_cmp() {
    NodePtr l = parse_add();
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (accept(op)) return make(Kind::Binary, op, {l, parse_add()});
    }
    return l;
  }
  NodePtr parse_add() { return chain(&Parser::parse_mul, {{"+", "+"}, {"-", "-"}}); }
  NodePtr parse_mul() { return chain(&Parser::parse_unary, {{"*", "*"}, {"/", "/"}, {"%", "%"}}); }
  NodePtr parse_unary() {
    if (accept("-")) {
      skip_space();
      // A negative literal is one number, so that -9223372036854775808 fits.
      if (pos_ < s_.size() &&
          (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.'))
        return parse_number(true);
      Nesting nest(*this);
      return make(Kind::Unary, "-", {parse_unary()});
    }
    if (accept("+")) {
      Nesting nest(*this);
      return parse_unary();
    }
    return parse_primary();
  }
  NodePtr parse_primary() {
    skip_space();
    if (pos_ >= s_.size()) fail("expression ends too early");
    char c = s_[pos_];
    if (accept("(")) {
      NodePtr n = parse_or();
      if (!accept(")")) fail("expected ')'");
      return n;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return parse_number(false);
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
        ++pos_;
      std::string id = s_.substr(start, pos_ - start);
      if (accept("(")) {
        std::vector<NodePtr> args;
        if (!accept(")")) {
          do args.push_back(parse_or());
          while (accept(","));
          if (!accept(")")) fail("expected ')' or ',' in call of " + id);
        }
        check_call(id, args.size());
        return make(Kind::Call, id, std::move(args));
      }
      return make(Kind::Name, id, {});
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }
  void check_call(const std::string& fn, size_t n) {
    size_t want = (fn == "sqrt" || fn == "abs")                      ? 1
                  : (fn == "ceil_div" || fn == "min" || fn == "max") ? 2
                                                                     : 0;
    if (want == 0) fail("unknown function '" + fn + "' (known: ceil_div, min, max, abs, sqrt)");
    if (n != want)
      fail(fn + " takes " + std::to_string(want) + " argument(s), got " + std::to_string(n));
  }
  NodePtr parse_number(bool negative) {
    size_t start = pos_;
    bool real = false;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E') {
        real = true;
        ++pos_;
        if ((c == 'e' || c == 'E') && pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+'))
          ++pos_;
      } else {
        break;
      }
    }
    std::string tok = (negative ? "-" : "") + s_.substr(start, pos_ - start);
    auto n = std::make_shared<Expr::Node>();
    n->kind = Kind::Number;
    try {
      size_t used = 0;
      if (real)
        n->number = std::stod(tok, &used);
      else
        n->number = static_cast<int64_t>(std::stoll(tok, &used));
      if (used != tok.size()) fail("malformed number '" + tok + "'");
      if (real && !std::isfinite(std::get<double>(n->number)))
        fail("number '" + tok + "' is out of range");
    } catch (const std::out_of_range&) {
      fail("number '" + tok + "' is out of range");
    } catch (const std::invalid_argument&) {
      fail("malformed number '" + tok + "'");
    }
    return n;
  }

  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

ExprError eval_error(const std::string& text, const std::string& what) {
  return ExprError("in expression " + quoted(text) + ": " + what);
}

// Integer `a op b` by kforge_launch::apply, the arithmetic exported libraries run too.
int64_t int_op(kforge_launch::IntOp op, int64_t a, int64_t b, const std::string& text) {
  int64_t r = 0;
  kforge_launch::IntError e = kforge_launch::apply(op, a, b, &r);
  if (e == kforge_launch::IntError::Overflow &&
      (op == kforge_launch::IntOp::Add || op == kforge_launch::IntOp::Sub ||
       op == kforge_launch::IntOp::Mul))
    throw ExprError("64-bit integer overflow in " + quoted(text));
  if (e != kforge_launch::IntError::None) throw eval_error(text, kforge_launch::describe(e));
  return r;
}

std::optional<kforge_launch::IntOp> int_op_named(const std::string& op) {
  using kforge_launch::IntOp;
  static const std::map<std::string, IntOp> ops = {
      {"+", IntOp::Add}, {"-", IntOp::Sub}, {"*", IntOp::Mul}, {"/", IntOp::Div},
      {"%", IntOp::Mod}, {"==", IntOp::Eq}, {"!=", IntOp::Ne}, {"<", IntOp::Lt},
      {"<=", IntOp::Le}, {">", IntOp::Gt},  {">=", IntOp::Ge}};
  auto it = ops.find(op);
  if (it == ops.end()) return std::nullopt;
  return it->second;
}

// `x op y` for the comparison operators (1 or 0), or nullopt for any other operator.
template <typename T>
std::optional<int64_t> compare(const std::string& op, T x, T y) {
  if (op == "==") return int64_t{x == y};
  if (op == "!=") return int64_t{x != y};
  if (op == "<") return int64_t{x < y};
  if (op == "<=") return int64_t{x <= y};
  if (op == ">") return int64_t{x > y};
  if (op == ">=") return int64_t{x >= y};
  return std::nullopt;
}

// `a op b` for the arithmetic and comparison operators.
Value apply(const std::string& op, const Value& a, const Value& b, const std::string& text) {
  auto* ia = std::get_if<int64_t>(&a);
  auto* ib = std::get_if<int64_t>(&b);
  if (ia && ib) {
    if (auto o = int_op_named(op)) return int_op(*o, *ia, *ib, text);
  } else {
    double x = to_double(a), y = to_double(b);
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "/") {
      if (y == 0.0) throw eval_error(text, "division by zero");
      return x / y;
    }
    if (op == "%") throw eval_error(text, "'%' needs integers");
    if (auto c = compare(op, x, y)) return *c;
  }
  throw eval_error(text, "unknown operator " + op);
}

// Recurses as deep as the tree is high: at most kMaxExprDepth (the parser checks).
Value eval_node(const Expr::Node& n, const NameLookup& lookup, const std::string& text) {
  auto err = [&](const std::string& what) { return eval_error(text, what); };
  switch (n.kind) {
    case Kind::Number:
      return n.number;
    case Kind::Name: {
      std::optional<Value> v = lookup(n.name);
      if (!v) throw err("unknown name '" + n.name + "'");
      return *v;
    }
    case Kind::Unary: {
      Value a = eval_node(*n.args[0], lookup, text);
      if (n.name == "!") return int64_t{to_double(a) == 0.0};
      if (auto* i = std::get_if<int64_t>(&a)) return int_op(kforge_launch::IntOp::Sub, 0, *i, text);
      return -std::get<double>(a);
    }
    case Kind::Binary:
      return apply(n.name, eval_node(*n.args[0], lookup, text), eval_node(*n.args[1], lookup, text),
                   text);
    case Kind::Chain: {
      Value acc = eval_node(*n.args[0], lookup, text);
      for (size_t i = 1; i < n.args.size(); ++i) {
        const std::string& op = n.ops[i - 1];
        if (op == "&&" || op == "||") {  // short-circuit, as C
          bool lhs = to_double(acc) != 0.0;
          if (op == "&&" && !lhs) return int64_t{0};
          if (op == "||" && lhs) return int64_t{1};
          acc = int64_t{to_double(eval_node(*n.args[i], lookup, text)) != 0.0};
        } else {
          acc = apply(op, acc, eval_node(*n.args[i], lookup, text), text);
        }
      }
      return acc;
    }
    case Kind::Call: {
      std::vector<Value> v;
      for (const auto& arg : n.args) v.push_back(eval_node(*arg, lookup, text));
      const std::string& fn = n.name;
      if (fn == "sqrt") {
        double x = to_double(v[0]);
        if (x < 0) throw err("sqrt of a negative number");
        return std::sqrt(x);
      }
      if (fn == "abs") {
        if (auto* i = std::get_if<int64_t>(&v[0])) {
          if (*i == INT64_MIN) throw err("64-bit integer overflow");
          return *i < 0 ? -*i : *i;
        }
        return std::fabs(std::get<double>(v[0]));
      }
      auto* ia = std::get_if<int64_t>(&v[0]);
      auto* ib = std::get_if<int64_t>(&v[1]);
      if (fn == "ceil_div") {
        if (!ia || !ib) throw err("ceil_div needs integers");
        return int_op(kforge_launch::IntOp::CeilDiv, *ia, *ib, text);
      }
      if (ia && ib)
        return int_op(fn == "min" ? kforge_launch::IntOp::Min : kforge_launch::IntOp::Max, *ia, *ib,
                      text);
      double x = to_double(v[0]), y = to_double(v[1]);
      return fn == "min" ? std::min(x, y) : std::max(x, y);
    }
  }
  throw err("malformed expression");
}

}  // namespace

double to_double(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

std::string to_string(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  std::ostringstream os;
  os << std::get<double>(v);
  return os.str();
}

Expr Expr::parse(const std::string& text) {
  Expr e;
  e.text_ = text;
  e.root_ = Parser(e.text_).parse();
  return e;
}

Expr Expr::constant(int64_t v) {
  Expr e;
  e.text_ = std::to_string(v);
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::Number;
  n->number = v;
  e.root_ = std::move(n);
  return e;
}

Value Expr::eval(const NameLookup& lookup) const {
  return eval_node(*root_, lookup, text_);
}

Value Expr::eval(const IntNames& names) const {
  return eval([&](const std::string& n) -> std::optional<Value> {
    auto it = names.find(n);
    if (it == names.end()) return std::nullopt;
    return it->second;
  });
}

int64_t Expr::eval_int(const IntNames& names) const {
  Value v = eval(names);
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  throw ExprError("in expression " + quoted(text_) + ": expected an integer, got the real number " +
                  to_string(v));
}

double Expr::eval_real(const IntNames& names) const {
  return to_double(eval(names));
}

bool Expr::eval_bool(const IntNames& names) const {
  return to_double(eval(names)) != 0.0;
}

namespace {

std::string code_of(const Expr::Node& n, const std::function<std::string(const std::string&)>& name,
                    const std::string& fn, const std::string& text) {
  auto call = [&](const std::string& op, const std::string& a, const std::string& b) {
    return fn + "(kforge_launch::IntOp::" + op + ", " + a + ", " + b + ")";
  };
  auto sub = [&](size_t i) { return code_of(*n.args[i], name, fn, text); };
  static const std::map<std::string, std::string> ops = {
      {"+", "Add"}, {"-", "Sub"}, {"*", "Mul"}, {"/", "Div"}, {"%", "Mod"}, {"==", "Eq"},
      {"!=", "Ne"}, {"<", "Lt"},  {"<=", "Le"}, {">", "Gt"},  {">=", "Ge"}};
  switch (n.kind) {
    case Kind::Number:
      if (auto* i = std::get_if<int64_t>(&n.number))
        return *i == INT64_MIN ? "INT64_MIN" : "int64_t{" + std::to_string(*i) + "}";
      throw eval_error(text, "a real number (" + to_string(n.number) +
                                 ") cannot be exported: launch plans compute with integers");
    case Kind::Name:
      return name(n.name);
    case Kind::Unary:
      if (n.name == "!") return "int64_t{" + sub(0) + " == 0}";
      return call("Sub", "int64_t{0}", sub(0));
    case Kind::Binary:
      return call(ops.at(n.name), sub(0), sub(1));
    case Kind::Chain: {
      std::string acc = sub(0);
      for (size_t i = 1; i < n.args.size(); ++i) {
        const std::string& op = n.ops[i - 1];
        if (op == "&&")
          acc = "int64_t{(" + acc + ") != 0 && (" + sub(i) + ") != 0}";  // short-circuit, as eval
        else if (op == "||")
          acc = "int64_t{(" + acc + ") != 0 || (" + sub(i) + ") != 0}";
        else
          acc = call(ops.at(op), acc, sub(i));
      }
      return acc;
    }
    case Kind::Call:
      if (n.name == "ceil_div") return call("CeilDiv", sub(0), sub(1));
      if (n.name == "min") return call("Min", sub(0), sub(1));
      if (n.name == "max") return call("Max", sub(0), sub(1));
      if (n.name == "abs") return call("Max", sub(0), call("Sub", "int64_t{0}", sub(0)));
      throw eval_error(text, n.name + " cannot be exported: launch plans compute with integers");
  }
  throw eval_error(text, "malformed expression");
}

}  // namespace

std::string Expr::to_code(const std::function<std::string(const std::string&)>& name,
                          const std::string& fn) const {
  return code_of(*root_, name, fn, text_);
}

std::set<std::string> Expr::names() const {
  std::set<std::string> out;
  std::vector<const Node*> todo{root_.get()};  // no recursion
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (n->kind == Node::Kind::Name) out.insert(n->name);
    for (const auto& a : n->args) todo.push_back(a.get());
  }
  return out;
}

}  // namespace kforge
