// Expressions over named integers: task shapes and bounds, constraints, FLOP counts, and (later)
// launch plans. Integers stay exact (64-bit, overflow is an error); reals appear only through real
// literals or sqrt. `/` between integers is C integer division.
//
//   Expr e = Expr::parse("ceil_div(N, BLOCK) * 4");
//   int64_t v = e.eval_int(names);   // throws ExprError naming the problem
//
// Expressions come from plans an LLM wrote: parsing is bounded (kMaxExprChars of printable ASCII,
// kMaxExprDepth levels of nesting), and neither parsing, evaluation nor names() recurses deeper
// than kMaxExprDepth. Long sums and products are one wide node, not a deep tree.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include "kforge/common/error.h"

namespace kforge {

class ExprError : public Error {
 public:
  using Error::Error;
};

inline constexpr size_t kMaxExprChars = 4096;
inline constexpr int kMaxExprDepth = 64;

using Value = std::variant<int64_t, double>;
using NameLookup = std::function<std::optional<Value>(const std::string&)>;
using IntNames = std::map<std::string, int64_t>;

double to_double(const Value& v);
std::string to_string(const Value& v);

class Expr {
 public:
  struct Node;
  static Expr parse(const std::string& text);  // throws ExprError
  static Expr constant(int64_t v);

  Value eval(const NameLookup& lookup) const;
  Value eval(const IntNames& names) const;
  int64_t eval_int(const IntNames& names) const;  // error if the result is not an integer
  double eval_real(const IntNames& names) const;
  bool eval_bool(const IntNames& names) const;  // nonzero is true

  std::set<std::string> names() const;  // every identifier the expression reads
  // The expression as C++ over int64_t that computes what eval_int does: each operation a call of
  // `fn`(kforge_launch::IntOp::X, a, b) (a function the caller defines, reporting errors as
  // kforge_launch::apply's), each name as `name(n)` writes it. Throws ExprError for real numbers
  // (literals, sqrt), which only integer code can carry this way.
  std::string to_code(const std::function<std::string(const std::string&)>& name,
                      const std::string& fn) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace kforge
