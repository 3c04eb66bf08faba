// A task's reference run in a child process under a time and memory limit, for the commands that
// run references on the CPU (`tasks check`, `tasks show`, `compile --task`): a reference that
// never returns, or eats the machine, fails its task with a message naming the file instead of
// hanging the command. The child is the kforge binary again, in the hidden `__reference` mode,
// which serves requests with serve_reference_requests() (docs/decisions.md, "References in a
// child process").
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/line_channel.h"
#include "kforge/common/process.h"
#include "kforge/tasks/check.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/task.h"

namespace kforge::tasks {

// Defaults of the per-step time limit: `tasks check` gives each dims configuration (and the
// reference's compile) this long; `tasks show` and `compile --task` only need output shapes.
inline constexpr double kCheckReferenceSeconds = 60;
inline constexpr double kShapesReferenceSeconds = 20;
inline constexpr double kMaxReferenceSeconds = 86400;
inline constexpr int64_t kMinReferenceMemory = int64_t{256} << 20;

struct ReferenceLimits {
  double seconds = kCheckReferenceSeconds;  // each step: compiling, then each dims configuration
  int64_t memory_bytes = 0;                 // the child's RLIMIT_DATA; 0: no limit
};

// `flag` (--reference-time-limit, when given) wins over $KFORGE_REFERENCE_TIME_LIMIT, else
// `default_seconds`; the memory limit is $KFORGE_REFERENCE_MEMORY_LIMIT (bytes, or with a K, M, G
// or T suffix; "none" for no limit), else half the physical memory. Throws InputError naming the
// flag or variable when a value is not a finite number in range.
ReferenceLimits reference_limits(const std::optional<std::string>& flag, double default_seconds);

// What `tasks show` needs from running the reference: its output count, and the output shapes and
// bytes that must move at the timed dims. Where the meta device lacks an op, the shapes are fitted
// from CPU runs at the check dims (output_fit.h; `fitted`, with each axis's expression); nullopt
// where neither can tell.
struct ShapeFacts {
  size_t output_count = 1;
  std::optional<std::vector<TensorShape>> outputs;
  bool fitted = false;
  std::vector<std::vector<std::string>> output_exprs;  // per output, each axis (fitted only)
  std::optional<double> bytes;
};

// One `kforge __reference` child, started on the first request and kept for the next ones (one
// LibTorch start for a whole `tasks check`); after a reference passes a limit or crashes, it is
// killed and the next request starts a fresh one. Not thread-safe.
class ReferenceChild {
 public:
  // `command` starts a child (argv); default: this binary in kReferenceMode.
  explicit ReferenceChild(ReferenceLimits limits, std::vector<std::string> command = {});
  ~ReferenceChild();
  ReferenceChild(const ReferenceChild&) = delete;
  ReferenceChild& operator=(const ReferenceChild&) = delete;

  // `kforge tasks check` of one task file on the CPU. A reference past a limit, or one that kills
  // its process, is a problem of that task; a malformed file is one too.
  TaskCheck check(const std::filesystem::path& file, const CheckOptions& options);
  // Throw InputError (the task's file, field "reference") when the reference passes a limit or
  // crashes, else what the reference's run would have thrown in this process.
  ShapeFacts shape_facts(const Task& task);
  std::vector<OutputInfo> outputs(const Task& task);  // describe_outputs, run in the child
  // Called with each step the child starts ("on the check dims (N=4)"), e.g. to show progress.
  void on_step(std::function<void(const std::string& step)> hook) { on_step_ = std::move(hook); }

  struct Outcome;

 private:
  Outcome ask(const nlohmann::json& request);
  void start();
  void stop();
  ReferenceLimits limits_;
  std::vector<std::string> command_;
  Process process_;
  UniqueFd socket_;  // both ways: requests in, JSON lines out
  LineReader replies_;
  std::function<void(const std::string&)> on_step_;
};

// A TaskCheck as `tasks check --json` prints it, and back.
nlohmann::ordered_json check_to_json(const TaskCheck& c);
TaskCheck check_from_json(const nlohmann::json& j);

// The hidden kforge mode the children run in, and what it runs: requests in and answers out, one
// JSON line each on descriptor 3, until kforge hangs up; then the process exits (0), without
// LibTorch's teardown.
inline constexpr const char* kReferenceMode = "__reference";
[[noreturn]] void serve_reference_requests();

}  // namespace kforge::tasks
