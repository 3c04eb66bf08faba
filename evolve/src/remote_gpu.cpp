#include "kforge/evolve/remote_gpu.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>

#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/compile/candidate.h"
#include "kforge/tasks/reference.h"
#include "kforge/verify/protocol.h"
#include "json_lines.h"

namespace kforge::evolve {
namespace {

using nlohmann::json;

json device_json(const verify::DeviceInfo& d) {
  return {{"ordinal", d.ordinal},     {"name", d.name},
          {"uuid", d.uuid},           {"cc_major", d.cc_major},
          {"cc_minor", d.cc_minor},   {"sm_count", d.sm_count},
          {"l2_bytes", d.l2_bytes},   {"memory_bytes", d.memory_bytes},
          {"max_shared_per_block_optin", d.max_shared_per_block_optin},
          {"clock_khz", d.clock_khz}, {"memory_clock_khz", d.memory_clock_khz},
          {"memory_bus_bits", d.memory_bus_bits}};
}

verify::DeviceInfo device_from_json(const json& j) {
  verify::DeviceInfo d;
  d.ordinal = j.value("ordinal", 0);
  d.name = j.value("name", "");
  d.uuid = j.value("uuid", "");
  d.cc_major = j.value("cc_major", 0), d.cc_minor = j.value("cc_minor", 0);
  d.sm_count = j.value("sm_count", 0);
  d.l2_bytes = j.value("l2_bytes", 0);
  d.memory_bytes = j.value("memory_bytes", size_t{0});
  d.max_shared_per_block_optin = j.value("max_shared_per_block_optin", 0);
  d.clock_khz = j.value("clock_khz", 0);
  d.memory_clock_khz = j.value("memory_clock_khz", 0);
  d.memory_bus_bits = j.value("memory_bus_bits", 0);
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

compile::DeviceFacts facts_from_json(const json& j) {
  compile::DeviceFacts f = compile::DeviceFacts::for_arch(j.at("arch").get<std::string>());
  f.num_sms = j.at("num_sms").get<int64_t>();
  f.warp_size = j.at("warp_size").get<int64_t>();
  f.max_shared_per_block = j.at("max_shared_per_block").get<int64_t>();
  f.max_threads_per_block = j.at("max_threads_per_block").get<int64_t>();
  f.max_block = j.at("max_block").get<std::array<int64_t, 3>>();
  f.max_grid = j.at("max_grid").get<std::array<int64_t, 3>>();
  f.measured = j.at("measured").get<bool>();
  return f;
}

json baselines_json(const verify::Baselines& b) {
  return {{"eager", b.eager.to_json()},
          {"scripted", b.scripted.to_json()},
          {"compiled", b.compiled ? b.compiled->to_json() : json(nullptr)},
          {"compiled_absent", b.compiled_absent},
          {"compiled_build_s", b.compiled_build_s},
          {"math_mode", b.math_mode},
          {"clocks", b.clocks}};
}

verify::Baselines baselines_from_json(const json& j) {
  if (!j.is_object()) throw Error("baselines: not an object");
  verify::Baselines b;
  b.eager = verify::time_stats_from_json(j.at("eager"));
  b.scripted = verify::time_stats_from_json(j.at("scripted"));
  if (!j.at("compiled").is_null()) b.compiled = verify::time_stats_from_json(j["compiled"]);
  b.compiled_absent = j.at("compiled_absent").get<std::string>();
  b.compiled_build_s = j.at("compiled_build_s").get<double>();
  b.math_mode = j.at("math_mode").get<std::string>();
  b.clocks = j.at("clocks");
  return b;
}

verify::Verdict harness_error(const std::string& summary) {
  verify::Verdict v;
  v.outcome = verify::Outcome::HarnessError;
  v.summary = summary;
  return v;
}

// ---- The parent's side ----

}  // namespace

std::string gpu_kind(const verify::DeviceInfo& d) {
  return d.name + " (compute capability " + std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor) + ")";
}

struct RemoteGpu::Impl {
  struct Worker {
    verify::DeviceInfo device;
    std::string driver, profiler;
    json hello;
  };

  explicit Impl(RemoteGpuOptions o) : deadline(o.deadline), pool(std::move(o.pool)) {
    for (const WorkerState& w : pool.workers()) {
      const json& hello = w.hello;
      if (!hello.is_object()) {  // it never said hello (one that said it and died since still counts)
        std::cerr << "kforge: GPU worker " << w.index << " did not start: " << w.out_reason << "\n";
        continue;
      }
      if (hello.value("harness_version", 0) != verify::kHarnessVersion)
        throw Error("GPU worker " + std::to_string(w.index) + " judges by harness version " +
                    std::to_string(hello.value("harness_version", 0)) + ", this kforge by " +
                    std::to_string(verify::kHarnessVersion) + ": run the same kforge on every machine");
      Worker x{device_from_json(hello.value("device", json::object())), hello.value("driver", ""), hello.value("profiler", ""),
               hello};
      if (!workers.empty() && gpu_kind(x.device) != gpu_kind(workers.begin()->second.device))
        throw Error("the GPU workers have GPUs of different kinds (worker " + std::to_string(workers.begin()->first) + ": " +
                    gpu_kind(workers.begin()->second.device) + ", worker " + std::to_string(w.index) + ": " +
                    gpu_kind(x.device) + "); their times are not comparable: run one kforge evolve per kind");
      workers[w.index] = std::move(x);
    }
    if (workers.empty()) throw Error("no GPU worker of the pool said hello");  // the pool throws first, with reasons
  }

  // The task file's text, read once per version; an edited file is refused (the worker would judge
  // another task than the parent records).
  const std::string& task_text(const tasks::Task& task) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = texts.find(task.content_hash);
    if (it != texts.end()) return it->second;
    std::optional<std::string> text = read_file(task.file.string());
    if (!text || content_hash(*text) != task.content_hash)
      throw Error(task.file.string() + ": the task file changed (or went) while the run used it; a GPU worker must load "
                  "the version the run loaded");
    return texts.emplace(task.content_hash, std::move(*text)).first->second;
  }

  json job(const std::string& kind, const tasks::Task& task, const Checked* c) {
    json j{{"kind", kind},
           {"task", {{"file", task.file.string()}, {"text", task_text(task)}, {"content_hash", task.content_hash},
                     {"dims", task.dims}, {"check_dims", task.check_dims}}}};
    if (c)
      j["candidate"] = {{"source", c->proposal.source}, {"plan", c->proposal.plan}, {"tunables", c->report.tunables}};
    return j;
  }

  JobResult call(json job) {
    JobResult r = pool.submit(std::move(job), deadline).get();
    if (r.error && pool.alive() == 0) {
      std::string why;
      for (const WorkerState& w : pool.workers()) why += "\n  worker " + std::to_string(w.index) + ": " + w.out_reason;
      throw Error("no GPU worker is left:" + why);
    }
    if (!r.error && r.answer.contains("error"))
      throw Error("GPU worker " + std::to_string(r.worker) + ": " + r.answer["error"].dump());
    return r;
  }

  // read(answer) of worker `w`'s answer, or kforge::Error saying the answer is malformed.
  template <typename F>
  static auto read(const JobResult& r, F&& f) -> decltype(f(r.answer)) {
    try {
      return f(r.answer);
    } catch (const std::exception& e) {
      throw Error("GPU worker " + std::to_string(r.worker) + " sent a malformed answer: " + e.what());
    }
  }

  verify::Verdict verdict(const std::string& kind, const tasks::Task& task, const Checked& c) {
    // What the checks refused (admission's compile at unseen dims, say) is not sent: the worker
    // would choose other tunables.
    if (!c.report.ok()) return verify::verdict_from_report(c.report);
    JobResult r = call(job(kind, task, &c));
    if (r.error)  // every worker it was given to died or hung on it
      return harness_error(kind + " on the GPU workers: " + *r.error);
    verify::Verdict v = read(r, [](const json& a) { return verify::verdict_from_json(a.at("verdict")); });
    v.gpu_uuid = workers.at(r.worker).device.uuid;
    return v;
  }

  std::chrono::milliseconds deadline;
  WorkerPool pool;
  std::map<int, Worker> workers;  // the ones that said hello
  std::mutex mutex;
  std::map<std::string, std::string> texts;  // task file text by content hash
};

RemoteGpu::RemoteGpu(RemoteGpuOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
RemoteGpu::~RemoteGpu() = default;

verify::Verdict RemoteGpu::verify(const tasks::Task& task, const Checked& c) { return impl_->verdict("verify", task, c); }
verify::Verdict RemoteGpu::screen(const tasks::Task& task, const Checked& c) { return impl_->verdict("screen", task, c); }
verify::Verdict RemoteGpu::admit(const tasks::Task& unseen, const Checked& c) { return impl_->verdict("admit", unseen, c); }

std::optional<verify::Baselines> RemoteGpu::baselines(const tasks::Task& task) {
  JobResult r = impl_->call(impl_->job("baselines", task, nullptr));
  if (r.error) return std::nullopt;
  std::optional<verify::Baselines> read = Impl::read(r, [](const json& a) -> std::optional<verify::Baselines> {
    if (a.at("baselines").is_null()) return std::nullopt;
    return baselines_from_json(a["baselines"]);
  });
  if (!read) return std::nullopt;
  verify::Baselines b = *read;
  b.gpu_uuid = impl_->workers.at(r.worker).device.uuid;
  return b;
}

json RemoteGpu::profile(const tasks::Task& task, const Checked& c) {
  JobResult r = impl_->call(impl_->job("profile", task, &c));
  if (r.error) return {{"error", *r.error}};
  json p = Impl::read(r, [](const json& a) { return a.at("profile"); });
  p["gpu_uuid"] = impl_->workers.at(r.worker).device.uuid;
  return p;
}

std::string RemoteGpu::profiler() const { return impl_->workers.begin()->second.profiler; }
verify::DeviceInfo RemoteGpu::device() const { return impl_->workers.begin()->second.device; }
std::string RemoteGpu::driver() const { return impl_->workers.begin()->second.driver; }
std::vector<verify::DeviceInfo> RemoteGpu::devices() const {
  std::vector<verify::DeviceInfo> out;
  for (const auto& [index, w] : impl_->workers) out.push_back(w.device);
  return out;
}
int RemoteGpu::parallel() const { return static_cast<int>(impl_->workers.size()); }
std::vector<WorkerState> RemoteGpu::workers() const { return impl_->pool.workers(); }

compile::DeviceFacts RemoteGpu::facts() const {
  const json& hello = impl_->workers.begin()->second.hello;
  try {
    return facts_from_json(hello.at("facts"));
  } catch (const std::exception& e) {
    throw Error(std::string("GPU worker's hello: its GPU's facts are missing or malformed: ") + e.what());
  }
}

std::optional<verify::MeasuredFacts> RemoteGpu::measured() const {
  const json& hello = impl_->workers.begin()->second.hello;
  if (!hello.contains("measured") || hello["measured"].is_null()) return std::nullopt;
  return verify::MeasuredFacts::from_json(hello["measured"]);
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
  if (int rc = ::getaddrinfo(address.substr(0, colon).c_str(), address.substr(colon + 1).c_str(), &hints, &found); rc != 0)
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
  if (!send_line(fd, line)) throw Error("the parent closed the connection");
}

class JobRunner {
 public:
  JobRunner(const GpuWorkerOptions& o, Gpu& gpu) : options_(o), gpu_(gpu), compiler_(o.compiler) {}

  json answer(const json& job) {
    std::string kind = job.at("kind").get<std::string>();
    std::shared_ptr<const tasks::Task> task = task_of(job.at("task"));
    if (kind == "baselines") {
      std::optional<verify::Baselines> b = gpu_.baselines(*task);
      return {{"baselines", b ? baselines_json(*b) : json(nullptr)}};
    }
    const json& cand = job.at("candidate");
    Checked c;
    c.proposal.task = task;
    c.proposal.source = cand.at("source").get<std::string>();
    c.proposal.plan = cand.at("plan").get<std::string>();
    c.proposal.tunables = cand.at("tunables").get<compile::Tunables>();
    c.report = compile::check_candidate(*task, tensors(*task), c.proposal.source, c.proposal.plan, c.proposal.tunables,
                                        options_.facts, compiler_);
    if (kind == "profile") return {{"profile", gpu_.profile(*task, c)}};
    verify::Verdict v;
    if (!c.report.ok()) v = verify::verdict_from_report(c.report);  // as the parent's checks would have said
    else if (kind == "verify") v = gpu_.verify(*task, c);
    else if (kind == "screen") v = gpu_.screen(*task, c);
    else if (kind == "admit") v = gpu_.admit(*task, c);
    else throw InputError("job", std::nullopt, "kind", "'" + kind + "' is not a GPU job");
    return {{"verdict", verify::to_json(v)}};
  }

 private:
  // The parent's task file, loaded as the parent loaded it, at the job's dims (admission's are
  // unseen ones).
  std::shared_ptr<const tasks::Task> task_of(const json& j) {
    std::string hash = j.at("content_hash").get<std::string>();
    auto it = tasks_.find(hash);
    if (it == tasks_.end()) {
      tasks::Task t = tasks::parse_task(j.at("file").get<std::string>(), j.at("text").get<std::string>());
      if (t.content_hash != hash) throw InputError(t.file.string(), std::nullopt, "", "its text does not have the content hash the parent sent");
      it = tasks_.emplace(hash, std::move(t)).first;
    }
    auto task = std::make_shared<tasks::Task>(it->second);
    task->dims = j.at("dims").get<tasks::Dims>();
    task->check_dims = j.at("check_dims").get<std::vector<tasks::Dims>>();
    return task;
  }

  const std::vector<compile::TensorInfo>& tensors(const tasks::Task& task) {
    auto it = tensors_.find(task.content_hash);
    if (it == tensors_.end())
      it = tensors_.emplace(task.content_hash, compile::task_tensors(task, tasks::Reference::compile(task))).first;
    return it->second;
  }

  const GpuWorkerOptions& options_;
  Gpu& gpu_;
  compile::Compiler compiler_;
  std::map<std::string, tasks::Task> tasks_;                             // by content hash
  std::map<std::string, std::vector<compile::TensorInfo>> tensors_;     // by content hash
};

}  // namespace

void serve_gpu_jobs(const GpuWorkerOptions& options, Gpu& gpu) {
  int fd = connect_to(options.address);
  say(fd, json{{"op", "hello"}, {"worker", options.worker}, {"token", options.token},
                     {"device", device_json(gpu.device())}, {"driver", gpu.driver()}, {"profiler", gpu.profiler()},
                     {"facts", facts_json(options.facts)},
                     {"measured", options.measured ? options.measured->to_json() : json(nullptr)},
                     {"harness_version", verify::kHarnessVersion}, {"pid", ::getpid()}}
                    .dump());
  JobRunner runner(options, gpu);
  std::string buffer;
  char chunk[65536];
  for (ssize_t n; (n = ::recv(fd, chunk, sizeof chunk, 0)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
      json msg = json::parse(buffer.substr(0, nl), nullptr, false);
      buffer.erase(0, nl + 1);
      if (!msg.is_object() || msg.value("op", "") != "job" || !msg.contains("job"))
        throw Error("the parent sent what the protocol does not allow");
      json answer;
      try {
        answer = runner.answer(msg["job"]);
      } catch (const InputError& e) {  // the job itself is wrong: the parent says so; the GPU is fine
        answer = {{"error", e.what()}};
      } catch (const json::exception& e) {
        answer = {{"error", std::string("a malformed job: ") + e.what()}};
      }
      say(fd, json{{"op", "result"}, {"id", msg["id"]}, {"answer", std::move(answer)}}.dump());
    }
  }
  ::close(fd);
}

}  // namespace kforge::evolve
