#include "kforge/evolve/remote_gpu.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>

#include "json_lines.h"
#include "kforge/common/error.h"
#include "kforge/common/expr.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/json_limits.h"
#include "kforge/common/process.h"
#include "kforge/common/strings.h"
#include "kforge/compile/candidate.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/reference_cache.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/outcome.h"
#include "kforge/verify/protocol.h"

namespace kforge::evolve {
namespace {

using nlohmann::json;

json device_json(const verify::DeviceInfo& d) {
  return {{"ordinal", d.ordinal},
          {"name", d.name},
          {"uuid", d.uuid},
          {"cc_major", d.cc_major},
          {"cc_minor", d.cc_minor},
          {"sm_count", d.sm_count},
          {"l2_bytes", d.l2_bytes},
          {"memory_bytes", d.memory_bytes},
          {"max_shared_per_block_optin", d.max_shared_per_block_optin},
          {"clock_khz", d.clock_khz},
          {"memory_clock_khz", d.memory_clock_khz},
          {"memory_bus_bits", d.memory_bus_bits}};
}

// A worker's GPU as its hello describes it; throws kforge::Error naming the field.
verify::DeviceInfo device_from_json(const json& j) {
  const std::string w = "device";
  const int64_t big = int64_t{1} << 30;
  verify::DeviceInfo d;
  d.ordinal = static_cast<int>(wire::integer(j, w, "ordinal", 0, 1 << 20));
  d.name = wire::text(j, w, "name", 256);
  d.uuid = wire::text(j, w, "uuid", 256);
  d.cc_major = static_cast<int>(wire::integer(j, w, "cc_major", 0, 1000));
  d.cc_minor = static_cast<int>(wire::integer(j, w, "cc_minor", 0, 1000));
  d.sm_count = static_cast<int>(wire::integer(j, w, "sm_count", 0, big));
  d.l2_bytes = static_cast<int>(wire::integer(j, w, "l2_bytes", 0, big));
  d.memory_bytes = static_cast<size_t>(wire::integer(j, w, "memory_bytes", 0, int64_t{1} << 60));
  d.max_shared_per_block_optin =
      static_cast<int>(wire::integer(j, w, "max_shared_per_block_optin", 0, big));
  d.clock_khz = static_cast<int>(wire::integer(j, w, "clock_khz", 0, big));
  d.memory_clock_khz = static_cast<int>(wire::integer(j, w, "memory_clock_khz", 0, big));
  d.memory_bus_bits = static_cast<int>(wire::integer(j, w, "memory_bus_bits", 0, big));
  return d;
}

json facts_json(const compile::DeviceFacts& f) {
  return {{"arch", f.arch},
          {"num_sms", f.num_sms},
          {"warp_size", f.warp_size},
          {"max_shared_per_block", f.max_shared_per_block},
          {"max_threads_per_block", f.max_threads_per_block},
          {"max_block", f.max_block},
          {"max_grid", f.max_grid},
          {"measured", f.measured}};
}

// "sm_90a": what NVRTC's --gpu-architecture takes, and nothing else.
bool is_arch(const std::string& a) {
  if (a.size() < 5 || a.size() > 8 || a.rfind("sm_", 0) != 0) return false;
  size_t digits = 3;
  while (digits < a.size() && a[digits] >= '0' && a[digits] <= '9') ++digits;
  return digits > 3 &&
         (digits == a.size() || (digits + 1 == a.size() && a[digits] >= 'a' && a[digits] <= 'z'));
}

std::array<int64_t, 3> three(const json& j, const std::string& where, const char* key) {
  const json& v = wire::at(j, where, key);
  std::string name = wire::path(where, key);
  if (!v.is_array() || v.size() != 3)
    throw Error(name + ": " + wire::quoted(v) + " is not an array of 3 integers");
  std::array<int64_t, 3> out{};
  for (size_t i = 0; i < 3; ++i)
    out[i] = wire::integer_value(v[i], name + "[" + std::to_string(i) + "]", 1, INT32_MAX);
  return out;
}

// What plans may assume of a worker's GPU, as its hello says; throws kforge::Error naming the
// field.
compile::DeviceFacts facts_from_json(const json& j) {
  const std::string w = "facts";
  std::string arch = wire::text(j, w, "arch", 16);
  if (!is_arch(arch))
    throw Error("facts.arch: " + wire::quoted(arch) + " is not an architecture like sm_90a");
  compile::DeviceFacts f = compile::DeviceFacts::for_arch(arch);
  f.num_sms = wire::integer(j, w, "num_sms", 1, 1 << 20);
  f.warp_size = wire::integer(j, w, "warp_size", 1, 1024);
  f.max_shared_per_block = wire::integer(j, w, "max_shared_per_block", 1, int64_t{1} << 30);
  f.max_threads_per_block = wire::integer(j, w, "max_threads_per_block", 1, 1 << 20);
  f.max_block = three(j, w, "max_block");
  f.max_grid = three(j, w, "max_grid");
  f.measured = wire::boolean(j, w, "measured");
  return f;
}

// A worker's measured bandwidth and FLOP rates; throws kforge::Error naming the field.
verify::MeasuredFacts measured_from_json(const json& j) {
  const std::string w = "measured";
  verify::MeasuredFacts m;
  m.uuid = wire::text(j, w, "uuid", 256);
  m.name = wire::text(j, w, "name", 256);
  m.driver = static_cast<int>(wire::integer(j, w, "driver", 0, INT32_MAX));
  m.read_gbps = wire::number(j, w, "read_gbps");
  m.write_gbps = wire::number(j, w, "write_gbps");
  m.copy_gbps = wire::number(j, w, "copy_gbps");
  const json& peaks = wire::object(j, w, "peak_tflops");
  if (peaks.size() > 16) throw Error("measured.peak_tflops: more than 16 entries");
  for (const auto& [dtype, value] : peaks.items())
    m.peak_tflops[dtype] = wire::number(peaks, "measured.peak_tflops", dtype);
  return m;
}

json baselines_json(const verify::Baselines& b) {
  json list = json::array();
  for (const verify::BaselineTiming& t : b.list) list.push_back(t.to_json());
  return {{"list", list}, {"math_mode", b.math_mode}, {"clocks", b.clocks}};
}

// A worker's baselines; throws kforge::Error naming the field.
verify::Baselines baselines_from_json(const json& j) {
  const std::string w = "baselines";
  verify::Baselines b;
  b.list = verify::baselines_from_json(wire::at(j, w, "list"), wire::path(w, "list"));
  for (const verify::BaselineTiming& t : b.list)
    if (t.absent.size() > 65536)
      throw Error(wire::path(w, "list") + ": the " + std::string(to_string(t.kind)) +
                  " baseline's reason is a string of more than 65536 bytes");
  b.math_mode = wire::text(j, w, "math_mode", 64);
  b.clocks = wire::at(j, w, "clocks");
  return b;
}

verify::Verdict harness_error(const std::string& summary) {
  verify::Verdict v;
  v.outcome = verify::Outcome::HarnessError;
  v.summary = summary;
  return v;
}

// ---- The parent's side ----

// The reasons each worker was taken out, a line each.
std::string reasons(const std::vector<WorkerState>& workers) {
  std::string why;
  for (const WorkerState& w : workers)
    why += "\n  worker " + std::to_string(w.index) + ": " + w.out_reason;
  return why;
}

constexpr std::pair<GpuJobKind, std::string_view> kJobKinds[] = {
    {GpuJobKind::Verify, "verify"},
    {GpuJobKind::Screen, "screen"},
    {GpuJobKind::Admit, "admit"},
    {GpuJobKind::Baselines, "baselines"},
    {GpuJobKind::Profile, "profile"}};

}  // namespace

std::string_view to_string(GpuJobKind kind) {
  for (const auto& [k, name] : kJobKinds)
    if (k == kind) return name;
  return "?";
}

std::optional<GpuJobKind> gpu_job_kind_from_string(std::string_view name) {
  for (const auto& [k, n] : kJobKinds)
    if (n == name) return k;
  return std::nullopt;
}

std::string gpu_job_kinds_text() {
  std::string out;
  for (const auto& [k, name] : kJobKinds) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

std::string gpu_kind(const verify::DeviceInfo& d) {
  return d.name + " (compute capability " + std::to_string(d.cc_major) + "." +
         std::to_string(d.cc_minor) + ")";
}

std::string hello_problem(const json& hello) {
  try {
    (void)wire::integer(hello, "", "harness_version", 0, INT32_MAX);
    (void)device_from_json(wire::at(hello, "", "device"));
    (void)facts_from_json(wire::at(hello, "", "facts"));
    (void)wire::text(hello, "", "driver", 256);
    (void)wire::text(hello, "", "profiler", 4096);
    if (!wire::at(hello, "", "measured").is_null()) (void)measured_from_json(hello["measured"]);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string answer_problem(GpuJobKind kind, const json& answer) {
  try {
    if (!answer.is_object()) throw Error("answer: " + wire::quoted(answer) + " is not an object");
    if (answer.contains("error")) {  // the worker says the job is wrong
      (void)wire::text(answer, "answer", "error", 65536);
    } else if (kind == GpuJobKind::Baselines) {
      if (!wire::at(answer, "answer", "baselines").is_null())
        (void)baselines_from_json(answer["baselines"]);
    } else if (kind == GpuJobKind::Profile) {
      (void)wire::object(answer, "", "profile");
    } else {
      (void)verify::verdict_from_json(wire::at(answer, "answer", "verdict"));
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct RemoteGpu::Impl {
  struct Worker {
    verify::DeviceInfo device;
    std::string driver, profiler;
    json hello;
  };

  static WorkerPoolOptions checked(WorkerPoolOptions o) {
    o.check_hello = hello_problem;
    return o;
  }

  explicit Impl(RemoteGpuOptions o) : deadline(o.deadline), pool(checked(std::move(o.pool))) {
    for (const WorkerState& w : pool.workers()) {
      const json& hello = w.hello;
      if (!hello.is_object()) {  // it never said hello (one that said it and died since still
                                 // counts)
        std::cerr << "kforge: GPU worker " << w.index << " did not start: " << w.out_reason << "\n";
        continue;
      }
      // The pool checked the hello (hello_problem): these reads cannot fail.
      int64_t version = hello.at("harness_version").get<int64_t>();
      if (version != verify::kHarnessVersion)
        throw WorkerError("GPU worker " + std::to_string(w.index) + " judges by harness version " +
                          std::to_string(version) + ", this kforge by " +
                          std::to_string(verify::kHarnessVersion) +
                          ": run the same kforge on every machine");
      Worker x{device_from_json(hello.at("device")), hello.at("driver").get<std::string>(),
               hello.at("profiler").get<std::string>(), hello};
      if (!workers.empty() && gpu_kind(x.device) != gpu_kind(workers.begin()->second.device))
        throw WorkerError("the GPU workers have GPUs of different kinds (worker " +
                          std::to_string(workers.begin()->first) + ": " +
                          gpu_kind(workers.begin()->second.device) + ", worker " +
                          std::to_string(w.index) + ": " + gpu_kind(x.device) +
                          "); their times are not comparable: run one kforge evolve per kind");
      workers[w.index] = std::move(x);
    }
    if (workers.empty())
      throw WorkerError("no GPU worker of the pool said hello" + reasons(pool.workers()));
  }

  // The task file's text, read once per version; an edited file is refused (the worker would judge
  // another task than the parent records).
  const std::string& task_text(const tasks::Task& task) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = texts.find(task.content_hash);
    if (it != texts.end()) return it->second;
    std::optional<std::string> text = read_file(task.file.string());
    if (!text || content_hash(*text) != task.content_hash)
      throw Error(task.file.string() +
                  ": the task file changed (or went) while the run used it; a GPU worker must load "
                  "the version the run loaded");
    return texts.emplace(task.content_hash, std::move(*text)).first->second;
  }

  json job(GpuJobKind kind, const tasks::Task& task, const Checked* c) {
    json j{{"kind", std::string(to_string(kind))},
           {"task",
            {{"file", task.file.string()},
             {"text", task_text(task)},
             {"content_hash", task.content_hash},
             {"dims", task.dims},
             {"check_dims", task.check_dims},
             {"unseen", task.unseen}}}};
    if (c)
      j["candidate"] = {{"source", c->proposal.source},
                        {"plan", c->proposal.plan},
                        {"tunables", c->report.tunables}};
    return j;
  }

  // The answer of a worker to the job of `kind` on `task` (and `c`), checked (answer_problem: a
  // worker whose answer is malformed is taken out and the job given to another); an error when
  // every worker it was given to failed. Throws WorkerError when no worker is left, or when a
  // worker says the job is wrong.
  JobResult call(GpuJobKind kind, const tasks::Task& task, const Checked* c) {
    JobResult r = pool.submit(job(kind, task, c), deadline,
                              [kind](const json& a) { return answer_problem(kind, a); })
                      .get();
    if (r.error && pool.alive() == 0)
      throw WorkerError("no GPU worker is left:" + reasons(pool.workers()));
    if (!r.error && r.answer.contains("error"))
      throw WorkerError("GPU worker " + std::to_string(r.worker) + " refused a " +
                        std::string(to_string(kind)) +
                        " job: " + r.answer["error"].get<std::string>());
    return r;
  }

  // read(answer) of worker `w`'s answer, which answer_problem() passed.
  template <typename F>
  static auto read(const JobResult& r, F&& f) -> decltype(f(r.answer)) {
    try {
      return f(r.answer);
    } catch (const std::exception& e) {
      throw Error("GPU worker " + std::to_string(r.worker) +
                  "'s answer passed its check, yet cannot be read: " + e.what());
    }
  }

  verify::Verdict verdict(GpuJobKind kind, const tasks::Task& task, const Checked& c) {
    // What the checks refused (admission's compile at unseen dims, say) is not sent: the worker
    // would choose other tunables.
    if (!c.report.ok()) return verify::verdict_from_report(c.report);
    JobResult r = call(kind, task, &c);
    if (r.error)  // every worker it was given to died, hung or broke the protocol on it
      return harness_error(std::string(to_string(kind)) + " on the GPU workers: " + *r.error);
    verify::Verdict v =
        read(r, [](const json& a) { return verify::verdict_from_json(a.at("verdict")); });
    v.gpu_uuid = workers.at(r.worker).device.uuid;
    return v;
  }

  std::chrono::milliseconds deadline;
  WorkerPool pool;
  std::map<int, Worker> workers;  // the ones that said hello
  std::mutex mutex;
  std::map<std::string, std::string> texts;  // task file text by content hash
};

RemoteGpu::RemoteGpu(RemoteGpuOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
RemoteGpu::~RemoteGpu() = default;

verify::Verdict RemoteGpu::verify(const tasks::Task& task, const Checked& c) {
  return impl_->verdict(GpuJobKind::Verify, task, c);
}
verify::Verdict RemoteGpu::screen(const tasks::Task& task, const Checked& c) {
  return impl_->verdict(GpuJobKind::Screen, task, c);
}
verify::Verdict RemoteGpu::admit(const tasks::Task& unseen, const Checked& c) {
  return impl_->verdict(GpuJobKind::Admit, unseen, c);
}

std::optional<verify::Baselines> RemoteGpu::baselines(const tasks::Task& task) {
  JobResult r = impl_->call(GpuJobKind::Baselines, task, nullptr);
  if (r.error) return std::nullopt;
  std::optional<verify::Baselines> read =
      Impl::read(r, [](const json& a) -> std::optional<verify::Baselines> {
        if (a.at("baselines").is_null()) return std::nullopt;
        return baselines_from_json(a["baselines"]);
      });
  if (!read) return std::nullopt;
  verify::Baselines b = *read;
  b.gpu_uuid = impl_->workers.at(r.worker).device.uuid;
  return b;
}

json RemoteGpu::profile(const tasks::Task& task, const Checked& c) {
  JobResult r = impl_->call(GpuJobKind::Profile, task, &c);
  if (r.error) return {{"error", *r.error}};
  json p = Impl::read(r, [](const json& a) { return a.at("profile"); });
  p["gpu_uuid"] = impl_->workers.at(r.worker).device.uuid;
  return p;
}

std::string RemoteGpu::profiler() const {
  return impl_->workers.begin()->second.profiler;
}
verify::DeviceInfo RemoteGpu::device() const {
  return impl_->workers.begin()->second.device;
}
std::string RemoteGpu::driver() const {
  return impl_->workers.begin()->second.driver;
}
std::vector<verify::DeviceInfo> RemoteGpu::devices() const {
  std::vector<verify::DeviceInfo> out;
  for (const auto& [index, w] : impl_->workers) out.push_back(w.device);
  return out;
}
int RemoteGpu::parallel() const {
  return static_cast<int>(impl_->workers.size());
}
std::vector<WorkerState> RemoteGpu::workers() const {
  return impl_->pool.workers();
}

// The hellos were checked (hello_problem): the reads below cannot fail.
compile::DeviceFacts RemoteGpu::facts() const {
  return facts_from_json(impl_->workers.begin()->second.hello.at("facts"));
}

std::optional<verify::MeasuredFacts> RemoteGpu::measured() const {
  const json& hello = impl_->workers.begin()->second.hello;
  if (hello.at("measured").is_null()) return std::nullopt;
  return measured_from_json(hello["measured"]);
}

namespace {

// ---- The worker's side ----

int connect_to(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) throw UsageError("--connect: '" + address + "' is not HOST:PORT");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(address.substr(0, colon).c_str(), address.substr(colon + 1).c_str(),
                             &hints, &found);
      rc != 0)
    throw Error("--connect " + address + ": " + ::gai_strerror(rc));
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) ::close(fd), fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw Error("--connect " + address + ": cannot connect: " + std::strerror(errno));
  return fd;
}

void say(int fd, const std::string& line) {
  if (!write_line(fd, line)) throw Error("the parent closed the connection");
}

const char* const kJobLine = "the parent's job line";
const char* const kJob = "the parent's job";
constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr size_t kMaxConfigurations = 64;

InputError job_error(const std::string& field, const std::string& problem) {
  return InputError(kJob, std::nullopt, field, problem);
}

// Dims `d` as a configuration of `task`: its constraints hold, every input's size is positive and
// the inputs' bytes do not overflow.
void check_configuration(const tasks::Task& task, const tasks::Dims& d, const std::string& field) {
  try {
    for (const Expr& c : task.constraints)
      if (!c.eval_bool(d))
        throw job_error(field, "'" + c.text() + "' does not hold for " + tasks::format_dims(d));
    for (const tasks::InputSpec& in : task.inputs)
      for (const Expr& e : in.shape)
        if (e.eval_int(d) < 1)
          throw job_error(field, "input " + in.name + "'s size '" + e.text() +
                                     "' is not positive for " + tasks::format_dims(d));
    (void)task.input_bytes(d);
  } catch (const ExprError& e) {
    throw job_error(field, std::string(e.what()) + " for " + tasks::format_dims(d));
  }
}

// j as a configuration of `task`: every one of its dims and no other, each an integer from 1 on.
tasks::Dims dims_of(const json& j, const tasks::Task& task, const std::string& field) {
  if (!j.is_object())
    throw job_error(field, wire::quoted(j) + " is not an object of dim = integer");
  tasks::Dims d;
  for (const auto& [name, value] : j.items()) {
    if (!task.dims.count(name)) {
      std::string known;
      for (const auto& [k, v] : task.dims) known += (known.empty() ? "" : ", ") + k;
      throw job_error(field + "." + printable(name.substr(0, 64)),
                      "not a dim of the task (its dims: " + known + ")");
    }
    d[name] = wire::integer_value(value, field + "." + name, 1, kMaxDim);
  }
  for (const auto& [name, v] : task.dims)
    if (!d.count(name)) throw job_error(field, "missing dim '" + name + "'");
  check_configuration(task, d, field);
  return d;
}

// The job's task: the parent's file text, loaded as the parent loaded it, at the job's dims
// (admission's are unseen ones).
std::shared_ptr<const tasks::Task> task_of(const json& j) {
  std::string hash = wire::text(j, "task", "content_hash", 256);
  std::string file = wire::text(j, "task", "file", 4096);
  tasks::Task t;
  try {
    t = tasks::parse_task(file, wire::text(j, "task", "text", kMaxLineBytes));
  } catch (const InputError& e) {
    throw job_error("task.text", e.what());
  }
  if (t.content_hash != hash)
    throw job_error("task.content_hash", "the text does not have the content hash the parent sent");
  t.dims = dims_of(wire::at(j, "task", "dims"), t, "task.dims");
  const json& checks = wire::at(j, "task", "check_dims");
  if (!checks.is_array() || checks.size() > kMaxConfigurations)
    throw job_error("task.check_dims", "not an array of at most " +
                                           std::to_string(kMaxConfigurations) + " configurations");
  std::vector<tasks::Dims> check_dims;
  for (size_t i = 0; i < checks.size(); ++i)
    check_dims.push_back(dims_of(checks[i], t, "task.check_dims[" + std::to_string(i) + "]"));
  t.check_dims = std::move(check_dims);
  const json unseen = j.contains("unseen") ? j.at("unseen") : json(false);  // j: the task
  if (!unseen.is_boolean()) throw job_error("task.unseen", "not true or false");
  t.unseen = unseen.get<bool>();
  return std::make_shared<const tasks::Task>(std::move(t));
}

GpuJob read_job(const json& j) {
  GpuJob job;
  std::string kind = wire::text(j, "", "kind", 64);
  std::optional<GpuJobKind> known = gpu_job_kind_from_string(kind);
  if (!known)
    throw job_error("kind",
                    wire::quoted(kind) + " is not a GPU job (" + gpu_job_kinds_text() + ")");
  job.kind = *known;
  job.task = task_of(wire::object(j, "", "task"));
  if (job.kind == GpuJobKind::Baselines) return job;
  const json& c = wire::object(j, "", "candidate");
  job.source = wire::text(c, "candidate", "source", kMaxLineBytes);
  job.plan = wire::text(c, "candidate", "plan", kMaxLineBytes);
  const json& tunables = wire::object(c, "candidate", "tunables");
  if (tunables.size() > 256) throw job_error("candidate.tunables", "more than 256 tunables");
  for (const auto& [name, value] : tunables.items())
    job.tunables[name] = wire::integer_value(
        value, "candidate.tunables." + printable(name.substr(0, 64)), -kMaxDim, kMaxDim);
  return job;
}

class JobRunner {
 public:
  JobRunner(const GpuWorkerOptions& o, Gpu& gpu) : options_(o), gpu_(gpu), compiler_(o.compiler) {}

  // The answer to a job, or {"error": why} when the job itself is wrong (the GPU is fine).
  json answer_or_error(const json& j) {
    try {
      return answer(read_gpu_job(j));
    } catch (const InputError& e) {
      return {{"error", e.what()}};
    }
  }

 private:
  json answer(const GpuJob& job) {
    const tasks::Task& task = *job.task;
    if (job.kind == GpuJobKind::Baselines) {
      std::optional<verify::Baselines> b = gpu_.baselines(task);
      return {{"baselines", b ? baselines_json(*b) : json(nullptr)}};
    }
    Checked c;
    c.proposal.task = job.task;
    c.proposal.source = job.source;
    c.proposal.plan = job.plan;
    c.proposal.tunables = job.tunables;
    c.report = compile::check_candidate(task, tensors(task), c.proposal.source, c.proposal.plan,
                                        c.proposal.tunables, options_.facts, compiler_);
    if (job.kind == GpuJobKind::Profile) return {{"profile", gpu_.profile(task, c)}};
    verify::Verdict v;
    if (!c.report.ok())
      v = verify::verdict_from_report(c.report);  // as the parent's checks would have said
    else if (job.kind == GpuJobKind::Verify)
      v = gpu_.verify(task, c);
    else if (job.kind == GpuJobKind::Screen)
      v = gpu_.screen(task, c);
    else
      v = gpu_.admit(task, c);
    return {{"verdict", verify::to_json(v)}};
  }

  // Its outputs from the process's cache of references (bounded: a parent may send ever new
  // tasks).
  std::vector<compile::TensorInfo> tensors(const tasks::Task& task) {
    return compile::task_tensors(task, tasks::shared_references().outputs(task));
  }

  const GpuWorkerOptions& options_;
  Gpu& gpu_;
  compile::Compiler compiler_;
};

}  // namespace

JobLine read_job_line(std::string_view line) {
  json msg = parse_json_bounded(line, kJobLine, kMaxJsonDepth, kMaxLineBytes);
  if (!msg.is_object())
    throw InputError(kJobLine, std::nullopt, "",
                     wire::quoted(msg).substr(0, 80) + " is not a JSON object");
  try {
    std::string op = wire::text(msg, "", "op", 64);
    if (op != "job") throw Error("op: " + wire::quoted(op) + " is not \"job\"");
    JobLine j;
    j.id = wire::integer(msg, "", "id", INT64_MIN, INT64_MAX);
    (void)wire::object(msg, "", "job");
    j.job = std::move(msg["job"]);
    return j;
  } catch (const Error& e) {
    throw InputError(kJobLine, std::nullopt, "", e.what());
  }
}

GpuJob read_gpu_job(const json& job) {
  try {
    return read_job(job);
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {  // a field missing or of the wrong type (wire::)
    throw job_error("", e.what());
  }
}

void serve_gpu_jobs(const GpuWorkerOptions& options, Gpu& gpu) {
  UniqueFd fd(connect_to(options.address));
  say(fd.get(), json{{"op", "hello"},
                     {"worker", options.worker},
                     {"token", options.token},
                     {"device", device_json(gpu.device())},
                     {"driver", gpu.driver()},
                     {"profiler", gpu.profiler()},
                     {"facts", facts_json(options.facts)},
                     {"measured", options.measured ? options.measured->to_json() : json(nullptr)},
                     {"harness_version", verify::kHarnessVersion},
                     {"pid", ::getpid()}}
                    .dump());
  JobRunner runner(options, gpu);
  LineReader lines(fd.get(), kMaxLineBytes);
  for (std::string line;;) {
    LineReader::Got got = lines.next(line);
    if (got == LineReader::Got::Closed) return;  // the parent is done
    if (got == LineReader::Got::TooLong)
      throw InputError(kJobLine, std::nullopt, "",
                       "a line longer than " + std::to_string(lines.max_bytes()) + " bytes");
    JobLine job =
        read_job_line(line);  // a line that is not a job ends the worker: it has no id to answer
    json result{{"op", "result"}, {"id", job.id}, {"answer", runner.answer_or_error(job.job)}};
    say(fd.get(), result.dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

}  // namespace kforge::evolve
