// A task: one PyTorch operation to make faster, loaded from tasks/<suite>/<name>.toml.
// The format is documented in docs/task-format.md; every loading error names the file, the line
// where toml++ knows it, the field and the problem.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/expr.h"

namespace kforge::tasks {

enum class Dtype { Float32, Float16, BFloat16, Float64, Int32, Int64, Bool };

std::string_view dtype_name(Dtype d);
std::optional<Dtype> parse_dtype(std::string_view name);
size_t dtype_size(Dtype d);
bool is_floating(Dtype d);

// How an input's values are drawn (docs/task-format.md, "init").
enum class InitKind { Randn, Normal, Rand, Uniform, Randint, Bernoulli };

struct Init {
  InitKind kind = InitKind::Randn;
  std::vector<Expr> params;  // normal: mean, std; uniform/randint: lo, hi; bernoulli: p
  std::string text;          // as written in the task file
  // The second distribution's values times 2^range_shift (docs/task-format.md, "range_shift"):
  // float32 operands far outside float16's range, which a split into float16 parts loses.
  int range_shift = 0;
};

struct InputSpec {
  std::string name;
  Dtype dtype = Dtype::Float32;
  std::vector<Expr> shape;
  Init init;
  // A computed input (docs/task-format.md, "Computed inputs"): a TorchScript expression over the
  // input's draw (named by the input's name) and its `draws`, applied by the harness wherever it
  // draws the input. Empty: the input is its draw.
  std::string transform;
  std::optional<Dtype> draw_dtype;  // the dtype `init` draws in, when not `dtype` (transform only)
  std::vector<InputSpec> draws;     // further draws the transform reads (name, dtype, shape, init)

  Dtype drawn_dtype() const { return draw_dtype.value_or(dtype); }
};

struct OutputSpec {
  std::string name;
  std::optional<Dtype> dtype;       // checked against the reference when given
  std::optional<double> tolerance;  // replaces tol(dtype) in the acceptance formula
  std::vector<Expr> shape;  // over the dims, as prompts show it; checked by `tasks check`; empty:
                            // not declared
};

using Dims = IntNames;  // dim name -> value

struct Task {
  std::filesystem::path file;
  std::string suite;  // the folder the task file is in
  std::string name;
  std::string summary;
  std::vector<std::string> tags;
  std::string reference;  // as written; see reference.h for what is compiled
  Dims dims;              // the timed configuration
  std::vector<Dims> check_dims;
  // Admission's copy, its dims all drawn (unseen sizes): a plan's conditional launches get no
  // configurations of their own here (compile's check_candidate).
  bool unseen = false;
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;  // empty: named by the reference's result
  std::vector<Expr> constraints;
  bool deterministic = false;
  bool allow_tf32 = false;
  // Why a kernel could pass the task without doing its work, as `kforge tasks
  // import-kernelbench`'s check found it (docs/task-format.md); empty: not marked.
  std::vector<std::string> degenerate;
  std::optional<Expr> flops;
  std::optional<Expr> min_bytes;
  // A dim the reference works along independently (docs/task-format.md): every input and output
  // begins with it, so the harness may compute a reference a slice of it at a time. Empty: none.
  std::string batch_dim;
  std::string content_hash;  // hex digest of the file's bytes: an edited task is a new version

  std::vector<int64_t> shape_of(const InputSpec& in, const Dims& d) const;
  int64_t numel_of(const InputSpec& in, const Dims& d) const;
  int64_t input_bytes(const Dims& d) const;
  // Every configuration the harness checks: the timed dims first, then [check].dims.
  std::vector<Dims> all_dims() const;
  std::string id() const { return suite + "/" + name; }
};

// Loads and validates one task file (throws InputError).
Task load_task(const std::filesystem::path& file);
// The same from the file's text, `file` naming it (a GPU worker's copy of the parent's task).
Task parse_task(const std::filesystem::path& file, std::string text);

// Every *.toml in a suite folder, sorted by name (throws InputError on the first bad file).
std::vector<Task> load_suite(const std::filesystem::path& dir);

// Resolves what a user typed: a .toml path, a suite folder, "suite/name" or a bare task name,
// looked up under `tasks_root`. Returns the task files, sorted.
std::vector<std::filesystem::path> resolve_tasks(const std::string& spec,
                                                 const std::filesystem::path& tasks_root);

// The folder holding the suites: $KFORGE_TASKS, else ./tasks if it holds suites, else the
// source tree's tasks/ that this binary was built from.
std::filesystem::path default_tasks_root();

// Admission (docs/design.md, Verification 6): up to `count` dims configurations no candidate was
// shown: each satisfies the constraints, gives every input a positive shape, differs from the
// timed and every check configuration, keeps each dim within [1, min(timed, 2 x its largest
// checked value)] and all inputs within `max_input_bytes`. Deterministic in `seed`; fewer than
// `count` only when the constraints leave no room. With `accept` (a candidate's own conditions,
// e.g. its plan's constraints at its tunables), only configurations it accepts count, and when the
// usual range yields too few, dims are also drawn up to their timed values.
std::vector<Dims> draw_unseen_dims(const Task& task, uint64_t seed, int count,
                                   int64_t max_input_bytes = int64_t{256} << 20,
                                   const std::function<bool(const Dims&)>& accept = {});

std::string format_dims(const Dims& d);
// An input's shape as written: "[B, 2 * N]".
std::string shape_expressions(const InputSpec& in);
// How an input's values are made, for people: its init, then its transform where it has one
// ("rand, then torch.tril(A)"; draws named: "rand, then p * scale (scale: rand, shape [])").
std::string values_text(const InputSpec& in);

}  // namespace kforge::tasks
