// kb_answer.py, run confined (kernelbench_answer.h). The answer is only parsed, never run, so
// the confinement is a second wall: a bug in Python's parser, or in the helper, still cannot read
// a secret, write a file or reach the network.
#include "kforge/tasks/kernelbench_answer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <variant>

#include "kernelbench_answer_helper.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/line_channel.h"
#include "kforge/common/paths.h"
#include "kforge/common/process.h"
#include "kforge/common/sandbox.h"
#include "python_places.h"

namespace kforge::tasks {
namespace {

using nlohmann::json;

constexpr std::chrono::seconds kLimit{60};  // Python's start and one parse
constexpr int64_t kMemoryBytes = int64_t{2} << 30;
constexpr int64_t kCpuSeconds = 60;
constexpr size_t kMaxReplyBytes = size_t{64} << 20;
constexpr off_t kMaxAnswerBytes = off_t{4} << 20;  // answers are a few KB

// A private temporary folder holding the helper, removed with this object.
class HelperFolder {
 public:
  HelperFolder() : root_(make_temp_directory("kforge-kb-answer")) {
    write_file_atomic(helper(), std::string(embedded::kernelbench_answer_helper_kb_answer));
  }
  ~HelperFolder() { remove_tree(root_); }
  HelperFolder(const HelperFolder&) = delete;
  HelperFolder& operator=(const HelperFolder&) = delete;
  const std::string& root() const { return root_; }
  std::string helper() const { return root_ + "/kb_answer.py"; }

 private:
  std::string root_;
};

// Everything `argv` writes on stdout until it ends or `deadline`; how it ended.
struct Output {
  std::string text;
  std::string ended;  // "" when it exited with 0
};

Output run(const std::vector<std::string>& argv, const std::string& workdir,
           const LandlockRules* rules) {
  Pipe out = make_pipe();
  SpawnOptions o;
  o.env = child_environment({{"PYTHONDONTWRITEBYTECODE", "1"}});
  o.argv = argv;
  o.fds = {{out.write.get(), 1}, {2, 2}};
  o.confine = ChildConfinement{};
  o.confine->files = rules;
  o.confine->memory_bytes = kMemoryBytes;
  o.confine->cpu_seconds = kCpuSeconds;
  o.confine->workdir = workdir;
  o.own_process_group = true;
  Process p = Process::spawn(o);
  out.write.reset();
  Output r;
  auto deadline = std::chrono::steady_clock::now() + kLimit;
  char chunk[65536];
  for (;;) {
    Wait w = wait_readable(out.read.get(), deadline);
    if (w != Wait::Ready) {
      p.kill();
      r.ended = w == Wait::Timeout ? "took more than 60 s" : "could not be read";
      return r;
    }
    ssize_t n = ::read(out.read.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.text.append(chunk, static_cast<size_t>(n));
    if (r.text.size() > kMaxReplyBytes) {
      p.kill();
      r.ended = "answered more than 64 MiB";
      return r;
    }
  }
  std::optional<int> status = p.wait_exit(std::chrono::milliseconds(5000));
  int ws = status ? *status : p.kill();
  if (!(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) r.ended = describe_exit(ws);
  return r;
}

// Where this Python and its standard library live (the places it must read), asked of the
// interpreter itself with nothing of the answer's: its real executable, prefixes and module path.
std::variant<std::vector<std::string>, std::string> python_places(const std::string& python,
                                                                  const HelperFolder& dir) {
  static const char* kProbe =
      "import json, os, sys\n"
      "print(json.dumps({'real': os.path.realpath(sys.executable), 'path': [p for p in sys.path "
      "if p], 'prefixes': [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix], "
      "'version': sys.version_info[0]}))\n";
  Output out = run({python, "-I", "-S", "-c", kProbe}, dir.root(), nullptr);
  json j = json::parse(out.text, nullptr, false);
  if (!out.ended.empty() || !j.is_object() || !j["real"].is_string() || j["version"] != 3)
    return "does not run as Python 3 (it " +
           (out.ended.empty() ? "answered something else" : out.ended) + ")";
  std::vector<std::string> places = {j["real"].get<std::string>()};
  for (const char* key : {"path", "prefixes"})
    for (const json& p : j[key])
      if (p.is_string() && p.get<std::string>().size() > 1 && p.get<std::string>()[0] == '/')
        places.push_back(p.get<std::string>());
  return places;
}

FileAccess helper_access(const std::vector<std::string>& places, const HelperFolder& dir,
                         const std::string& answer) {
  FileAccess a;
  a.read = python_read_places(places);
  a.read.push_back(dir.root());
  a.read.push_back(answer);
  a.write = {"/dev/null"};
  a.no_tcp = true;
  a.scoped = true;
  return a;
}

std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  std::string cwd;
  if (char* here = ::getcwd(nullptr, 0)) cwd = here, std::free(here);
  return cwd + "/" + path;
}

}  // namespace

json read_kernelbench_answer(const std::string& file, const std::string& python) {
  struct stat st {};
  if (::access(file.c_str(), R_OK) != 0 || ::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw UsageError(file + ": cannot read the answer");
  if (st.st_size > kMaxAnswerBytes)
    throw UsageError(file + ": " + std::to_string(st.st_size) +
                     " bytes; a KernelBench answer may have at most 4 MiB");
  std::string answer = absolute(file);
  HelperFolder dir;
  std::vector<std::string> tried;
  for (const std::string& candidate : python_candidates(python)) {
    std::string resolved = find_in_path(candidate);
    if (resolved.empty() || ::access(resolved.c_str(), X_OK) != 0) {
      tried.push_back(candidate + ": not found");
      continue;
    }
    auto places = python_places(resolved, dir);
    if (const std::string* why = std::get_if<std::string>(&places)) {
      tried.push_back(resolved + ": " + *why);
      continue;
    }
    const auto& where = std::get<std::vector<std::string>>(places);
    LandlockRules rules(helper_access(where, dir, answer));
    // The real interpreter (a pyenv shim is a shell script the rules would not let run), isolated
    // from the user's environment (-I), without site packages (-S) and bytecode files (-B): the
    // helper needs only the standard library.
    Output out = run({where[0], "-I", "-S", "-B", dir.helper(), answer}, dir.root(), &rules);
    json j = json::parse(out.text, nullptr, false);
    if (out.ended.empty() && j.is_object() && j.contains("ok") && j["ok"].is_boolean()) return j;
    tried.push_back(resolved + ": kforge's reader " +
                    (out.ended.empty() ? "answered something else" : out.ended));
  }
  std::string list;
  for (const std::string& t : tried) list += "\n  " + t;
  throw UsageError(
      "reading a KernelBench answer needs a Python 3 (it parses the file with "
      "Python's ast, never running it), and none answered:" +
      list + "\nName one with --python or $KFORGE_PYTHON.");
}

}  // namespace kforge::tasks
