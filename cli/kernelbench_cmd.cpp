// `kforge tasks import-kernelbench PATH... --suite NAME [--out DIR]`: KernelBench problem files
// (Python modules) become a kforge suite. The conversion runs kforge's Python helper
// (tasks/kernelbench/, embedded in this binary) with a Python that has PyTorch; the tasks it writes
// are then checked like any suite (`kforge tasks check`). docs/task-format.md, "KernelBench
// problems", says what is converted and how.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "kernelbench_helper.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/paths.h"
#include "kforge/common/process.h"
#include "kforge/common/sandbox.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/driver.h"
#include "tasks_check.h"

namespace kforge::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ImportArgs {
  std::vector<std::string> paths;
  std::string suite;
  std::string out;
  std::string device = "cpu";
  std::string python;
};

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

// The helper's Python files (tasks/kernelbench/, embedded at build time).
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
      {"kb_convert.py", embedded::kernelbench_helper_kb_convert}};
  return files;
}

// The helper's files in a private temporary folder, removed with this object.
class HelperDir {
 public:
  HelperDir() {
    path_ = make_temp_directory("kforge-kernelbench");
    for (const auto& [name, text] : helper_files())
      write_file_atomic(path_ + "/" + name, std::string(text));
    write_file_atomic(path_ + "/prelude.ts", tasks::prelude_source());
  }
  ~HelperDir() { remove_tree(path_); }
  HelperDir(const HelperDir&) = delete;
  HelperDir& operator=(const HelperDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One run of the helper: its JSON lines, handed to `on_line` as they come.
int run_helper(const std::string& python, const HelperDir& dir, const ImportArgs& a,
               const std::vector<std::string>& files,
               const std::function<void(const json&)>& on_line) {
  std::map<std::string, std::string> env = {{"PYTHONDONTWRITEBYTECODE", "1"},
                                            {"PYTHONUNBUFFERED", "1"}};
  for (const char* name :
       {"PYTHONPATH", "PYTHONHOME", "PYENV_VERSION", "PYENV_ROOT", "VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* v = std::getenv(name)) env[name] = v;
  SpawnOptions o;
  o.env = child_environment(env);
  o.argv = {python,      dir.path() + "/kernelbench_import.py",
            "--prelude", dir.path() + "/prelude.ts",
            "--device",  a.device};
  o.argv.insert(o.argv.end(), files.begin(), files.end());
  Pipe out = make_pipe();
  o.fds = {{out.write.get(), 1}};  // its stderr is the user's: a traceback shows there
  Process p = Process::spawn(o);
  out.write.reset();
  std::string buffer;
  char chunk[65536];
  while (true) {
    ssize_t n = ::read(out.read.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded())
        throw Error("the KernelBench helper printed a line that is not JSON: " +
                    line.substr(0, 200));
      on_line(j);
    }
  }
  std::optional<int> status = p.wait_exit(std::chrono::milliseconds(60000));
  int ws = status ? *status : p.kill();
  if (WIFEXITED(ws)) return WEXITSTATUS(ws);
  throw Error("the KernelBench helper (" + python + ") " + describe_exit(ws));
}

std::string percent(size_t part, size_t whole) {
  return whole ? std::to_string((part * 100 + whole / 2) / whole) + "%" : "-";
}

int run_import(const ImportArgs& a, const fs::path& tasks_root) {
  if (a.suite.empty() || !std::all_of(a.suite.begin(), a.suite.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      }))
    throw InputError("--suite", std::nullopt, "",
                     "must be a folder name of letters, digits, _ and -, got '" + a.suite + "'");
  if (a.device != "cpu" && a.device != "cuda")
    throw InputError("--device", std::nullopt, "", "must be cpu or cuda, got '" + a.device + "'");
  if (a.device == "cuda")
    verify::Driver::get().require("kforge tasks import-kernelbench --device cuda");
  std::vector<std::string> files = problem_files(a.paths);
  std::string out_root = a.out.empty() ? tasks_root.string() : a.out;
  std::string suite_dir = out_root + "/" + a.suite;
  HelperDir dir;

  std::vector<std::string> pythons = python_candidates(a.python);
  std::vector<std::string> tried;
  std::vector<std::string> written;
  size_t converted = 0, failed = 0, internal = 0;
  bool started = false;
  for (const std::string& python : pythons) {
    std::string resolved = find_in_path(python);
    if (resolved.empty() || ::access(resolved.c_str(), X_OK) != 0) {
      tried.push_back(python + ": not found");
      continue;
    }
    std::optional<std::string> missing;
    int rc = run_helper(resolved, dir, a, files, [&](const json& j) {
      if (j.contains("error")) {
        missing = j.value("detail", "");
        if (j.value("error", "") == "no_cuda")
          throw UsageError("--device cuda: " + j.value("detail", ""));
        return;
      }
      if (j.contains("torch")) {
        started = true;
        std::cout << "importing " << files.size() << " KernelBench problem(s) into " << suite_dir
                  << " (" << j.value("python", "") << ", PyTorch " << j.value("torch", "")
                  << ", checked on " << a.device << ")" << std::endl;
        return;
      }
      std::string file = j.value("file", "");
      if (!j.value("ok", false)) {
        ++failed;
        if (j.value("internal", false)) ++internal;
        std::cout << "failed     " << file << ": " << j.value("reason", "") << std::endl;
        // A task an earlier import wrote for this problem would now be stale: it goes.
        std::string stale = suite_dir + "/" + j.value("name", "") + ".toml";
        std::optional<std::string> old = read_file(stale);
        if (old && old->rfind("# Converted from the KernelBench problem", 0) == 0 &&
            ::unlink(stale.c_str()) == 0)
          std::cout << "           removed " << stale << " (an earlier import's)" << std::endl;
        return;
      }
      std::string name = j.value("name", "");
      std::string path = suite_dir + "/" + name + ".toml";
      make_directories(suite_dir);
      write_file_atomic(path, j.value("toml", ""));
      try {
        (void)tasks::load_task(path);
      } catch (const InputError& e) {  // the importer wrote what the loader rejects: a kforge bug
        ++failed, ++internal;
        std::cout << "failed     " << file
                  << ": the converted task does not load (a kforge bug): " << e.what() << std::endl;
        return;
      }
      ++converted;
      written.push_back(path);
      std::string dims, fixed;
      for (const auto& [k, v] : j["dims"].items()) dims += (dims.empty() ? "" : ", ") + k;
      for (const auto& [k, v] : j["fixed"].items())
        fixed += (fixed.empty() ? "" : ", ") + k + "=" + std::to_string(v.get<int64_t>());
      std::cout << "converted  " << file << " -> " << a.suite << "/" << name << ": dims "
                << (dims.empty() ? "none" : dims) << (fixed.empty() ? "" : "; fixed " + fixed)
                << "; matches the Model at " << j["checked"].size() << " check size(s)"
                << (j.value("timed_checked", false) ? " and the timed sizes" : "") << std::endl;
      for (const auto& n : j["notes"])
        std::cout << "           note: " << n.get<std::string>() << "\n";
    });
    if (missing) {
      tried.push_back(resolved + ": " + *missing);
      continue;
    }
    if (rc != 0)
      throw Error("the KernelBench helper (" + resolved + ") exited with status " +
                  std::to_string(rc));
    break;
  }
  if (!started) {
    std::string list;
    for (const auto& t : tried) list += "\n  " + t;
    throw UsageError(
        "kforge tasks import-kernelbench needs a Python 3 with PyTorch (it imports each problem "
        "with "
        "torch), and none was found:" +
        list +
        "\nInstall PyTorch for one of them (Debian: apt install python3-torch; or pip install "
        "torch), or name a "
        "Python that has it with --python or $KFORGE_PYTHON.");
  }
  int check_rc = kExitOk;
  size_t total = files.size();
  if (!written.empty()) {
    std::cout << "\n";
    CheckArgs c;
    c.specs = written;
    c.device = a.device;
    check_rc = run_check(c, tasks_root);
  }
  std::cout << "\nimported " << converted << " of " << total << " KernelBench problem(s) ("
            << percent(converted, total) << ") into " << suite_dir << "; " << failed
            << " could not be converted"
            << (check_rc == kExitOk ? ""
                                    : "; some converted tasks fail `kforge tasks check` (above)")
            << "\n";
  if (internal) return kExitInternal;
  return failed || check_rc != kExitOk ? kExitFindings : kExitOk;
}

}  // namespace

void add_import_kernelbench_command(CLI::App* tasks, int& exit_code,
                                    std::function<fs::path()> root) {
  auto* cmd = tasks->add_subcommand("import-kernelbench",
                                    "Convert KernelBench problem files (or level folders) into a "
                                    "kforge suite, checked against each Model "
                                    "(needs a Python with PyTorch)");
  auto a = std::make_shared<ImportArgs>();
  cmd->add_option("paths", a->paths,
                  "KernelBench problem files or folders (e.g. KernelBench/KernelBench/level1)")
      ->required();
  cmd->add_option("--suite", a->suite, "Name of the suite (the folder the tasks are written to)")
      ->required();
  cmd->add_option("--out", a->out,
                  "Folder the suite folder goes in (default: the tasks folder, see --tasks-dir)");
  cmd->add_option("--device", a->device,
                  "Where each task is checked against its Model: cpu or cuda")
      ->capture_default_str();
  cmd->add_option(
      "--python", a->python,
      "Python with PyTorch (default: $KFORGE_PYTHON, else python3, then /usr/bin/python3)");
  cmd->fallthrough();
  cmd->callback([&exit_code, a, root] { exit_code = run_import(*a, root()); });
}

}  // namespace kforge::cli
