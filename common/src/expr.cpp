#include "kforge/common/expr.h"

#include <cctype>
#include <cmath>
#include <sstream>
#include <vector>

namespace kforge {

struct Expr::Node {
  enum class Kind { Number, Name, Unary, Binary, Call } kind;
  Value number{int64_t{0}};
  std::string name;  // identifier, operator or function name
  std::vector<std::shared_ptr<const Node>> args;
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;
using Kind = Expr::Node::Kind;

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  NodePtr parse() {
    NodePtr n = parse_or();
    skip_space();
    if (pos_ != s_.size()) fail("unexpected '" + s_.substr(pos_, 1) + "'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ExprError("in expression \"" + s_ + "\" at column " + std::to_string(pos_ + 1) + ": " +
                    what);
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
  static NodePtr make(Kind k, std::string name, std::vector<NodePtr> args) {
    auto n = std::make_shared<Expr::Node>();
    n->kind = k;
    n->name = std::move(name);
    n->args = std::move(args);
    return n;
  }

  NodePtr parse_or() {
    NodePtr l = parse_and();
    while (accept("||") || accept("or")) l = make(Kind::Binary, "||", {l, parse_and()});
    return l;
  }
  NodePtr parse_and() {
    NodePtr l = parse_not();
    while (accept("&&") || accept("and")) l = make(Kind::Binary, "&&", {l, parse_not()});
    return l;
  }
  NodePtr parse_not() {
    skip_space();
    if (s_.compare(pos_, 2, "!=") != 0 && (accept("!") || accept("not")))
      return make(Kind::Unary, "!", {parse_not()});
    return parse_cmp();
  }
  NodePtr parse_cmp() {
    NodePtr l = parse_add();
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (accept(op)) return make(Kind::Binary, op, {l, parse_add()});
    }
    return l;
  }
  NodePtr parse_add() {
    NodePtr l = parse_mul();
    while (true) {
      if (accept("+")) l = make(Kind::Binary, "+", {l, parse_mul()});
      else if (accept("-")) l = make(Kind::Binary, "-", {l, parse_mul()});
      else return l;
    }
  }
  NodePtr parse_mul() {
    NodePtr l = parse_unary();
    while (true) {
      if (accept("*")) l = make(Kind::Binary, "*", {l, parse_unary()});
      else if (accept("/")) l = make(Kind::Binary, "/", {l, parse_unary()});
      else if (accept("%")) l = make(Kind::Binary, "%", {l, parse_unary()});
      else return l;
    }
  }
  NodePtr parse_unary() {
    if (accept("-")) return make(Kind::Unary, "-", {parse_unary()});
    if (accept("+")) return parse_unary();
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
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return parse_number();
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
    size_t want = (fn == "sqrt" || fn == "abs") ? 1 : (fn == "ceil_div" || fn == "min" || fn == "max") ? 2 : 0;
    if (want == 0) fail("unknown function '" + fn + "' (known: ceil_div, min, max, abs, sqrt)");
    if (n != want)
      fail(fn + " takes " + std::to_string(want) + " argument(s), got " + std::to_string(n));
  }
  NodePtr parse_number() {
    size_t start = pos_;
    bool real = false;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E') {
        real = true;
        ++pos_;
        if ((c == 'e' || c == 'E') && pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
      } else {
        break;
      }
    }
    std::string tok = s_.substr(start, pos_ - start);
    auto n = std::make_shared<Expr::Node>();
    n->kind = Kind::Number;
    try {
      size_t used = 0;
      if (real) n->number = std::stod(tok, &used);
      else n->number = static_cast<int64_t>(std::stoll(tok, &used));
      if (used != tok.size()) fail("malformed number '" + tok + "'");
    } catch (const std::out_of_range&) {
      fail("number '" + tok + "' is out of range");
    } catch (const std::invalid_argument&) {
      fail("malformed number '" + tok + "'");
    }
    return n;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

// Applies a __builtin_*_overflow operation, throwing on overflow.
template <typename Op>
int64_t checked(Op op, int64_t x, int64_t y, const std::string& what) {
  int64_t r = 0;
  if (op(x, y, &r)) throw ExprError("64-bit integer overflow in " + what);
  return r;
}
constexpr auto kAdd = [](int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); };
constexpr auto kSub = [](int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); };
constexpr auto kMul = [](int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); };

Value eval_node(const Expr::Node& n, const NameLookup& lookup, const std::string& text) {
  auto err = [&](const std::string& what) -> ExprError {
    return ExprError("in expression \"" + text + "\": " + what);
  };
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
      if (auto* i = std::get_if<int64_t>(&a)) return checked(kSub, 0, *i, "\"" + text + "\"");
      return -std::get<double>(a);
    }
    case Kind::Binary: {
      const std::string& op = n.name;
      Value a = eval_node(*n.args[0], lookup, text);
      if (op == "&&" && to_double(a) == 0.0) return int64_t{0};
      if (op == "||" && to_double(a) != 0.0) return int64_t{1};
      Value b = eval_node(*n.args[1], lookup, text);
      if (op == "&&" || op == "||") return int64_t{to_double(b) != 0.0};
      auto* ia = std::get_if<int64_t>(&a);
      auto* ib = std::get_if<int64_t>(&b);
      if (ia && ib) {
        int64_t x = *ia, y = *ib;
        const std::string where = "\"" + text + "\"";
        if (op == "+") return checked(kAdd, x, y, where);
        if (op == "-") return checked(kSub, x, y, where);
        if (op == "*") return checked(kMul, x, y, where);
        if (op == "/" || op == "%") {
          if (y == 0) throw err("division by zero");
          if (x == INT64_MIN && y == -1) throw err("64-bit integer overflow");
          return op == "/" ? x / y : x % y;
        }
        if (op == "==") return int64_t{x == y};
        if (op == "!=") return int64_t{x != y};
        if (op == "<") return int64_t{x < y};
        if (op == "<=") return int64_t{x <= y};
        if (op == ">") return int64_t{x > y};
        if (op == ">=") return int64_t{x >= y};
      } else {
        double x = to_double(a), y = to_double(b);
        if (op == "+") return x + y;
        if (op == "-") return x - y;
        if (op == "*") return x * y;
        if (op == "/") {
          if (y == 0.0) throw err("division by zero");
          return x / y;
        }
        if (op == "%") throw err("'%' needs integers");
        if (op == "==") return int64_t{x == y};
        if (op == "!=") return int64_t{x != y};
        if (op == "<") return int64_t{x < y};
        if (op == "<=") return int64_t{x <= y};
        if (op == ">") return int64_t{x > y};
        if (op == ">=") return int64_t{x >= y};
      }
      throw err("unknown operator " + op);
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
        if (*ib <= 0) throw err("ceil_div by a non-positive number");
        if (*ia < 0) throw err("ceil_div of a negative number");
        return *ia / *ib + (*ia % *ib != 0);
      }
      if (ia && ib) return fn == "min" ? std::min(*ia, *ib) : std::max(*ia, *ib);
      double x = to_double(v[0]), y = to_double(v[1]);
      return fn == "min" ? std::min(x, y) : std::max(x, y);
    }
  }
  throw err("malformed expression");
}

void collect_names(const Expr::Node& n, std::set<std::string>& out) {
  if (n.kind == Kind::Name) out.insert(n.name);
  for (const auto& a : n.args) collect_names(*a, out);
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

Expr Expr::constant(int64_t v) { return parse(std::to_string(v)); }

Value Expr::eval(const NameLookup& lookup) const { return eval_node(*root_, lookup, text_); }

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
  throw ExprError("in expression \"" + text_ + "\": expected an integer, got the real number " +
                  to_string(v));
}

double Expr::eval_real(const IntNames& names) const { return to_double(eval(names)); }

bool Expr::eval_bool(const IntNames& names) const { return to_double(eval(names)) != 0.0; }

std::set<std::string> Expr::names() const {
  std::set<std::string> out;
  collect_names(*root_, out);
  return out;
}

}  // namespace kforge
