// KernelBench problem files (Python modules) become a kforge suite: `kforge tasks
// import-kernelbench` runs this, then checks what it wrote like any suite. The conversion runs
// kforge's Python helper (tasks/kernelbench/, embedded in the binary) with a Python that has
// PyTorch, confined (docs/security.md, "KernelBench import runs the problem's code");
// docs/task-format.md, "KernelBench problems", says what is converted and how.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kforge::tasks {

inline constexpr double kDefaultProblemSeconds = 300;

struct KernelBenchOptions {
  std::vector<std::string> paths;  // problem files, or folders of them (their *.py)
  std::string suite;               // the suite's name: letters, digits, _ and - (the caller checks)
  std::string out_root;            // the folder the suite's folder goes in
  std::string device = "cpu";      // where each task is checked against its Model: cpu or cuda
  std::string python;              // a Python with PyTorch; "": python_candidates() (paths.h)
  double time_limit = kDefaultProblemSeconds;  // seconds each problem may take
  // "convert" (a task per problem), or "profile" or "check" (kforge model profile / check: each
  // problem is a user's model, and its result is the helper's, KernelBenchImport::results).
  std::string mode = "convert";
  std::string package_json;        // mode "check": the package (a JSON object) given to the helper
  std::vector<std::string> reads;  // more files and folders the helper may read (the package)
  std::string command = "kforge tasks import-kernelbench";  // who asks, in the no-Python error
};

enum class ProblemOutcome { Pending, Converted, Failed };

struct KernelBenchProblem {
  std::string file;  // as the user named it
  std::string path;  // absolute, for the helper
  std::string name;  // the task's name: kforge's, never the helper's
  ProblemOutcome outcome = ProblemOutcome::Pending;
  std::string reason;  // Failed: why; Pending at the end: why it was not reached
};

// What a converted problem became (the helper's result, checked again here).
struct KernelBenchConversion {
  std::vector<std::string> dims;                       // the task's dims
  std::vector<std::pair<std::string, int64_t>> fixed;  // sizes fixed in the task
  size_t checked_sizes = 0;                            // sizes it matched the Model at
  bool timed_checked = false;                          // the timed sizes among them
  std::vector<std::string> notes;
};

// What an import says while it runs; the command prints it.
class KernelBenchObserver {
 public:
  virtual ~KernelBenchObserver() = default;
  // A helper answered: the problems to import, its Python and PyTorch, and how it is confined.
  // Once per import.
  virtual void on_start(size_t problems, const std::string& python, const std::string& torch,
                        const std::string& confinement) = 0;
  virtual void on_converted(const KernelBenchProblem& problem,
                            const KernelBenchConversion& conversion) = 0;
  virtual void on_failed(const KernelBenchProblem& problem) = 0;  // problem.reason says why
  // A task an earlier import wrote for a problem that failed now was removed (it was stale).
  virtual void on_removed_stale(const std::string& task_file) = 0;
  // A line the problems' code printed (stdout or stderr), whole and made safe to show
  // (tasks/src/problem_output.h); `who` is the problem's file, or "kforge's importer" outside
  // any problem. By default: "output     WHO: LINE" on stderr, after what is on stdout.
  virtual void on_output(const std::string& who, const std::string& line);
};

struct KernelBenchImport {
  std::string suite_dir;
  std::vector<KernelBenchProblem> problems;  // every one converted, failed, or pending and why
  std::vector<std::string> written;          // the task files written
  size_t importer_failures = 0;  // problems that broke kforge's importer (reported by the helper)
  size_t kforge_bugs = 0;        // the helper broke its protocol: a kforge bug
  std::vector<std::string> results;  // modes "profile", "check": each problem's result (JSON text)
  std::string python, torch, confinement;  // the helper's Python, its PyTorch and how it ran
};

// Imports every problem: a problem that ends or hangs its process costs that problem only, and a
// fresh helper goes on with the rest. Throws UsageError for a path that is not there or holds no
// problem, and when no Python with PyTorch can be found (naming each one tried); `--device cuda`
// needs a GPU, which the caller checks first.
KernelBenchImport import_kernelbench(const KernelBenchOptions& options,
                                     KernelBenchObserver& observer);

}  // namespace kforge::tasks
