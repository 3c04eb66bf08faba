// Integer expressions over a task's dims, as a KernelBench wrapper computes its sizes
// (`(n + block - 1) / block`), kept symbolic and written out as a kforge plan expression
// (docs/answer-format.md): constants folded, `(x + k - 1) / k` written `ceil_div(x, k)`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/expr.h"

namespace kforge::compile::kb {

struct Sym;
using SymP = std::shared_ptr<const Sym>;

struct Sym {
  enum class Op { Const, Atom, Add, Mul, Div, Mod, CeilDiv, Min, Max, Neg, Cmp, And, Or, Not };
  Op op = Op::Const;
  int64_t value = 0;   // Const
  std::string text;    // Atom: a dim, a device fact or a task's shape expression; Cmp: the operator
  bool simple = true;  // Atom: a name or a number (no parentheses needed around it)
  std::vector<SymP> kids;
};

SymP sym_const(int64_t v);
// A task expression (a shape entry): folded when it names no dim.
SymP sym_atom(const std::string& text);
SymP sym_of(const Expr& e);

// Each throws ExprError on overflow or a division by zero of constants.
SymP sym_add(const SymP& a, const SymP& b);
SymP sym_sub(const SymP& a, const SymP& b);
SymP sym_mul(const SymP& a, const SymP& b);
SymP sym_div(const SymP& a, const SymP& b);
SymP sym_mod(const SymP& a, const SymP& b);
SymP sym_ceil_div(const SymP& a, const SymP& b);
SymP sym_min(const SymP& a, const SymP& b);
SymP sym_max(const SymP& a, const SymP& b);
SymP sym_neg(const SymP& a);
SymP sym_cmp(const std::string& op, const SymP& a, const SymP& b);  // < <= > >= == !=
SymP sym_and(const SymP& a, const SymP& b);
SymP sym_or(const SymP& a, const SymP& b);
SymP sym_not(const SymP& a);

std::optional<int64_t> sym_constant(const SymP& s);
// As a kforge plan expression ("ceil_div(B * N, 256)").
std::string sym_text(const SymP& s);
bool sym_same(const SymP& a, const SymP& b);

}  // namespace kforge::compile::kb
