#include "kforge/verify/runner_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace kforge::verify {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kChannelFdInChild = 3;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string millis(std::chrono::milliseconds m) {
  return std::to_string(m.count()) + " ms";
}

}  // namespace

std::string_view to_string(RunStatus s) {
  switch (s) {
    case RunStatus::Ok:
      return "ok";
    case RunStatus::LaunchError:
      return "launch_error";
    case RunStatus::Fault:
      return "fault";
    case RunStatus::Timeout:
      return "timeout";
    case RunStatus::Died:
      return "died";
  }
  return "?";
}

std::string default_runner_path() {
  if (const char* env = std::getenv("KFORGE_RUNNER"); env && *env) return env;
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string self = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  std::string dir = self.substr(0, self.rfind('/'));
  // The CLI and the runner share a folder; test binaries live one folder down.
  for (const std::string& candidate : {dir + "/kforge-runner", dir + "/../kforge-runner"})
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  return dir + "/kforge-runner";
}

RunnerClient::RunnerClient(RunnerOptions options) : options_(std::move(options)) {
  if (options_.command.empty())
    options_.command = {default_runner_path(), "--device", std::to_string(options_.device)};
}

RunnerClient::~RunnerClient() {
  stop();
}

void RunnerClient::stop(std::chrono::milliseconds grace) {
  if (!child_) return;
  try {
    child_->channel().send({{"op", "exit"}});
  } catch (const std::exception&) {
  }
  if (!child_->wait_exit(grace)) child_->kill_now();
  child_.reset();
}

pid_t RunnerClient::pid() const {
  return child_ ? child_->pid() : -1;
}

void RunnerClient::restart() {
  if (!child_) return;
  child_->kill_now();
  child_.reset();
}

RunResult RunnerClient::set_buffers(std::vector<BufferSpec> specs, const std::vector<int>& fds) {
  buffers_ = std::move(specs);
  fds_.clear();
  for (int fd : fds) {
    UniqueFd dup(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (!dup) throw ChannelError("cannot duplicate a buffer handle");
    fds_.push_back(std::move(dup));
  }
  return child_ ? send_buffers() : RunResult{};
}

void RunnerClient::drop_buffers() {
  if (buffers_.empty() && fds_.empty()) return;
  buffers_.clear();
  fds_.clear();
  if (child_ && !send_buffers().ok()) restart();
}

RunResult RunnerClient::send_buffers() {
  json specs = json::array();
  std::vector<int> fds;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    specs.push_back(to_json(buffers_[i]));
    fds.push_back(fds_[i].get());
  }
  return exchange(json{{"op", "buffers"}, {"buffers", specs}}, fds, options_.start_timeout,
                  "buffers");
}

RunResult RunnerClient::ended(RunStatus status, const std::string& what, double wall_ms) {
  RunResult r;
  r.status = status;
  r.wall_ms = wall_ms;
  std::optional<std::string> exited;
  if (status != RunStatus::Timeout) exited = child_->wait_exit(std::chrono::milliseconds(3000));
  std::string how = exited ? *exited : child_->kill_now();
  r.evidence = what + "; the runner " + how;
  std::string err = child_->stderr_tail(1500);
  if (!err.empty()) r.evidence += "; its stderr: " + err;
  child_.reset();
  return r;
}

RunResult RunnerClient::exchange(const json& request, const std::vector<int>& fds,
                                 std::chrono::milliseconds limit, const std::string& what) {
  auto t0 = Clock::now();
  try {
    child_->channel().send(request, fds);
  } catch (const ChannelError& e) {
    return ended(RunStatus::Died, std::string("sending ") + what + " failed (" + e.what() + ")",
                 ms_since(t0));
  }
  Message m;
  Received got = child_->channel().receive(m, limit);
  if (got == Received::Timeout)
    return ended(RunStatus::Timeout, "no answer to " + what + " within " + millis(limit),
                 ms_since(t0));
  if (got == Received::Closed)
    return ended(RunStatus::Died, "the runner closed the channel during " + what, ms_since(t0));
  if (m.body.value("op", "") == "error")
    throw Error("kforge-runner refused " + what + ": " + m.body.value("message", "?") +
                " (a kforge bug)");
  RunResult r;
  r.wall_ms = ms_since(t0);
  r.evidence = m.body.dump();
  if (what == "run") {
    r.reply = run_reply_from_json(m.body);
    if (!r.reply.ok) {
      r.evidence =
          r.reply.error + " (" + r.reply.message + ")" +
          (r.reply.launch >= 0 ? " at launch[" + std::to_string(r.reply.launch) + "]" : "");
      if (r.reply.stage == "sync") {
        RunResult f = ended(RunStatus::Fault, r.evidence, r.wall_ms);
        f.reply = r.reply;
        return f;
      }
      r.status = RunStatus::LaunchError;
    }
  } else if (!m.body.value("ok", false)) {
    r.status = RunStatus::LaunchError;
    r.reply.ok = false;
    r.reply.error = m.body.value("error", "");
    r.reply.message = m.body.value("message", "");
    r.evidence =
        "the runner refused the " + what + ": " + r.reply.error + " (" + r.reply.message + ")";
  }
  return r;
}

RunResult RunnerClient::ensure_started() {
  if (child_) return RunResult{};
  std::vector<std::string> argv = options_.wrapper;
  argv.insert(argv.end(), options_.command.begin(), options_.command.end());
  argv.push_back("--channel-fd");
  argv.push_back(std::to_string(kChannelFdInChild));
  child_ = std::make_unique<ChildProcess>(argv, kChannelFdInChild);
  ++started_;
  Message m;
  Received got = child_->channel().receive(m, options_.start_timeout);
  if (got != Received::Message || m.body.value("op", "") != "ready") {
    std::string why = got == Received::Timeout
                          ? "no ready message within " + millis(options_.start_timeout)
                          : "it ended before it was ready";
    std::string how = child_->kill_now();
    std::string err = child_->stderr_tail(1500);
    child_.reset();
    throw Error("kforge-runner (" + argv.front() + ") did not start: " + why + "; it " + how +
                (err.empty() ? "" : "; stderr: " + err));
  }
  if (m.body.value("protocol", 0) != kProtocolVersion)
    throw Error("kforge-runner speaks protocol " + std::to_string(m.body.value("protocol", 0)) +
                ", the judge " + std::to_string(kProtocolVersion) + ": rebuild kforge");
  if (!buffers_.empty()) {
    RunResult r = send_buffers();
    if (!r.ok()) return r;
  }
  if (module_) {
    UniqueFd image = memfd_with("kforge-module", module_->cubin);
    return exchange(
        json{{"op", "module"}, {"kernels", module_->kernels}, {"globals", module_->globals}},
        {image.get()}, options_.start_timeout, "module");
  }
  return RunResult{};
}

RunResult RunnerClient::set_module(ModuleImage image) {
  module_ = std::move(image);
  if (child_) {
    UniqueFd fd = memfd_with("kforge-module", module_->cubin);
    return exchange(
        json{{"op", "module"}, {"kernels", module_->kernels}, {"globals", module_->globals}},
        {fd.get()}, options_.start_timeout, "module");
  }
  return ensure_started();
}

RunResult RunnerClient::run(const RunRequest& request, std::chrono::milliseconds watchdog) {
  RunResult start = ensure_started();
  if (!start.ok()) return start;
  return exchange(to_json(request), {}, watchdog, "run");
}

}  // namespace kforge::verify
