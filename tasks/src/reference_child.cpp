#include "kforge/tasks/reference_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kforge/common/error.h"
#include "kforge/common/line_channel.h"
#include "kforge/common/sandbox.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/output_fit.h"
#include "kforge/tasks/reference_cache.h"

namespace kforge::tasks {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr int kReplyFd = 3;  // the child's answer channel (its stdout is the user's)
constexpr size_t kMaxReplyBytes = size_t{64} << 20;  // more is not a reply but a runaway child
constexpr const char* kTimeFlag = "--reference-time-limit";
constexpr const char* kTimeEnv = "KFORGE_REFERENCE_TIME_LIMIT";
constexpr const char* kMemoryEnv = "KFORGE_REFERENCE_MEMORY_LIMIT";
constexpr const char* kCompiling = "while loading and compiling the reference";
constexpr std::chrono::seconds kStartLimit{60};

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The whole text as a number, else nullopt ("", "12abc", "1 2"); strtod's nan and inf pass here.
std::optional<double> parse_number(const std::string& text) {
  std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

double parse_seconds(const std::string& text, const std::string& name) {
  std::optional<double> v = parse_number(text);
  if (!v || !std::isfinite(*v) || *v <= 0 || *v > kMaxReferenceSeconds)
    throw InputError(name, std::nullopt, "",
                     "must be a number of seconds above 0 and at most " +
                         std::to_string(static_cast<int>(kMaxReferenceSeconds)) + ", got '" + text +
                         "'");
  return *v;
}

int64_t parse_memory(const std::string& text) {
  std::string t = trim(text);
  if (t == "none") return 0;
  auto fail = [&] {
    throw InputError(kMemoryEnv, std::nullopt, "",
                     "must be a size in bytes, optionally with K, M, G or T (binary units), at "
                     "least 256M, or 'none'; got '" +
                         text + "'");
  };
  size_t digits = 0;
  while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  if (digits == 0 || digits > 15 || t.size() > digits + 1) fail();
  int64_t v = std::stoll(t.substr(0, digits));
  if (t.size() == digits + 1) {
    int shift = 0;
    switch (std::toupper(static_cast<unsigned char>(t.back()))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        fail();
    }
    if (v > (INT64_MAX >> shift)) fail();
    v <<= shift;
  }
  if (v < kMinReferenceMemory) fail();
  return v;
}

std::string human_size(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", v, units[u]);
  return buf;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    throw Error(std::string("cannot find the kforge binary (/proc/self/exe): ") +
                std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

// What a child said to one request, or how it ended without saying it.
struct ReferenceChild::Outcome {
  std::optional<json> result;
  std::optional<json> error;    // {"kind": input | memory | error | internal, ...}
  std::string at = kCompiling;  // the step it was on last
  bool timed_out = false;
  int status = 0;  // waitpid status, when it ended without an answer
};

namespace {

std::string memory_note(const ReferenceLimits& limits) {
  return "the reference's memory limit: " +
         (limits.memory_bytes > 0 ? human_size(limits.memory_bytes) + "; " + kMemoryEnv + " sets it"
                                  : std::string("none"));
}

// Why the child gave no result, as an InputError naming the task file (field "reference");
// a harness error (kforge::Error, or a kforge bug) is rethrown as such.
InputError failure(const ReferenceChild::Outcome& o, const std::string& file,
                   const ReferenceLimits& limits) {
  if (o.timed_out)
    return InputError(file, std::nullopt, "reference",
                      "did not finish within " + seconds_text(limits.seconds) + " s " + o.at +
                          "; a loop that never ends? (" + kTimeFlag + " or " + kTimeEnv +
                          " sets the limit)");
  if (o.error) {
    const json& e = *o.error;
    std::string kind = e.value("kind", "");
    std::string message = e.value("message", "");
    if (kind == "input") {
      std::optional<int> line;
      if (e.contains("line") && e["line"].is_number_integer()) line = e["line"].get<int>();
      return InputError(e.value("file", file), line, e.value("field", ""),
                        e.value("problem", message));
    }
    if (kind == "memory")
      return InputError(file, std::nullopt, "reference",
                        "ran out of memory " + o.at + " (" + memory_note(limits) + ")");
    if (kind == "usage") throw UsageError(message);
    if (kind == "error") throw Error(message);
    throw std::runtime_error(
        message);  // exit 4: a kforge bug, as if it had happened in this process
  }
  std::string how = WIFSIGNALED(o.status) ? "signal " + std::to_string(WTERMSIG(o.status)) + ", " +
                                                strsignal(WTERMSIG(o.status))
                                          : "status " + std::to_string(o.status);
  return InputError(file, std::nullopt, "reference",
                    "crashed (" + how + ") " + o.at + " (" + memory_note(limits) + ")");
}

std::string selection_name(DimsSelection s) {
  switch (s) {
    case DimsSelection::Timed:
      return "timed";
    case DimsSelection::Check:
      return "check";
    case DimsSelection::All:
      return "all";
  }
  return "check";
}

double number_or_nan(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number())
    return std::nan("");  // JSON has no NaN or Inf: they are null
  return j[key].get<double>();
}

}  // namespace

ReferenceLimits reference_limits(const std::optional<std::string>& flag, double default_seconds) {
  ReferenceLimits l;
  l.seconds = default_seconds;
  if (flag)
    l.seconds = parse_seconds(*flag, kTimeFlag);
  else if (const char* v = std::getenv(kTimeEnv))
    l.seconds = parse_seconds(v, kTimeEnv);
  if (const char* v = std::getenv(kMemoryEnv)) {
    l.memory_bytes = parse_memory(v);
  } else {
    long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    l.memory_bytes = pages > 0 && page > 0
                         ? std::max<int64_t>(int64_t{pages} * page / 2, kMinReferenceMemory)
                         : 0;
  }
  return l;
}

ReferenceChild::ReferenceChild(ReferenceLimits limits, std::vector<std::string> command)
    : limits_(limits),
      command_(command.empty() ? std::vector<std::string>{self_exe(), kReferenceMode}
                               : std::move(command)),
      replies_(-1, kMaxReplyBytes) {}

ReferenceChild::~ReferenceChild() {
  stop();
}

void ReferenceChild::start() {
  auto [mine, theirs] = socket_pair();
  SpawnOptions o;
  o.argv = command_;
  o.env = child_environment();  // no API keys in the child that runs a task file's code
  // The answers on fd 3; a reference's print() goes to stderr, never into the command's output.
  o.fds = {{theirs.get(), kReplyFd}, {2, 1}};
  process_ = Process::spawn(o);
  // Its limits before it is sent anything: until then it only starts kforge. (It makes itself die
  // with kforge: run_reference_worker.)
  rlimit data{static_cast<rlim_t>(limits_.memory_bytes), static_cast<rlim_t>(limits_.memory_bytes)};
  rlimit no_core{0, 0};
  ::prlimit(process_.pid(), RLIMIT_CORE, &no_core, nullptr);
  if (limits_.memory_bytes > 0 && ::prlimit(process_.pid(), RLIMIT_DATA, &data, nullptr) != 0)
    throw Error(std::string("cannot limit the reference child's memory: ") + std::strerror(errno));
  socket_ = std::move(mine);
  replies_.reset(socket_.get());
}

void ReferenceChild::stop() {
  socket_.reset();
  process_.kill();  // idle, hung, or gone already; its teardown is of no use
  process_ = Process();
}

ReferenceChild::Outcome ReferenceChild::ask(const json& request) {
  bool fresh = !process_.running();
  if (fresh) start();
  (void)write_line(socket_.get(), dump(request));  // a dead child is an answer below
  auto step = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(limits_.seconds));
  // Starting kforge (loading LibTorch) is not the reference's time: the first step begins with the
  // child's first line, and a fresh child's start has a generous limit of its own.
  auto deadline = std::chrono::steady_clock::now() +
                  (fresh ? std::max<std::chrono::steady_clock::duration>(step, kStartLimit) : step);
  Outcome out;
  bool done = false, malformed = false, gone = false;
  while (!done) {
    std::string line;
    LineReader::Got got = replies_.next(line, deadline);
    if (got == LineReader::Got::Timeout) {
      out.timed_out = true;
      break;
    }
    if (got == LineReader::Got::TooLong) {  // not a reply but a runaway child
      malformed = true;
      break;
    }
    if (got == LineReader::Got::Closed) {
      gone = true;  // the child ended without an answer
      break;
    }
    json reply = json::parse(line, nullptr, false);
    if (reply.is_object() && reply.contains("at") && reply["at"].is_string()) {
      out.at = reply["at"].get<std::string>();
      deadline = std::chrono::steady_clock::now() + step;
      if (on_step_) on_step_(out.at);
    } else if (reply.is_object() && reply.contains("result")) {
      out.result = reply["result"];
      done = true;
    } else if (reply.is_object() && reply.contains("error") && reply["error"].is_object()) {
      out.error = reply["error"];
      done = true;
    } else {
      malformed = done = true;
    }
  }
  if (done && !malformed) return out;  // the child waits for the next request
  socket_.reset();
  int status = process_.kill();
  process_ = Process();
  if (malformed) throw Error("kforge's reference child sent a malformed reply (a kforge bug)");
  if (gone) {
    if (WIFEXITED(status))
      throw Error("kforge's reference child (" + join(command_, " ") + ") ended with exit code " +
                  std::to_string(WEXITSTATUS(status)) + " and no answer" +
                  (limits_.memory_bytes > 0
                       ? " (is its memory limit, " + human_size(limits_.memory_bytes) + " from " +
                             kMemoryEnv + " or half the memory, too small to start kforge?)"
                       : std::string()));
    out.status = status;
  }
  return out;
}

TaskCheck ReferenceChild::check(const fs::path& file, const CheckOptions& options) {
  json req = {{"mode", "check"},
              {"file", file.string()},
              {"dims", selection_name(options.dims)},
              {"seed", options.seed},
              {"timing_runs", options.timing_runs}};
  Outcome o = ask(req);
  if (o.result) {
    TaskCheck c = check_from_json(*o.result);
    for (auto& p : c.problems)  // LibTorch's allocator past RLIMIT_DATA
      if (p.find("can't allocate memory") != std::string::npos)
        p += " (" + memory_note(limits_) + ")";
    return c;
  }
  TaskCheck c;
  c.task = file.parent_path().filename().string() + "/" + file.stem().string();
  c.problems.push_back(failure(o, file.string(), limits_).what());
  return c;
}

ShapeFacts ReferenceChild::shape_facts(const Task& task) {
  Outcome o = ask({{"mode", "shapes"}, {"file", task.file.string()}});
  if (!o.result) throw failure(o, task.file.string(), limits_);
  const json& r = *o.result;
  if (r.at("version") != task.content_hash)
    throw Error(task.file.string() + " changed while kforge read it; run the command again");
  ShapeFacts f;
  f.output_count = r.at("output_count").get<size_t>();
  if (r.at("outputs").is_array()) {
    f.outputs.emplace();
    for (const auto& out : r["outputs"]) {
      auto dtype = parse_dtype(out.at("dtype").get<std::string>());
      if (!dtype) throw Error("kforge's reference child sent an unknown dtype (a kforge bug)");
      f.outputs->push_back({out.at("sizes").get<std::vector<int64_t>>(), *dtype});
      if (out.contains("shape"))
        f.output_exprs.push_back(out["shape"].get<std::vector<std::string>>());
    }
    f.fitted = r.value("fitted", false);
  }
  if (r.at("bytes").is_number()) f.bytes = r["bytes"].get<double>();
  return f;
}

std::vector<OutputInfo> ReferenceChild::outputs(const Task& task) {
  Outcome o = ask({{"mode", "outputs"}, {"file", task.file.string()}});
  if (!o.result) throw failure(o, task.file.string(), limits_);
  const json& r = *o.result;
  if (r.at("version") != task.content_hash)
    throw Error(task.file.string() + " changed while kforge read it; run the command again");
  std::vector<OutputInfo> out;
  for (const auto& t : r.at("outputs")) {
    auto dtype = parse_dtype(t.at("dtype").get<std::string>());
    if (!dtype) throw Error("kforge's reference child sent an unknown dtype (a kforge bug)");
    out.push_back({t.at("name").get<std::string>(), *dtype, t.at("rank").get<size_t>()});
  }
  return out;
}

ordered_json check_to_json(const TaskCheck& c) {
  ordered_json j;
  j["task"] = c.task;
  j["ok"] = c.ok();
  j["problems"] = c.problems;
  j["notes"] = c.notes;
  j["configs"] = ordered_json::array();
  for (const auto& cr : c.configs) {
    ordered_json k = {{"dims", cr.dims}, {"timed", cr.timed}};
    if (!cr.error.empty()) k["error"] = cr.error;
    if (cr.reference_ms > 0) k["reference_ms"] = cr.reference_ms;
    k["bytes_moved"] = cr.bytes_moved;
    k["outputs"] = ordered_json::array();
    for (const auto& o : cr.outputs)
      k["outputs"].push_back({{"name", o.name},
                              {"shape", o.shape},
                              {"dtype", o.dtype},
                              {"min", o.min},
                              {"max", o.max},
                              {"mean", o.mean},
                              {"rms", o.rms},
                              {"nan", o.nan},
                              {"inf", o.inf}});
    j["configs"].push_back(k);
  }
  return j;
}

TaskCheck check_from_json(const json& j) {
  TaskCheck c;
  c.task = j.at("task").get<std::string>();
  c.problems = j.at("problems").get<std::vector<std::string>>();
  c.notes = j.at("notes").get<std::vector<std::string>>();
  for (const auto& k : j.at("configs")) {
    ConfigResult cr;
    cr.dims = k.at("dims").get<Dims>();
    cr.timed = k.at("timed").get<bool>();
    cr.error = k.value("error", "");
    cr.reference_ms = k.contains("reference_ms") ? number_or_nan(k, "reference_ms") : 0;
    cr.bytes_moved = number_or_nan(k, "bytes_moved");
    for (const auto& o : k.at("outputs")) {
      OutputStats s;
      s.name = o.at("name").get<std::string>();
      s.shape = o.at("shape").get<std::vector<int64_t>>();
      s.dtype = o.at("dtype").get<std::string>();
      s.min = number_or_nan(o, "min");
      s.max = number_or_nan(o, "max");
      s.mean = number_or_nan(o, "mean");
      s.rms = number_or_nan(o, "rms");
      s.nan = o.at("nan").get<int64_t>();
      s.inf = o.at("inf").get<int64_t>();
      cr.outputs.push_back(std::move(s));
    }
    c.configs.push_back(std::move(cr));
  }
  return c;
}

namespace {

void send(const json& j) {
  if (!write_line(kReplyFd, dump(j))) ::_exit(3);  // kforge is gone
}

json run_request(const json& req) {
  send({{"at", kCompiling}});  // started: the parent's clock for the first step begins here
  std::string mode = req.at("mode").get<std::string>();
  Task task = load_task(req.at("file").get<std::string>());
  if (mode == "check") {
    CheckOptions opt;
    std::string dims = req.at("dims").get<std::string>();
    opt.dims = dims == "timed" ? DimsSelection::Timed
               : dims == "all" ? DimsSelection::All
                               : DimsSelection::Check;
    opt.seed = req.at("seed").get<uint64_t>();
    opt.timing_runs = req.at("timing_runs").get<int>();
    opt.on_config = [](const std::string& where) { send({{"at", "on " + where}}); };
    return check_to_json(check_task(task, opt));
  }
  std::shared_ptr<const Reference> compiled = shared_references().reference(task);
  const Reference& ref = *compiled;
  json r = {{"version", task.content_hash}, {"output_count", ref.output_count()}};
  if (mode == "shapes") {
    send({{"at", "on timed dims (" + format_dims(task.dims) + ")"}});
    auto outs = output_shapes(task, ref, task.dims);
    auto bytes = bytes_that_must_move(task, ref, task.dims);
    r["outputs"] = nullptr;
    if (outs) {
      r["outputs"] = json::array();
      for (const auto& o : *outs)
        r["outputs"].push_back({{"sizes", o.sizes}, {"dtype", dtype_name(o.dtype)}});
    } else {
      try {  // the meta device lacks an op: fitted from CPU runs at the check dims
        send({{"at", "on the check dims, on the CPU (the meta device lacks an op)"}});
        std::vector<std::vector<Expr>> fitted = fit_output_shapes(task, ref);
        std::vector<OutputInfo> info = describe_outputs(task, ref);
        if (fitted.size() != info.size() || info.size() != ref.output_count())
          throw Error("the outputs counted differently");
        json outputs = json::array();
        double out_bytes = 0;
        for (size_t k = 0; k < fitted.size(); ++k) {
          std::vector<int64_t> sizes;
          std::vector<std::string> exprs;
          for (const Expr& e : fitted[k])
            sizes.push_back(e.eval_int(task.dims)), exprs.push_back(e.text());
          out_bytes += static_cast<double>(TensorShape{sizes, info[k].dtype}.bytes());
          outputs.push_back(
              {{"sizes", sizes}, {"dtype", dtype_name(info[k].dtype)}, {"shape", exprs}});
        }
        r["outputs"] = outputs;
        r["fitted"] = true;
        if (!bytes) bytes = static_cast<double>(task.input_bytes(task.dims)) + out_bytes;
      } catch (const std::exception&) {
        // too large to run at two configurations, or no expression fits: unknown
      }
    }
    r["bytes"] = bytes ? json(*bytes) : json(nullptr);
    return r;
  }
  if (mode == "outputs") {
    Dims smallest = task.dims;  // where describe_outputs runs it
    for (const Dims& d : task.check_dims)
      if (task.input_bytes(d) < task.input_bytes(smallest)) smallest = d;
    send({{"at", "on dims (" + format_dims(smallest) + "), the smallest configuration"}});
    r["outputs"] = json::array();
    for (const OutputInfo& o : describe_outputs(task, ref))
      r["outputs"].push_back({{"name", o.name}, {"dtype", dtype_name(o.dtype)}, {"rank", o.rank}});
    return r;
  }
  throw std::runtime_error("unknown __reference mode '" + mode + "'");
}

// One request's answer. Every failure is an answer, never an exception.
void answer(const std::string& request) {
  try {
    send({{"result", run_request(json::parse(request))}});
  } catch (const InputError& e) {
    json err = {
        {"kind", "input"}, {"file", e.file()}, {"field", e.field()}, {"problem", e.problem()}};
    if (e.line()) err["line"] = *e.line();
    send({{"error", err}});
  } catch (const UsageError& e) {
    send({{"error", {{"kind", "usage"}, {"message", e.what()}}}});
  } catch (const std::bad_alloc&) {
    send({{"error", {{"kind", "memory"}}}});
  } catch (const Error& e) {
    send({{"error", {{"kind", "error"}, {"message", e.what()}}}});
  } catch (const std::exception& e) {
    std::string what = e.what();
    // LibTorch's allocator past RLIMIT_DATA, outside a reference run that would report it itself.
    if (what.find("can't allocate memory") != std::string::npos)
      send({{"error", {{"kind", "memory"}}}});
    else
      send({{"error", {{"kind", "internal"}, {"message", what}}}});
  }
}

}  // namespace

void serve_reference_requests() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with kforge
  if (::getppid() == 1) ::_exit(127);  // kforge ended before that was set
  LineReader requests(kReplyFd);       // kforge's own requests: no cap
  for (std::string request; requests.next(request) == LineReader::Got::Line;) answer(request);
  std::fflush(nullptr);
  ::_exit(0);  // LibTorch's teardown is of no use here
}

}  // namespace kforge::tasks
