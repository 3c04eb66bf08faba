#include <gtest/gtest.h>
#include <cmath>

#include "kforge/common/expr.h"

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
  EXPECT_DOUBLE_EQ(Expr::parse("-1.0 / sqrt(27 * C)").eval_real(kNames), -1.0 / std::sqrt(27.0 * 64));
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

void expect_error(const std::string& text, const std::string& fragment, const IntNames& names = kNames) {
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

}  // namespace
