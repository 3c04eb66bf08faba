// The one cache of compiled task references (tasks/reference_cache.h): each task compiled once,
// whoever asks and from whichever thread; keyed by what compiling reads, never by the dims.
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "kforge/common/error.h"
#include "kforge/tasks/reference_cache.h"
#include "kforge/tasks/task.h"

namespace {

using namespace kforge::tasks;

Task task_computing(const std::string& body, const std::string& version) {
  Task t;
  t.file = "cache.toml";
  t.content_hash = version;
  t.reference = "def forward(x: Tensor) -> Tensor:\n    return " + body + "\n";
  t.inputs.resize(1);
  t.inputs[0].name = "x";
  t.inputs[0].shape = {kforge::Expr::parse("N")};
  t.dims = {{"N", 64}};
  return t;
}

TEST(ReferenceCache, CompilesEachTaskOnceForEveryDimsAndThread) {
  ReferenceCache cache;
  Task relu = task_computing("torch.relu(x)", "v1");
  std::shared_ptr<const Reference> first = cache.reference(relu);
  Task unseen = relu;  // admission's task: other dims, the same reference
  unseen.dims = {{"N", 7}};
  EXPECT_EQ(cache.reference(unseen), first);
  std::vector<std::thread> threads;
  std::vector<const Reference*> seen(8);
  for (size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&, i] { seen[i] = cache.reference(relu).get(); });
  for (auto& t : threads) t.join();
  for (const Reference* r : seen) EXPECT_EQ(r, first.get());
  EXPECT_EQ(cache.size(), 1u);
  std::vector<OutputInfo> outs = cache.outputs(relu);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].name, "out");
  EXPECT_EQ(outs[0].dtype, Dtype::Float32);
  EXPECT_EQ(outs[0].rank, 1u);
}

TEST(ReferenceCache, TasksThatCompileDifferentlyNeverShareAnEntry) {
  ReferenceCache cache;
  // One version (tasks built in memory, placeholder tasks) but different references.
  Task relu = task_computing("torch.relu(x)", "same");
  Task neg = task_computing("torch.neg(x)", "same");
  EXPECT_NE(cache.reference(relu), cache.reference(neg));
  Task half = relu;
  half.inputs[0].dtype = Dtype::Float16;
  EXPECT_EQ(cache.outputs(half).at(0).dtype, Dtype::Float16);
  EXPECT_EQ(cache.outputs(relu).at(0).dtype, Dtype::Float32);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(ReferenceCache, ABoundStartsAgainAndHandedOutReferencesLive) {
  ReferenceCache cache(2);
  std::shared_ptr<const Reference> kept = cache.reference(task_computing("x + 1", "a"));
  cache.reference(task_computing("x + 2", "b"));
  cache.reference(task_computing("x + 3", "c"));  // past the bound: starts again
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(kept->run({torch::ones({2})})[0][0].item<float>(), 2.0f);
}

TEST(ReferenceCache, AReferenceThatDoesNotCompileThrowsEveryTime) {
  ReferenceCache cache;
  Task bad = task_computing("torch.no_such_op(x)", "bad");
  EXPECT_THROW(cache.reference(bad), kforge::InputError);
  EXPECT_THROW(cache.outputs(bad), kforge::InputError);
}

TEST(ReferenceCache, TheProcessHasOneSharedCache) {
  EXPECT_EQ(&shared_references(), &shared_references());
  Task relu = task_computing("torch.relu(x)", "shared");
  EXPECT_EQ(shared_references().reference(relu), shared_references().reference(relu));
}

// A reference compiled elsewhere (load_task's check) is kept and handed out; one the cache has
// already is not replaced.
TEST(ReferenceCache, AdoptsAReferenceCompiledElsewhereOnce) {
  ReferenceCache cache;
  Task relu = task_computing("torch.relu(x)", "adopted");
  cache.adopt(relu, Reference::compile(relu));
  EXPECT_EQ(cache.size(), 1u);
  std::shared_ptr<const Reference> kept = cache.reference(relu);
  cache.adopt(relu, Reference::compile(relu));
  EXPECT_EQ(cache.reference(relu), kept);
  EXPECT_EQ(cache.size(), 1u);
}

// load_task compiles the reference to check it and leaves it in the shared cache.
TEST(ReferenceCache, LoadTaskLeavesItsReferenceInTheSharedCache) {
  Task t = load_task(std::string(KFORGE_SOURCE_DIR) + "/tasks/smoke/relu.toml");
  size_t before = shared_references().size();
  std::shared_ptr<const Reference> r = shared_references().reference(t);
  EXPECT_EQ(shared_references().size(), before) << "reference() compiled it again";
  EXPECT_EQ(shared_references().reference(t), r);
}

}  // namespace
