// Launch plans (docs/answer-format.md): parsing from JSON with errors that name the field, and
// evaluation for one dims configuration, tunable choice and device, checked against the limits.
#pragma once

#include <kforge_launch.h>
#include <array>
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kforge/common/expr.h"
#include "kforge/tasks/task.h"

namespace kforge::compile {

// "launch[0].grid[1]: unknown name 'M' ..." — written to be sent back to the LLM.
class PlanError : public Error {
 public:
  using Error::Error;
};

// What the plan may assume about the GPU: measured from the device, or assumed for an arch.
// 90 for "sm_90a", 100 for "sm_100a": arch names compare as numbers, not as text (0: not an arch).
int sm_number(const std::string& arch);

struct DeviceFacts {
  std::string arch = "sm_90a";
  int64_t num_sms = 132;
  int64_t warp_size = 32;
  int64_t max_shared_per_block = 232448;  // with the opt-in attribute
  int64_t max_threads_per_block = 1024;
  std::array<int64_t, 3> max_block = {1024, 1024, 64};
  std::array<int64_t, 3> max_grid = {2147483647, 65535, 65535};
  bool measured = false;

  // Facts of the usual GPU of an architecture (sm_80: A100, sm_90a: H100/H200, ...).
  static DeviceFacts for_arch(const std::string& arch);
};

enum class TensorRole { Input, Output, Workspace };

struct TensorInfo {
  std::string name;
  tasks::Dtype dtype = tasks::Dtype::Float32;
  TensorRole role = TensorRole::Input;
};

// `{"tensor_map": TENSOR, "dims": [...], "box": [...], "swizzle": 128}`: a TMA tensor map of the
// tensor, its dims and box outermost first (kforge_launch::TensorMap).
struct TensorMapSpec {
  std::vector<Expr> dims, box;
  int swizzle = 0;
};

struct ArgSpec {
  std::string text;  // the tensor's name, or the integer expression as written
  bool is_tensor = false;
  Expr value = Expr::constant(0);    // when not a tensor
  std::optional<TensorMapSpec> map;  // a tensor passed as a tensor map
};

struct LaunchSpec {
  std::string kernel;  // name expression, e.g. "softmax_rows<BLOCK>"
  std::vector<Expr> grid, block;
  Expr shared_bytes = Expr::constant(0);
  std::vector<ArgSpec> args;
  bool cooperative = false;
  std::vector<Expr> cluster;
  std::optional<Expr> when;  // made only where this holds (e.g. "N % 8 == 0": a TMA path)
};

struct WorkspaceSpec {
  std::string name;
  tasks::Dtype dtype = tasks::Dtype::Float32;
  Expr count = Expr::constant(0);
  bool zero_init = false;
};

using Tunables = std::map<std::string, int64_t>;

struct Plan {
  std::vector<LaunchSpec> launches;
  std::vector<WorkspaceSpec> workspaces;
  std::vector<std::pair<std::string, std::vector<int64_t>>> tune;  // in the order written
  std::vector<Expr> constraints;
  nlohmann::json json;  // as given (canonical form: json.dump() sorts keys)

  // Every tensor a launch may name: the task's inputs and outputs, then the workspaces.
  std::vector<TensorInfo> tensors;
  const TensorInfo* tensor(const std::string& name) const;
};

// Parses and validates a plan against the task's tensors and dims (throws PlanError).
Plan parse_plan(const nlohmann::json& json, const tasks::Task& task,
                const std::vector<TensorInfo>& task_tensors);
Plan parse_plan_text(const std::string& text, const tasks::Task& task,
                     const std::vector<TensorInfo>& task_tensors);

struct ConcreteArg {
  bool is_tensor = false;
  std::string tensor;
  int64_t value = 0;
  kforge_launch::TensorMap map;  // rank > 0: the tensor passed as this tensor map
};

// The TMA element type of a dtype (bool as bytes).
CUtensorMapDataType tensor_map_type(tasks::Dtype dtype);

struct ConcreteLaunch {
  size_t index = 0;  // launch[index] of the plan (a launch whose `when` fails is left out)
  std::string kernel;
  std::array<int64_t, 3> grid = {1, 1, 1}, block = {1, 1, 1}, cluster = {1, 1, 1};
  int64_t shared_bytes = 0;
  bool cooperative = false;
  std::vector<ConcreteArg> args;
};

struct ConcreteWorkspace {
  std::string name;
  tasks::Dtype dtype = tasks::Dtype::Float32;
  int64_t count = 0;
  bool zero_init = false;
};

struct ConcretePlan {
  std::vector<ConcreteLaunch> launches;
  std::vector<ConcreteWorkspace> workspaces;
};

// The plan for one configuration; throws PlanError naming the field, the configuration and the
// limit broken.
ConcretePlan evaluate_plan(const Plan& plan, const tasks::Dims& dims, const Tunables& tunables,
                           const DeviceFacts& facts);

// The facts' launch limits as kforge_launch::check_limits takes them
// (common/launch/kforge_launch.h).
kforge_launch::Limits launch_limits(const DeviceFacts& facts);

// The first value of every tunable.
Tunables default_tunables(const Plan& plan);
// How many combinations the tunables' values make, constraints not applied (at most
// kMaxTuneValues ^ kMaxTunables, which fits 64 bits).
uint64_t tune_space_size(const Plan& plan);
// The combination at `index` (< tune_space_size) of the product in the plan's order, the last
// tunable varying fastest: index 0 is every tunable's first value. Nothing is built but the one.
Tunables tune_point(const Plan& plan, uint64_t index);
// The combinations kforge considers, in index order, whose constraints hold at `dims` (the timed
// dims): all of them when there are at most kMaxTuneCombinations, else kMaxTuneCombinations
// indices spread evenly over the product, the first and the last among them. Lazy: nothing of the
// whole product is ever built.
std::vector<Tunables> tune_space(const Plan& plan, const tasks::Dims& dims,
                                 const DeviceFacts& facts);
// At most `count` points of a tune space spread evenly over it (its first and last among them), in
// its order, so the default (the first point) comes first.
std::vector<Tunables> sample_tune_space(const std::vector<Tunables>& space, int count);
// The tunables to compile with: `chosen` (some, all or none of the plan's tunables, each with one
// of its listed values), the others filled from the first point of tune_space that agrees with
// them. Throws PlanError naming the tunable, or saying that no combination satisfies the
// constraints at `dims` (the timed dims).
Tunables choose_tunables(const Plan& plan, const Tunables& chosen, const tasks::Dims& dims,
                         const DeviceFacts& facts);
// Whether the plan's constraints hold (throws PlanError on an evaluation error).
bool constraints_hold(const Plan& plan, const tasks::Dims& dims, const Tunables& t,
                      const DeviceFacts& facts);

inline constexpr int64_t kMaxWorkspaceBytes = int64_t{4} << 30;
inline constexpr size_t kMaxLaunches = 16;
// A plan's `tune`: at most this many tunables of at most this many values each; of their product,
// tune_space considers at most kMaxTuneCombinations (docs/answer-format.md).
inline constexpr size_t kMaxTunables = 8;
inline constexpr size_t kMaxTuneValues = 16;
inline constexpr uint64_t kMaxTuneCombinations = 4096;
// A plan's JSON text: bytes and nesting depth, checked before it is parsed.
inline constexpr size_t kMaxPlanBytes = 64 * 1024;
inline constexpr int kMaxPlanDepth = 16;

}  // namespace kforge::compile
