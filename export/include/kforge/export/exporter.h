// `kforge export`: the archive's winners as a library (docs/export.md). Each task's winner
// (correct, admitted unless asked otherwise, unflagged, judged on one of the architectures asked,
// by this harness version; the fastest) is compiled again by NVRTC for every architecture asked (a
// cubin each, and PTX), and a source package is written around the images: a plain C++ API whose
// launch code is generated from the launch plan and calls common/launch/kforge_launch.h (the same
// semantics kforge's runner uses), PyTorch ops, a Python package, tests, a benchmark and a
// manifest.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/compile/candidate.h"
#include "kforge/compile/compiler.h"
#include "kforge/tasks/output_fit.h"
#include "kforge/tasks/task.h"

namespace kforge::exporter {

struct ExportOptions {
  std::filesystem::path out;
  std::string name = "kforge_kernels";  // the C++ namespace, CMake package and Python package
  std::vector<std::string> suites,
      tasks;  // what to export ("suite", "suite/name"); both empty: everything
  std::vector<std::string> archs = {"sm_90a"};
  std::string db;                   // the archive ("" the default one)
  std::string from_jsonl;           // or an archive export (imported into a temporary archive)
  std::string tasks_dir;            // the task files ("" the default root)
  bool include_unadmitted = false;  // winners need admission unless this is set
  bool fallback = false;            // a task without a winner: a PyTorch op that runs its reference
  int harness_version = 0;          // 0: the current one
  std::optional<double>
      min_speedup;  // a winner slower than this over eager is left out (or falls back)
};

// A task's winner as the package holds it.
struct Op {
  std::string op;         // C++ identifier
  bool fallback = false;  // no kernel: the PyTorch op runs the task's reference (--fallback)
  std::shared_ptr<const tasks::Task> task;
  std::vector<compile::TensorInfo> tensors;      // inputs, then outputs
  std::vector<std::vector<Expr>> output_shapes;  // per output, each axis over dims
  compile::Plan plan;
  compile::Tunables tunables;
  std::vector<compile::KernelReport> kernels;  // lowered names and parameters
  struct Image {
    std::string arch;  // "sm_90a" (cubin) or "compute_90a" (PTX)
    int sm = 0;
    bool ptx = false;
    std::string bytes;
  };
  std::vector<Image> images;
  nlohmann::json manifest;  // its manifest.json entry
};

struct Missing {
  std::string task, why;
};

struct ExportResult {
  std::vector<Op> ops;
  std::vector<Missing> missing;
};

// The outputs' shapes over dims (kforge/tasks/output_fit.h; tests call it from here).
using tasks::infer_output_shapes;

// The package's files for `ops` (and `missing`, listed in the manifest), under options.out.
void write_package(const ExportOptions& options, const ExportResult& result);

// Throws kforge::Error naming the task and field when a name the generated C++ uses as an
// identifier (the op, its tensors, dims, tunables, workspaces) is not one: such text is refused,
// never escaped (export/src/generated_text.h has the rule for all other text).
void check_generated_names(const Op& op);

// Generated source, one op at a time (tests read them).
std::string op_declaration(const Op& op);
std::string op_definition(const Op& op, const std::string& ns);
std::string torch_definition(const Op& op, const std::string& ns);
std::string torch_schema(const Op& op);

// Selects, compiles and writes (no package when no op is exported); `tensors` gives a task's
// tensors (the reference's output dtypes).
ExportResult export_library(const ExportOptions& options, compile::Compiler& compiler,
                            const std::function<void(const std::string&)>& say = {});

}  // namespace kforge::exporter
