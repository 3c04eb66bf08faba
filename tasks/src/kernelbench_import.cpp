// The KernelBench import (kernelbench_import.h). A problem file is code, and importing it runs it.
// So the helper runs confined (docs/security.md, "KernelBench import runs the problem's code"): a
// minimal environment, a private working folder, Landlock (read: Python, PyTorch, the helper and
// the problems; write: that folder; no TCP), memory and CPU-time limits, and a deadline per problem
// that kforge keeps itself. Each problem runs in a process of its own, forked by the helper, whose
// only way back is its own result; the helper answers on a descriptor of its own (fd 3), never on
// stdout. Every name that becomes a path is kforge's, and every problem is accounted for:
// converted, failed with the reason, or not reached and why.
#include "kforge/tasks/kernelbench_import.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <variant>

#include "kernelbench_helper.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/line_channel.h"
#include "kforge/common/paths.h"
#include "kforge/common/process.h"
#include "kforge/common/sandbox.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/reference_child.h"
#include "kforge/tasks/task.h"
#include "problem_output.h"
#include "python_places.h"

namespace kforge::tasks {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::chrono::seconds kHelperStartLimit{120};  // Python and PyTorch loading
constexpr std::chrono::seconds kProbeLimit{30};
constexpr int kReplyFd = 3;  // the helper's answers
constexpr int kLayerFd = 4;  // the Landlock rule set, for the problems' processes
constexpr size_t kMaxLineBytes = size_t{96} << 20;  // a task file is far smaller

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// KernelBench names its problems "<number>_<name>.py": sorted by number, then name.
bool problem_order(const std::string& a, const std::string& b) {
  std::string fa = a.substr(a.find_last_of('/') + 1), fb = b.substr(b.find_last_of('/') + 1);
  long na = std::strtol(fa.c_str(), nullptr, 10), nb = std::strtol(fb.c_str(), nullptr, 10);
  return na != nb ? na < nb : fa < fb;
}

// The problem files the user named: files as given, folders' *.py (not __init__.py).
std::vector<std::string> problem_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    if (!exists(p)) throw UsageError(p + ": no such file or folder");
    if (!is_dir(p)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    DIR* d = ::opendir(p.c_str());
    if (!d) throw UsageError(p + ": cannot read the folder");
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0 && name != "__init__.py")
        found.push_back((p.back() == '/' ? p : p + "/") + name);
    }
    ::closedir(d);
    if (found.empty())
      throw UsageError(p +
                       ": holds no .py problem files (point at a KernelBench level folder, e.g. "
                       "KernelBench/KernelBench/level1, or at problem files)");
    std::sort(found.begin(), found.end(), problem_order);
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

// A problem's task name, from its file name only ("19_ReLU.py" -> "kb_19_relu"), unique among
// `taken`: letters, digits and _ only, so it is safe as a file name in the suite folder.
std::string task_name(const std::string& file, std::set<std::string>& taken) {
  std::string stem = file.substr(file.find_last_of('/') + 1), name;
  if (size_t dot = stem.find_last_of('.'); dot != std::string::npos && dot > 0) stem.resize(dot);
  for (char c : stem) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!name.empty() && name.back() != '_')
      name += '_';
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  if (name.empty()) name = "problem";
  if (std::isdigit(static_cast<unsigned char>(name[0]))) name = "kb_" + name;
  std::string base = name;
  for (int k = 2; taken.count(name); ++k) name = base + "_" + std::to_string(k);
  taken.insert(name);
  return name;
}

bool safe_task_name(const std::string& name) {
  return !name.empty() && name.size() <= 200 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The helper's files (tasks/kernelbench/, embedded at build time).
const std::vector<std::pair<std::string, std::string_view>>& helper_files() {
  static const std::vector<std::pair<std::string, std::string_view>> files = {
      {"kernelbench_import.py", embedded::kernelbench_helper_kernelbench_import},
      {"kb_load.py", embedded::kernelbench_helper_kb_load},
      {"kb_record.py", embedded::kernelbench_helper_kb_record},
      {"kb_emit.py", embedded::kernelbench_helper_kb_emit},
      {"kb_modules.py", embedded::kernelbench_helper_kb_modules},
      {"kb_check.py", embedded::kernelbench_helper_kb_check},
      {"kb_sizes.py", embedded::kernelbench_helper_kb_sizes},
      {"kb_toml.py", embedded::kernelbench_helper_kb_toml},
      {"kb_convert.py", embedded::kernelbench_helper_kb_convert},
      {"kb_trace.py", embedded::kernelbench_helper_kb_trace},
      {"kb_compat.py", embedded::kernelbench_helper_kb_compat},
      {"kb_inputs.py", embedded::kernelbench_helper_kb_inputs},
      {"kb_compact.py", embedded::kernelbench_helper_kb_compact},
      {"kb_model.py", embedded::kernelbench_helper_kb_model}};
  return files;
}

// A private temporary folder, removed with this object: helper/ holds the helper's files (the
// helper may only read them), work/ is the helper's working folder (the only one it may write).
class HelperDir {
 public:
  HelperDir() {
    root_ = make_temp_directory("kforge-kernelbench");
    make_directories(helper());
    make_directories(work());
    for (const auto& [name, text] : helper_files())
      write_file_atomic(helper() + "/" + name, std::string(text));
    write_file_atomic(helper() + "/prelude.ts", tasks::prelude_source());
  }
  ~HelperDir() { remove_tree(root_); }
  HelperDir(const HelperDir&) = delete;
  HelperDir& operator=(const HelperDir&) = delete;
  std::string helper() const { return root_ + "/helper"; }
  std::string work() const { return root_ + "/work"; }

 private:
  std::string root_;
};

// The environment for the Python: the minimal one, and the Python variables the user set.
std::map<std::string, std::string> python_environment() {
  std::map<std::string, std::string> env = {{"PYTHONDONTWRITEBYTECODE", "1"},
                                            {"PYTHONUNBUFFERED", "1"}};
  for (const char* name : {"PYTHONPATH", "PYTHONHOME", "USER", "LOGNAME"})
    if (const char* v = std::getenv(name)) env[name] = v;
  return env;
}

// What kforge needs to know of a Python before it runs it confined: the interpreter itself (a
// shim or wrapper is not run again), its module path and where it lives.
struct PythonFacts {
  std::string executable;
  std::vector<std::string> sys_path;  // as it sees it; the helper uses exactly this
  std::vector<std::string> places;    // prefixes, module folders, library folders: readable
};

// Runs kforge's short probe (no problem's code) with `python` in the private working folder;
// the facts, or why this Python will not do ("ModuleNotFoundError: No module named 'torch'").
std::variant<PythonFacts, std::string> probe_python(const std::string& python,
                                                    const HelperDir& dir) {
  static const char* kProbe = R"(import importlib.util, json, os, sys
spec = importlib.util.find_spec("torch")
print(json.dumps({"executable": sys.executable, "real": os.path.realpath(sys.executable), "sys_path": sys.path,
  "prefixes": [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix],
  "torch": os.path.dirname(os.path.dirname(os.path.realpath(spec.origin))) if spec and spec.origin else None,
  "ld_library_path": os.environ.get("LD_LIBRARY_PATH", "")}))
)";
  Pipe out = make_pipe();
  SpawnOptions o;
  o.env = child_environment(python_environment());
  o.argv = {python, "-c", kProbe};
  o.fds = {{out.write.get(), 1}};
  o.confine = ChildConfinement{};
  o.confine->workdir = dir.work();  // `-c` puts the working folder first on the module path
  o.own_process_group = true;
  Process p = Process::spawn(o);
  out.write.reset();
  std::string text;
  char chunk[65536];
  auto deadline = std::chrono::steady_clock::now() + kProbeLimit;
  while (text.size() < (size_t{16} << 20)) {
    if (wait_readable(out.read.get(), deadline) != Wait::Ready) break;
    ssize_t n = ::read(out.read.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  std::optional<int> status = p.wait_exit(std::chrono::milliseconds(1000));
  int ws = status ? *status : p.kill();
  json j = json::parse(text, nullptr, false);
  if (!(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) || !j.is_object() || !j["executable"].is_string() ||
      !j["real"].is_string() || !j["sys_path"].is_array())
    return "does not run as Python 3 (it " + describe_exit(ws) + ")";
  if (!j["torch"].is_string()) return std::string("ModuleNotFoundError: No module named 'torch'");
  PythonFacts f;
  f.executable = j["executable"].get<std::string>();
  for (const auto& e : j["sys_path"])
    if (e.is_string() && !e.get<std::string>().empty() && e.get<std::string>()[0] == '/')
      f.sys_path.push_back(e.get<std::string>());
  auto add = [&f](const std::string& place) {
    if (place.size() > 1 && place[0] == '/') f.places.push_back(place);
  };
  add(j["real"].get<std::string>());  // the interpreter (sys.executable may be a venv's link to it)
  for (const auto& e : j["prefixes"])
    if (e.is_string()) add(e.get<std::string>());
  for (const std::string& e : f.sys_path) add(e);
  add(j["torch"].get<std::string>());
  if (j["ld_library_path"].is_string())
    for (const std::string& e : split(j["ld_library_path"].get<std::string>(), ':')) add(e);
  return f;
}

// What the confined helper may read and write. A module folder that holds the user's home (a
// PYTHONPATH of ~ or /) is left out: it would open every file there. Without Landlock (old
// kernels), or at ABI < 6 for the signals, only the rest of the confinement holds.
FileAccess helper_access(const PythonFacts& py, const HelperDir& dir,
                         const std::vector<std::string>& problems, const std::string& device) {
  FileAccess a;
  a.read = python_read_places(py.places);
  a.read.push_back("/sys/devices/system/cpu");
  if (const char* ld = std::getenv("LD_LIBRARY_PATH"))
    for (const std::string& e : split(ld, ':'))
      if (e.size() > 1 && e[0] == '/') a.read.push_back(e);
  // Its own /proc files (memory in use, CPUs). Another process's private ones (environ, fd, mem)
  // need the right to trace it, which Landlock denies outside the domain, and the helper makes
  // itself untraceable by the problems' processes.
  a.read.push_back("/proc");
  a.read.push_back(dir.helper());
  for (const std::string& p : problems) a.read.push_back(p);
  // Who the user is (Python's getpass and PyTorch's caches look the uid up; no secrets in these).
  for (const char* p : {"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime"})
    a.read.push_back(p);
  a.write = {dir.work(), "/dev/null", "/dev/zero"};
  if (device == "cuda") {  // the driver's device files and what it reads of the machine
    for (const char* p : {"/proc/driver/nvidia", "/sys", "/etc/nvidia", "/usr/share/nvidia",
                          "/usr/local/nvidia", "/run/nvidia-persistenced"})
      a.read.push_back(p);
    for (const char* p : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                          "/dev/nvidia-modeset", "/dev/nvidia-caps", "/dev/shm"})
      a.write.push_back(p);
    for (int i = 0; i < 64; ++i) a.write.push_back("/dev/nvidia" + std::to_string(i));
  }
  a.no_tcp = true;
  a.scoped = true;
  return a;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// A field of a reply, null when absent (never an exception: the reply may be anything).
const json& field(const json& j, const char* key) {
  static const json none;
  auto it = j.find(key);
  return it == j.end() ? none : *it;
}

std::string text(const json& v) {
  return v.is_string() ? v.get<std::string>()
                       : v.dump(-1, ' ', false, json::error_handler_t::replace);
}

using Outcome = ProblemOutcome;
using Problem = KernelBenchProblem;

// One import: the problems, what became of each, and the tasks written.
class Import {
 public:
  Import(const KernelBenchOptions& a, std::string suite_dir, std::vector<Problem> problems,
         KernelBenchObserver& observer)
      : a_(a),
        suite_dir_(std::move(suite_dir)),
        problems_(std::move(problems)),
        observer_(observer) {}

  // Runs the helper with `py` until every problem has an outcome: a problem that ends or hangs
  // its process costs that problem only, and a fresh helper goes on with the rest. False when
  // this Python will not do before any problem started (`why`: "ModuleNotFoundError: ...").
  bool run(const PythonFacts& py, const HelperDir& dir, std::string& why);

  std::vector<Problem>& problems() { return problems_; }
  std::vector<std::string>& written() { return written_; }
  std::vector<std::string>& results() { return results_; }
  const std::string& python() const { return python_; }
  const std::string& torch() const { return torch_; }
  const std::string& confinement() const { return confinement_; }
  size_t importer_failures() const { return importer_failures_; }
  size_t kforge_bugs() const { return kforge_bugs_; }
  bool started() const { return started_; }

 private:
  // One helper over the problems still pending: whether any of them got an outcome.
  bool run_helper(const PythonFacts& py, const HelperDir& dir, const LandlockRules& rules,
                  std::string& why);
  void on_result(Problem& p, const json& j);
  void fail(Problem& p, const std::string& reason);

  const KernelBenchOptions& a_;
  std::string suite_dir_;
  std::vector<Problem> problems_;
  KernelBenchObserver& observer_;
  std::vector<std::string> written_, results_;
  std::string confinement_, python_, torch_;
  size_t importer_failures_ = 0, kforge_bugs_ = 0;
  bool started_ = false;
};

bool Import::run(const PythonFacts& py, const HelperDir& dir, std::string& why) {
  std::vector<std::string> paths;
  for (const Problem& p : problems_) paths.push_back(p.path);
  paths.insert(paths.end(), a_.reads.begin(), a_.reads.end());
  LandlockRules rules(helper_access(py, dir, paths, a_.device));
  const Confinement& c = rules.confinement();
  confinement_ = c.active
                     ? "confined with " + c.how.substr(0, c.how.find(':')) +
                           ": it reads Python, PyTorch and the problems, writes a private folder, "
                           "no TCP" +
                           (a_.device == "cuda"
                                ? " (with CUDA: each problem's process; kforge's helper has the "
                                  "rest of the limits)"
                                : "")
                     : "NOT confined, " + c.how;
  for (;;) {
    if (std::none_of(problems_.begin(), problems_.end(),
                     [](const Problem& p) { return p.outcome == Outcome::Pending; }))
      return true;
    std::string ended;
    if (!run_helper(py, dir, rules, ended)) {
      if (!started_) {
        why = ended;
        return false;
      }
      for (Problem& p : problems_)
        if (p.outcome == Outcome::Pending) p.reason = ended;
      return true;
    }
  }
}

bool Import::run_helper(const PythonFacts& py, const HelperDir& dir, const LandlockRules& rules,
                        std::string& why) {
  std::vector<size_t> todo;
  json job = {{"prelude", dir.helper() + "/prelude.ts"},
              {"device", a_.device},
              {"sys_path", py.sys_path},
              {"mode", a_.mode},
              {"problems", json::array()}};
  for (size_t i = 0; i < problems_.size(); ++i)
    if (problems_[i].outcome == Outcome::Pending) {
      todo.push_back(i);
      json problem = {{"name", problems_[i].name},
                      {"path", problems_[i].path},
                      {"file", fs::path(problems_[i].file).filename().string()}};
      if (!a_.package_json.empty()) problem["package"] = json::parse(a_.package_json);
      job["problems"].push_back(problem);
    }
  std::string job_file = dir.helper() + "/job.json";
  write_file_atomic(job_file, job.dump(-1, ' ', false, json::error_handler_t::replace));
  std::map<std::string, std::string> env = python_environment();
  env["HOME"] = env["TMPDIR"] = dir.work();
  Pipe reply = make_pipe();
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  SpawnOptions o;
  o.env = child_environment(env);
  o.argv = {py.executable, dir.helper() + "/kernelbench_import.py",
            "--reply-fd",  std::to_string(kReplyFd),
            "--job",       job_file};
  // Its answers on fd 3, with what the problems print; its own stdout goes to kforge's stderr.
  o.fds = {{reply.write.get(), kReplyFd}, {2, 1}};
  if (null) o.fds.push_back({null.get(), 0});
  if (rules.fd() >= 0) {  // each problem's process enters a layer of its own (see the helper)
    o.fds.push_back({rules.fd(), kLayerFd});
    o.argv.insert(o.argv.end(), {"--layer-fd", std::to_string(kLayerFd)});
  }
  o.own_process_group = true;  // killing it kills the problem's process with it
  o.confine = ChildConfinement{};
  // With CUDA, the driver writes beneath /proc/PID/task of every process that uses it, and a rule
  // names one PID: the helper (kforge's code, which runs no problem code) then has no Landlock
  // layer of its own, and each problem's process enters the rule set with its own PID added.
  o.confine->files = a_.device == "cuda" ? nullptr : &rules;
  o.confine->memory_bytes = reference_limits(std::nullopt, kCheckReferenceSeconds).memory_bytes;
  // CPU seconds per process: each problem's process has its own, PyTorch uses up to 2 threads.
  o.confine->cpu_seconds = static_cast<int64_t>(2 * a_.time_limit) + 10;
  o.confine->workdir = dir.work();
  Process helper = Process::spawn(o);
  reply.write.reset();
  ProblemOutput output(
      [this](const std::string& who, const std::string& line) { observer_.on_output(who, line); });

  using clock = std::chrono::steady_clock;
  auto limit =
      std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(a_.time_limit));
  LineReader lines(reply.read.get(), kMaxLineBytes);
  std::optional<size_t> current;  // index into `todo` of the problem under way
  size_t next = 0;                // the next problem the helper should start
  bool hello = false, progress = false;
  auto deadline = clock::now() + kHelperStartLimit;
  auto stop = [&](const std::string& problem_reason, const std::string& rest) {
    output.end();
    if (current) fail(problems_[todo[*current]], problem_reason), progress = true;
    why = rest;
    return progress;
  };
  for (;;) {
    std::string line;
    LineReader::Got got = lines.next(line, deadline);
    if (got == LineReader::Got::Timeout) {
      helper.kill();
      return stop("took more than " + seconds(a_.time_limit) +
                      " to convert and check (stopped at kforge's deadline, --time-limit)",
                  "kforge's importer did not " + std::string(hello ? "go on" : "start") +
                      " within its time limit");
    }
    if (got != LineReader::Got::Line) {  // Closed or TooLong
      int status = helper.kill();
      if (got == LineReader::Got::TooLong) ++kforge_bugs_;
      std::string how = got == LineReader::Got::TooLong ? "sent an overlong line (a kforge bug)"
                                                        : describe_exit(status);
      return stop("kforge's importer " + how + " while it ran (the problem's code ended it)",
                  "kforge's importer (" + py.executable + ") " + how +
                      (hello ? "" : " before it started (its messages are above)"));
    }
    json j = json::parse(line, nullptr, false);
    auto malformed = [&] {
      helper.kill();
      ++kforge_bugs_;
      return stop("kforge's importer sent a malformed line (a kforge bug): " + line.substr(0, 200),
                  "kforge's importer sent a malformed line (a kforge bug)");
    };
    if (!j.is_object()) return malformed();
    if (j.contains("error") && (hello ? j["error"] == "no_cuda" : j["error"] == "no_torch")) {
      std::string detail = text(field(j, "detail"));
      if (j["error"] == "no_cuda") throw UsageError("--device cuda: " + detail);
      helper.kill();
      return stop("", detail);
    }
    if (j.contains("torch") && !hello) {
      hello = true;
      if (!started_) {
        python_ = text(field(j, "python"));
        torch_ = text(field(j, "torch"));
        observer_.on_start(problems_.size(), python_, torch_, confinement_);
      }
      started_ = true;
      deadline = clock::now() + limit;
    } else if (j.contains("start") && hello && !current && j["start"] == next &&
               next < todo.size()) {
      current = next++;
      output.begin(problems_[todo[*current]].file);
      deadline = clock::now() + limit;
    } else if (j.contains("output") && current && j["output"] == *current &&
               (field(j, "text").is_string() || field(j, "dropped").is_number_unsigned())) {
      if (field(j, "text").is_string()) output.take(j["text"].get<std::string>());
      if (field(j, "dropped").is_number_unsigned()) output.dropped(j["dropped"].get<int64_t>());
    } else if (j.contains("index") && current && j["index"] == *current) {
      output.end();
      on_result(problems_[todo[*current]], j);
      current.reset();
      progress = true;
      deadline = clock::now() + limit;
    } else if (j.contains("done") && hello && !current && next == todo.size()) {
      output.end();
      helper.kill();  // and anything a problem's process left behind in its group
      return true;
    } else {
      return malformed();
    }
  }
}

void Import::fail(Problem& p, const std::string& reason) {
  p.outcome = Outcome::Failed;
  p.reason = reason;
  observer_.on_failed(p);
  if (a_.mode != "convert") return;  // a model's profile or check writes no task
  // A task an earlier import wrote for this problem would now be stale: it goes.
  std::string stale = suite_dir_ + "/" + p.name + ".toml";
  std::optional<std::string> old = read_file(stale);
  if (old && old->rfind("# Converted from the KernelBench problem", 0) == 0 &&
      ::unlink(stale.c_str()) == 0)
    observer_.on_removed_stale(stale);
}

// A problem's result. Its fields were checked by the helper, and are checked again here: the
// problem's code could have written them (for itself only).
void Import::on_result(Problem& p, const json& j) {
  if (field(j, "ok") != true) {
    std::string reason = field(j, "reason").is_string() ? text(j["reason"]) : "no reason given";
    if (field(j, "importer") == true) ++importer_failures_;
    return fail(p, reason);
  }
  if (a_.mode != "convert") {  // a model's profile or check: the caller reads it defensively
    if (!field(j, "result").is_object())
      return fail(p, "its result is malformed (the model's code wrote on kforge's pipe)");
    p.outcome = Outcome::Converted;
    results_.push_back(j["result"].dump(-1, ' ', false, json::error_handler_t::replace));
    return observer_.on_converted(p, KernelBenchConversion{});
  }
  const json &toml = field(j, "toml"), &dims_of = field(j, "dims"), &fixed_of = field(j, "fixed"),
             &checked = field(j, "checked"), &notes = field(j, "notes");
  bool typed = toml.is_string() && dims_of.is_object() && fixed_of.is_object() &&
               checked.is_array() && notes.is_array() &&
               std::all_of(fixed_of.begin(), fixed_of.end(),
                           [](const json& v) { return v.is_number_integer(); }) &&
               std::all_of(notes.begin(), notes.end(), [](const json& v) { return v.is_string(); });
  if (!typed) return fail(p, "its result is malformed (the problem's code wrote on kforge's pipe)");
  if (!safe_task_name(p.name))
    throw Error("task name '" + p.name + "' is not a safe file name (a kforge bug)");
  std::string path = suite_dir_ + "/" + p.name + ".toml";
  // A task that would not load is not written: kforge's loader reads it first (the helper checks
  // the same limits, so this is a kforge bug, or a result the problem's code forged).
  try {
    (void)tasks::parse_task(path, toml.get<std::string>());
  } catch (const std::exception& e) {
    return fail(p, std::string("the converted task would not load (a kforge bug, unless the "
                               "problem's code forged its result), so it is not written: ") +
                       e.what());
  }
  try {
    make_directories(suite_dir_);
    write_file_atomic(path, toml.get<std::string>());
  } catch (const std::exception& e) {  // the file system's failure is this problem's, not an exit 4
    return fail(p, std::string("its task could not be written: ") + e.what());
  }
  p.outcome = Outcome::Converted;
  written_.push_back(path);
  KernelBenchConversion c;
  for (const auto& [k, v] : dims_of.items()) c.dims.push_back(k);
  for (const auto& [k, v] : fixed_of.items()) c.fixed.push_back({k, v.get<int64_t>()});
  c.checked_sizes = checked.size();
  c.timed_checked = field(j, "timed_checked") == true;
  for (const auto& n : notes) c.notes.push_back(n.get<std::string>());
  observer_.on_converted(p, c);
}

}  // namespace

void KernelBenchObserver::on_output(const std::string& who, const std::string& line) {
  std::cout.flush();
  write_line(2, "output     " + who + ": " + line);
}

KernelBenchImport import_kernelbench(const KernelBenchOptions& a, KernelBenchObserver& observer) {
  if (a.suite.empty() || !std::all_of(a.suite.begin(), a.suite.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      }))
    throw Error("suite name '" + a.suite + "' is not a safe folder name (a kforge bug)");
  std::vector<std::string> files = problem_files(a.paths);
  std::string suite_dir = a.out_root + "/" + a.suite;
  std::vector<Problem> problems;
  std::set<std::string> taken;
  std::string cwd;  // POSIX, not std::filesystem (see tests/test_util.h, TempDir)
  if (char* here = ::getcwd(nullptr, 0)) cwd = here, std::free(here);
  for (const std::string& f : files) {
    Problem p;
    p.file = f;
    p.path = f[0] == '/' ? f : cwd + "/" + f;
    p.name = task_name(f, taken);
    p.reason = "not reached";
    problems.push_back(p);
  }
  HelperDir dir;
  Import import(a, suite_dir, problems, observer);

  std::vector<std::string> tried;
  for (const std::string& python : python_candidates(a.python)) {
    std::string resolved = find_in_path(python);
    if (resolved.empty() || ::access(resolved.c_str(), X_OK) != 0) {
      tried.push_back(python + ": not found");
      continue;
    }
    std::variant<PythonFacts, std::string> probed = probe_python(resolved, dir);
    if (const std::string* why = std::get_if<std::string>(&probed)) {
      tried.push_back(resolved + ": " + *why);
      continue;
    }
    std::string why;
    if (import.run(std::get<PythonFacts>(probed), dir, why)) break;
    tried.push_back(resolved + ": " + why);
  }
  if (!import.started()) {
    std::string list;
    for (const auto& t : tried) list += "\n  " + t;
    throw UsageError(
        a.command + " needs a Python 3 with PyTorch (it runs each " +
        (a.mode == "profile" ? "model" : "problem") + " with torch), and none was found:" + list +
        "\nInstall PyTorch for one of them (Debian: apt install python3-torch; or pip install "
        "torch), or name a Python that has it with --python or $KFORGE_PYTHON.");
  }
  KernelBenchImport out;
  out.suite_dir = suite_dir;
  out.problems = std::move(import.problems());
  out.written = std::move(import.written());
  out.importer_failures = import.importer_failures();
  out.kforge_bugs = import.kforge_bugs();
  out.results = std::move(import.results());
  out.python = import.python();
  out.torch = import.torch();
  out.confinement = import.confinement();
  return out;
}

}  // namespace kforge::tasks
