// The TorchScript prelude: the F.x rewrite, and that F_ functions compute what PyTorch computes.
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/jit.h>
#include <torch/torch.h>

#include "kforge/tasks/reference.h"

namespace {

using namespace kforge::tasks;

TEST(Prelude, RewritesFunctionalCalls) {
  EXPECT_EQ(rewrite_functional("return F.gelu(x)", "f", 1), "return F_gelu(x)");
  EXPECT_EQ(rewrite_functional("torch.nn.functional.relu (x)", "f", 1), "F_relu (x)");
  EXPECT_EQ(rewrite_functional("F.relu(F.linear(x, w))", "f", 1), "F_relu(F_linear(x, w))");
  // Not a call of the functional namespace: left alone.
  EXPECT_EQ(rewrite_functional("myF.relu(x) + x.F.relu(y)", "f", 1), "myF.relu(x) + x.F.relu(y)");
  EXPECT_EQ(rewrite_functional("F.relu", "f", 1), "F.relu");
}

TEST(Prelude, UnknownFunctionIsNamed) {
  try {
    rewrite_functional("def forward(x: Tensor):\n    return F.pixel_unshuffle(x, 2)\n", "task.toml",
                       10);
    FAIL();
  } catch (const kforge::InputError& e) {
    EXPECT_EQ(e.field(), "reference");
    EXPECT_EQ(e.line(), 11);
    EXPECT_NE(e.problem().find("F.pixel_unshuffle"), std::string::npos);
  }
}

TEST(Prelude, CompilesAndListsItsFunctions) {
  auto unit = torch::jit::compile(prelude_source());
  const auto& names = prelude_functions();
  EXPECT_GE(names.size(), 50u);
  for (const std::string& n : names) EXPECT_NE(unit->find_function("F_" + n), nullptr) << n;
  for (const char* required :
       {"gelu", "softmax", "layer_norm", "rms_norm", "conv2d", "mse_loss", "cross_entropy",
        "scaled_dot_product_attention", "max_pool2d", "kl_div"})
    EXPECT_TRUE(std::binary_search(names.begin(), names.end(), required)) << required;
}

// Runs `body` (a TorchScript expression over x, y, t) through the prelude.
torch::Tensor run(const std::string& body, const std::vector<torch::Tensor>& args) {
  std::string src = prelude_source() +
                    "\ndef forward(x: Tensor, y: Tensor, t: Tensor):\n    return " +
                    rewrite_functional(body, "test", 1) + "\n";
  auto unit = torch::jit::compile(src);
  std::vector<c10::IValue> iv(args.begin(), args.end());
  return unit->get_function("forward")(iv).toTensor();
}

// `number - tensor` runs as one aten::rsub, as PyTorch runs it from Python (TorchScript's builtin
// makes it neg + add, two passes over the data: level1/hinge_loss's eager baseline was 20 % slower
// than PyTorch's). A reference that writes neg + add itself keeps them.
TEST(Prelude, NumberMinusTensorIsOneRsubAsInPython) {
  Task task;
  task.file = "rsub.toml";
  task.reference =
      "def forward(x: Tensor) -> Tensor:\n"
      "    return torch.clamp(1 - x, min=0) + (2.5 - x) * 3 - (torch.neg(x) + 1)\n";
  task.inputs.resize(1);
  Reference ref = Reference::compile(task);
  std::string graph = ref.graph_text();
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = graph.find(what); at != std::string::npos; at = graph.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("aten::rsub("), 2u) << graph;
  EXPECT_EQ(count("aten::neg("), 1u) << "the reference's own torch.neg stays\n" << graph;
  torch::manual_seed(0);
  auto x = torch::randn({1000}, torch::kFloat32);
  auto want = torch::clamp(1 - x, 0) + (2.5 - x) * 3 - (torch::neg(x) + 1);
  EXPECT_TRUE(torch::equal(ref.run({x})[0], want)) << "the same numbers, bit for bit";
}

TEST(Prelude, FunctionsMatchPyTorchSemantics) {
  torch::manual_seed(0);
  auto x = torch::randn({4, 6, 8, 8}, torch::kFloat64);
  auto y = torch::randn({4, 6, 8, 8}, torch::kFloat64);
  auto t = torch::randint(0, 6, {4}, torch::kInt64);
  std::vector<torch::Tensor> a{x, y, t};
  auto close = [](const torch::Tensor& p, const torch::Tensor& q) {
    return torch::allclose(p, q, 1e-9, 1e-12);
  };
  EXPECT_TRUE(close(run("F.gelu(x, approximate='tanh')", a), torch::gelu(x, "tanh")));
  EXPECT_TRUE(close(run("F.leaky_relu(x, 0.2)", a), torch::leaky_relu(x, 0.2)));
  EXPECT_TRUE(close(run("F.softplus(x, beta=2.0)", a), torch::softplus(x, 2.0, 20.0)));
  EXPECT_TRUE(close(run("F.relu6(x * 4)", a), torch::clamp(x * 4, 0, 6)));
  EXPECT_TRUE(close(run("F.softsign(x)", a), x / (1 + x.abs())));
  EXPECT_TRUE(close(run("F.softmax(x, dim=-1)", a), torch::softmax(x, -1)));
  // Integer or list arguments, as in torch.nn.functional.
  EXPECT_TRUE(close(run("F.max_pool2d(x, 2)", a), torch::max_pool2d(x, {2, 2})));
  EXPECT_TRUE(
      close(run("F.avg_pool2d(x, [2, 2], stride=2)", a), torch::avg_pool2d(x, {2, 2}, {2, 2})));
  EXPECT_TRUE(close(run("F.conv2d(x, y[:, :, :3, :3], None, 1, 1)", a),
                    torch::conv2d(x, y.slice(2, 0, 3).slice(3, 0, 3), {}, 1, 1)));
  EXPECT_TRUE(close(run("F.mse_loss(x, y, reduction='sum')", a),
                    torch::mse_loss(x, y, at::Reduction::Sum)));
  auto logits = x.flatten(1);
  std::vector<torch::Tensor> b{logits, y, t};
  EXPECT_TRUE(close(run("F.cross_entropy(x, t)", b), torch::cross_entropy_loss(logits, t)));
  EXPECT_TRUE(close(run("F.kl_div(torch.log_softmax(x, -1), torch.softmax(y.flatten(1), -1), "
                        "reduction='batchmean')",
                        b),
                    torch::kl_div(torch::log_softmax(logits, -1), torch::softmax(y.flatten(1), -1),
                                  at::Reduction::Sum) /
                        4));
  // rms_norm and attention: the definitions PyTorch documents.
  auto w = torch::randn({8}, torch::kFloat64);
  std::vector<torch::Tensor> c{x, w, t};
  auto rms = x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * w;
  EXPECT_TRUE(close(run("F.rms_norm(x, [8], y, eps=1e-6)", c), rms));
  auto q = x, k = y;
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(8.0);
  auto causal = torch::ones({8, 8}, torch::kBool).triu(1);
  auto expected = torch::matmul(torch::softmax(scores.masked_fill(causal, -INFINITY), -1), x);
  EXPECT_TRUE(close(run("F.scaled_dot_product_attention(x, y, x, is_causal=True)", a), expected));
}

}  // namespace
