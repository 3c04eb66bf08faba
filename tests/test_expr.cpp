#include <gtest/gtest.h>
#include <cmath>

#include "kforge/common/expr.h"
#include "kforge/common/strings.h"

using kforge::Expr;
using kforge::ExprError;
using kforge::IntNames;

namespace {

const IntNames kNames = {{"N", 1000}, {"BLOCK", 256}, {"C", 64}};

TEST(Expr, IntegerArithmeticFollowsC) {
  EXPECT_EQ(Expr::parse("N * 2 + 1").eval_int(kNames), 2001);
  EXPECT_EQ(Expr::parse("N / 3").eval_int(kNames), 333);
  EXPECT_EQ(Expr::parse("-7 / 2").eval_int(kNames), -3);
  EXPECT_EQ(Expr::parse("N % 7").eval_int(kNames), 1000 % 7);
  EXPECT_EQ(Expr::parse("(N + 1) * (BLOCK - 1)").eval_int(kNames), 1001 * 255);
  EXPECT_EQ(Expr::parse("-(N)").eval_int(kNames), -1000);
}

TEST(Expr, Functions) {
  EXPECT_EQ(Expr::parse("ceil_div(N, BLOCK)").eval_int(kNames), 4);
  EXPECT_EQ(Expr::parse("ceil_div(1024, BLOCK)").eval_int(kNames), 4);
  EXPECT_EQ(Expr::parse("min(N, BLOCK)").eval_int(kNames), 256);
  EXPECT_EQ(Expr::parse("max(N, BLOCK)").eval_int(kNames), 1000);
  EXPECT_EQ(Expr::parse("abs(-5)").eval_int(kNames), 5);
  EXPECT_DOUBLE_EQ(Expr::parse("1.0 / sqrt(C)").eval_real(kNames), 0.125);
  EXPECT_DOUBLE_EQ(Expr::parse("-1.0 / sqrt(27 * C)").eval_real(kNames),
                   -1.0 / std::sqrt(27.0 * 64));
}

TEST(Expr, ComparisonsAndLogic) {
  EXPECT_TRUE(Expr::parse("C % 8 == 0").eval_bool(kNames));
  EXPECT_FALSE(Expr::parse("C % 7 == 0").eval_bool(kNames));
  EXPECT_TRUE(Expr::parse("BLOCK * 4 <= 49152 && N > 0").eval_bool(kNames));
  EXPECT_TRUE(Expr::parse("N < 10 or C >= 64").eval_bool(kNames));
  EXPECT_TRUE(Expr::parse("not (N < 10)").eval_bool(kNames));
  EXPECT_TRUE(Expr::parse("N != 3").eval_bool(kNames));
}

TEST(Expr, RealsStayReal) {
  EXPECT_THROW(Expr::parse("1.5 * N").eval_int(kNames), ExprError);
  EXPECT_DOUBLE_EQ(Expr::parse("1.5 * N").eval_real(kNames), 1500.0);
  EXPECT_DOUBLE_EQ(Expr::parse("1e-3 * N").eval_real(kNames), 1.0);
}

TEST(Expr, NamesAreCollected) {
  auto names = Expr::parse("ceil_div(N, BLOCK) * C + 3").names();
  EXPECT_EQ(names, (std::set<std::string>{"BLOCK", "C", "N"}));
}

void expect_error(const std::string& text, const std::string& fragment,
                  const IntNames& names = kNames) {
  try {
    Expr::parse(text).eval(names);
    ADD_FAILURE() << "no error for " << text;
  } catch (const ExprError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Expr, ErrorsNameTheProblem) {
  expect_error("N * M", "unknown name 'M'");
  expect_error("N / (C - 64)", "division by zero");
  expect_error("N % 0", "division by zero");
  expect_error("9223372036854775807 + 1", "overflow");
  expect_error("N * 9223372036854775807", "overflow");
  expect_error("-9223372036854775807 - 2", "overflow");
  expect_error("ceil_div(N, 0)", "non-positive");
  expect_error("foo(N)", "unknown function 'foo'");
  expect_error("min(N)", "takes 2 argument(s)");
  expect_error("(N + 1", "expected ')'");
  expect_error("N +", "ends too early");
  expect_error("N $ 2", "unexpected '$'");
  expect_error("sqrt(0 - N)", "negative");
  expect_error("99999999999999999999", "out of range");
}

// Issue 16: expressions come from LLM plans. Deep or long input is an error that names the
// problem, never a stack overflow; messages stay printable UTF-8 whatever the input bytes.
TEST(Expr, DeepNestingIsAnErrorNotACrash) {
  const std::string deep_parens =
      std::string(2000, '(') + "1" + std::string(2000, ')');  // within 4096 chars
  const std::string deep_minus = [] {
    std::string s;
    for (int i = 0; i < 1300; ++i) s += "-(";
    return s + "N" + std::string(1300, ')');
  }();
  for (const std::string& text : {deep_parens, deep_minus, std::string(4000, '!') + "N", [] {
                                    std::string s;
                                    for (int i = 0; i < 450; ++i) s += "min(1, ";
                                    return s + "1" + std::string(450, ')');
                                  }()}) {
    try {
      Expr::parse(text);
      ADD_FAILURE() << "no error for " << text.substr(0, 40);
    } catch (const ExprError& e) {
      EXPECT_NE(std::string(e.what()).find("nests more than 64 levels"), std::string::npos)
          << e.what();
      EXPECT_LT(std::string(e.what()).size(), 400u);  // the expression is quoted in part
    }
  }
  EXPECT_EQ(Expr::parse(std::string(60, '(') + "N" + std::string(60, ')')).eval_int(kNames), 1000);
}

TEST(Expr, LongInputIsAnErrorAndLongSumsAreWide) {
  std::string terms = "N";
  for (int i = 0; i < 100000; ++i) terms += "+N";
  expect_error(terms, "an expression may have at most 4096");
  // 2,000 terms fit the length cap: one wide node, evaluated without recursion per term.
  std::string sum = "1", product = "1", logic = "N > 0";
  for (int i = 1; i < 2000; ++i) sum += "+1";
  for (int i = 1; i < 1000; ++i) product += "*1";
  for (int i = 1; i < 300; ++i) logic += " && N > 0";
  EXPECT_EQ(Expr::parse(sum).eval_int(kNames), 2000);
  EXPECT_EQ(Expr::parse(product).eval_int(kNames), 1);
  EXPECT_TRUE(Expr::parse(logic).eval_bool(kNames));
  EXPECT_EQ(Expr::parse("10 - 3 - 2 - 1").eval_int(kNames), 4);  // still left to right
  EXPECT_EQ(Expr::parse("100 / 10 / 5 * 3 % 4").eval_int(kNames), 2);
  EXPECT_FALSE(Expr::parse("0 && N / 0").eval_bool(kNames));  // short-circuit in a chain
  EXPECT_TRUE(Expr::parse("0 || 1 || N / 0").eval_bool(kNames));
  EXPECT_EQ(Expr::parse(sum + " + N * BLOCK").names(), (std::set<std::string>{"BLOCK", "N"}));
}

TEST(Expr, BytesOutsideAsciiAreNamedInPrintableText) {
  for (const std::string& text :
       {std::string("N \xc3\xa9 2"), std::string("N + \x1b[31m"), std::string("N\xff")}) {
    try {
      Expr::parse(text);
      ADD_FAILURE() << "no error";
    } catch (const ExprError& e) {
      std::string what = e.what();
      EXPECT_TRUE(kforge::is_valid_utf8(what)) << what;
      EXPECT_EQ(what.find('\x1b'), std::string::npos) << what;
      EXPECT_NE(what.find("is not allowed: expressions are ASCII"), std::string::npos) << what;
    }
  }
}

TEST(Expr, TheSmallestInt64IsALiteral) {
  EXPECT_EQ(Expr::parse("-9223372036854775808").eval_int(kNames), INT64_MIN);
  EXPECT_EQ(Expr::constant(INT64_MIN).eval_int(kNames), INT64_MIN);
  EXPECT_EQ(Expr::constant(INT64_MIN).text(), "-9223372036854775808");
  expect_error("-9223372036854775809", "out of range");
  expect_error("1e400", "out of range");
  expect_error("-(-9223372036854775808)", "overflow");
}

}  // namespace
