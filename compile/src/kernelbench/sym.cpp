#include "kernelbench/sym.h"

#include "kforge/common/strings.h"

namespace kforge::compile::kb {
namespace {

using Op = Sym::Op;

SymP make(Op op, std::vector<SymP> kids, std::string text = "") {
  auto s = std::make_shared<Sym>();
  s->op = op;
  s->kids = std::move(kids);
  s->text = std::move(text);
  return s;
}

void overflow_if(bool overflow) {
  if (overflow) throw ExprError("64-bit overflow in a size the wrapper computes");
}

// a + b and a * b of constants, or ExprError on overflow.
int64_t plus(int64_t a, int64_t b) {
  int64_t r;
  overflow_if(__builtin_add_overflow(a, b, &r));
  return r;
}
int64_t times(int64_t a, int64_t b) {
  int64_t r;
  overflow_if(__builtin_mul_overflow(a, b, &r));
  return r;
}

// Binding strength when written: a kid binding less than its place needs parentheses.
int strength(const Sym& s) {
  switch (s.op) {
    case Op::Const:
      return s.value < 0 ? 12 : 13;
    case Op::Atom:
      return s.simple ? 13 : 0;
    case Op::Add:
      return 10;
    case Op::Mul:
    case Op::Div:
    case Op::Mod:
      return 11;
    case Op::Neg:
    case Op::Not:
      return 12;
    case Op::Cmp:
      return s.text == "==" || s.text == "!=" ? 7 : 8;
    case Op::And:
      return 3;
    case Op::Or:
      return 2;
    default:
      return 13;  // calls
  }
}

std::string write(const SymP& s, int place);

std::string call(const char* name, const Sym& s) {
  return std::string(name) + "(" + write(s.kids[0], 0) + ", " + write(s.kids[1], 0) + ")";
}

std::string bare(const Sym& s) {
  switch (s.op) {
    case Op::Const:
      return std::to_string(s.value);
    case Op::Atom:
      return s.text;
    case Op::Add: {
      std::string out = write(s.kids[0], 10);
      for (size_t i = 1; i < s.kids.size(); ++i) {
        const Sym& k = *s.kids[i];
        if (k.op == Op::Neg)
          out += " - " + write(k.kids[0], 11);
        else if (k.op == Op::Const && k.value < 0 && k.value != INT64_MIN)
          out += " - " + std::to_string(-k.value);
        else
          out += " + " + write(s.kids[i], 10);
      }
      return out;
    }
    case Op::Mul: {
      std::string out = write(s.kids[0], 11);
      for (size_t i = 1; i < s.kids.size(); ++i) out += " * " + write(s.kids[i], 12);
      return out;
    }
    case Op::Div:
      return write(s.kids[0], 11) + " / " + write(s.kids[1], 12);
    case Op::Mod:
      return write(s.kids[0], 11) + " % " + write(s.kids[1], 12);
    case Op::CeilDiv:
      return call("ceil_div", s);
    case Op::Min:
      return call("min", s);
    case Op::Max:
      return call("max", s);
    case Op::Neg:
      return "-" + write(s.kids[0], 12);
    case Op::Not:
      return "!" + write(s.kids[0], 12);
    case Op::Cmp:
      return write(s.kids[0], 9) + " " + s.text + " " + write(s.kids[1], 9);
    case Op::And:
      return write(s.kids[0], 3) + " && " + write(s.kids[1], 4);
    case Op::Or:
      return write(s.kids[0], 2) + " || " + write(s.kids[1], 3);
  }
  return "";
}

std::string write(const SymP& s, int place) {
  std::string t = bare(*s);
  return strength(*s) < place ? "(" + t + ")" : t;
}

std::vector<SymP> terms(const SymP& s, Op op) {
  return s->op == op ? s->kids : std::vector<SymP>{s};
}

// `x` alone, or the sum of `kids`.
SymP sum_of(std::vector<SymP> kids) {
  if (kids.empty()) return sym_const(0);
  if (kids.size() == 1) return kids[0];
  return make(Op::Add, std::move(kids));
}

// (X + (k - 1)) / k or (X + k - 1) / k with k a term: X, the sum without those terms.
std::optional<SymP> ceil_numerator(const SymP& a, const SymP& b) {
  if (a->op != Op::Add) return std::nullopt;
  std::vector<SymP> rest;
  int64_t c = 0;
  bool has_b = false;
  for (const SymP& k : a->kids) {
    if (k->op == Op::Const)
      c += k->value;
    else if (!has_b && sym_same(k, b))
      has_b = true;
    else
      rest.push_back(k);
  }
  std::optional<int64_t> bk = sym_constant(b);
  if (bk && *bk > 0 && !has_b && c == *bk - 1 && !rest.empty()) return sum_of(rest);
  if (has_b && c == -1 && !rest.empty()) return sum_of(rest);
  return std::nullopt;
}

}  // namespace

SymP sym_const(int64_t v) {
  auto s = std::make_shared<Sym>();
  s->value = v;
  return s;
}

SymP sym_atom(const std::string& text) {
  auto s = std::make_shared<Sym>();
  s->op = Op::Atom;
  s->text = text;
  s->simple = is_identifier(text);
  return s;
}

SymP sym_of(const Expr& e) {
  if (e.names().empty()) return sym_const(e.eval_int(IntNames{}));
  return sym_atom(e.text());
}

std::optional<int64_t> sym_constant(const SymP& s) {
  if (s->op == Op::Const) return s->value;
  return std::nullopt;
}

bool sym_same(const SymP& a, const SymP& b) {
  return sym_text(a) == sym_text(b);
}

std::string sym_text(const SymP& s) {
  return write(s, 0);
}

SymP sym_add(const SymP& a, const SymP& b) {
  std::vector<SymP> kids;
  int64_t c = 0;
  for (const SymP& side : {a, b})
    for (const SymP& k : terms(side, Op::Add)) {
      if (k->op == Op::Const)
        c = plus(c, k->value);
      else
        kids.push_back(k);
    }
  // x + (-x): a wrapper's `n - 1 + 1`.
  for (size_t i = 0; i < kids.size(); ++i)
    for (size_t j = i + 1; j < kids.size(); ++j)
      if ((kids[j]->op == Op::Neg && sym_same(kids[j]->kids[0], kids[i])) ||
          (kids[i]->op == Op::Neg && sym_same(kids[i]->kids[0], kids[j]))) {
        kids.erase(kids.begin() + static_cast<long>(j));
        kids.erase(kids.begin() + static_cast<long>(i));
        --i;
        break;
      }
  if (c != 0 || kids.empty()) kids.push_back(sym_const(c));
  return sum_of(std::move(kids));
}

SymP sym_neg(const SymP& a) {
  if (auto c = sym_constant(a)) {
    overflow_if(*c == INT64_MIN);
    return sym_const(-*c);
  }
  if (a->op == Op::Neg) return a->kids[0];
  return make(Op::Neg, {a});
}

SymP sym_sub(const SymP& a, const SymP& b) {
  return sym_add(a, sym_neg(b));
}

SymP sym_mul(const SymP& a, const SymP& b) {
  std::vector<SymP> kids;
  int64_t c = 1;
  for (const SymP& side : {a, b})
    for (const SymP& k : terms(side, Op::Mul)) {
      if (k->op == Op::Const)
        c = times(c, k->value);
      else
        kids.push_back(k);
    }
  if (c == 0) return sym_const(0);
  if (c != 1 || kids.empty()) kids.insert(kids.begin(), sym_const(c));
  if (kids.size() == 1) return kids[0];
  return make(Op::Mul, std::move(kids));
}

SymP sym_div(const SymP& a, const SymP& b) {
  std::optional<int64_t> x = sym_constant(a), y = sym_constant(b);
  if (y && *y == 0) throw ExprError("a division by zero in a size the wrapper computes");
  if (x && y) {
    overflow_if(*x == INT64_MIN && *y == -1);
    return sym_const(*x / *y);
  }
  if (y && *y == 1) return a;
  if (auto n = ceil_numerator(a, b)) return sym_ceil_div(*n, b);
  // (k * X) / d with d dividing k: exact.
  if (y && *y > 0 && a->op == Op::Mul && a->kids[0]->op == Op::Const &&
      a->kids[0]->value % *y == 0) {
    std::vector<SymP> rest(a->kids.begin() + 1, a->kids.end());
    SymP r = rest.size() == 1 ? rest[0] : make(Op::Mul, rest);
    return sym_mul(sym_const(a->kids[0]->value / *y), r);
  }
  return make(Op::Div, {a, b});
}

SymP sym_mod(const SymP& a, const SymP& b) {
  std::optional<int64_t> x = sym_constant(a), y = sym_constant(b);
  if (y && *y == 0) throw ExprError("a division by zero in a size the wrapper computes");
  if (x && y) return sym_const(*y == -1 ? 0 : *x % *y);
  if (y && *y == 1) return sym_const(0);
  return make(Op::Mod, {a, b});
}

SymP sym_ceil_div(const SymP& a, const SymP& b) {
  std::optional<int64_t> x = sym_constant(a), y = sym_constant(b);
  if (y && *y == 0) throw ExprError("a division by zero in a size the wrapper computes");
  if (x && y && *x >= 0 && *y > 0) return sym_const(*x / *y + (*x % *y != 0));
  if (y && *y == 1) return a;
  return make(Op::CeilDiv, {a, b});
}

SymP sym_min(const SymP& a, const SymP& b) {
  std::optional<int64_t> x = sym_constant(a), y = sym_constant(b);
  if (x && y) return sym_const(std::min(*x, *y));
  if (sym_same(a, b)) return a;
  return make(Op::Min, {a, b});
}

SymP sym_max(const SymP& a, const SymP& b) {
  std::optional<int64_t> x = sym_constant(a), y = sym_constant(b);
  if (x && y) return sym_const(std::max(*x, *y));
  if (sym_same(a, b)) return a;
  return make(Op::Max, {a, b});
}

SymP sym_cmp(const std::string& op, const SymP& a, const SymP& b) {
  std::optional<int64_t> x = sym_constant(a), y = sym_constant(b);
  if (x && y) {
    bool r = op == "<"    ? *x < *y
             : op == "<=" ? *x <= *y
             : op == ">"  ? *x > *y
             : op == ">=" ? *x >= *y
             : op == "==" ? *x == *y
                          : *x != *y;
    return sym_const(r);
  }
  if (sym_same(a, b) && (op == "==" || op == "<=" || op == ">=")) return sym_const(1);
  return make(Op::Cmp, {a, b}, op);
}

SymP sym_and(const SymP& a, const SymP& b) {
  std::optional<int64_t> x = sym_constant(a), y = sym_constant(b);
  if (x) return *x ? (y ? sym_const(*y != 0) : b) : sym_const(0);
  if (y) return *y ? a : sym_const(0);
  return make(Op::And, {a, b});
}

SymP sym_or(const SymP& a, const SymP& b) {
  std::optional<int64_t> x = sym_constant(a), y = sym_constant(b);
  if (x) return *x ? sym_const(1) : (y ? sym_const(*y != 0) : b);
  if (y) return *y ? sym_const(1) : a;
  return make(Op::Or, {a, b});
}

SymP sym_not(const SymP& a) {
  if (auto x = sym_constant(a)) return sym_const(*x == 0);
  return make(Op::Not, {a});
}

}  // namespace kforge::compile::kb
