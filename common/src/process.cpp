#include "kforge/common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "kforge/common/error.h"
#include "kforge/common/sandbox.h"

namespace kforge {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(std::string("pipe failed: ") + std::strerror(errno));
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::pair<UniqueFd, UniqueFd> socket_pair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw Error(std::string("socketpair failed: ") + std::strerror(errno));
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "ended";
}

namespace {

// What a forked child reports when it cannot start its program: the step and its errno.
struct StartFailure {
  int step = 0;
  int err = 0;
};
constexpr const char* kSteps[] = {"",
                                  "setting its process group",
                                  "passing it a descriptor",
                                  "tying it to kforge",
                                  "limiting it",
                                  "entering its working folder",
                                  "confining it with Landlock",
                                  "running it"};

// The child between fork and exec: system calls only (no allocation, no locks), then exec.
[[noreturn]] void start_confined(const SpawnOptions& o, const std::vector<std::pair<int, int>>& fds,
                                 int report, pid_t parent, char* const* args, char* const* envp) {
  const ChildConfinement& c = *o.confine;
  auto fail = [report](int step) {
    StartFailure f{step, errno};
    ssize_t n = ::write(report, &f, sizeof f);
    (void)n;
    ::_exit(127);
  };
  if (o.own_process_group && ::setpgid(0, 0) != 0) fail(1);
  for (const auto& [from, to] : fds)
    if (::dup2(from, to) < 0) fail(2);
  if (c.die_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(3);
    if (::getppid() != parent) ::_exit(127);  // kforge ended already
  }
  rlimit no_core{0, 0};
  if (::setrlimit(RLIMIT_CORE, &no_core) != 0) fail(4);
  if (c.memory_bytes > 0) {
    rlimit data{static_cast<rlim_t>(c.memory_bytes), static_cast<rlim_t>(c.memory_bytes)};
    if (::setrlimit(RLIMIT_DATA, &data) != 0) fail(4);
  }
  if (c.cpu_seconds > 0) {
    rlimit cpu{static_cast<rlim_t>(c.cpu_seconds), static_cast<rlim_t>(c.cpu_seconds + 5)};
    if (::setrlimit(RLIMIT_CPU, &cpu) != 0) fail(4);
  }
  if (!c.workdir.empty() && ::chdir(c.workdir.c_str()) != 0) fail(5);
  if (c.files) {
    if (int err = c.files->apply()) {
      errno = err;
      fail(6);
    }
  }
  ::execve(args[0], args, envp);
  fail(7);
  ::_exit(127);
}

}  // namespace

Process Process::spawn(const SpawnOptions& o) {
  // A child's number may be one of the parent descriptors still to be mapped: move every source
  // above all targets first (close-on-exec copies), so no dup2 overwrites another's source.
  int highest = 2;
  for (const auto& [from, to] : o.fds) highest = std::max(highest, to);
  std::vector<UniqueFd> lifted;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (const auto& [from, to] : o.fds) {
    lifted.emplace_back(::fcntl(from, F_DUPFD_CLOEXEC, highest + 1));
    if (!lifted.back()) {
      posix_spawn_file_actions_destroy(&actions);
      throw Error("cannot start " + o.argv.at(0) +
                  ": duplicating a descriptor failed: " + std::strerror(errno));
    }
    posix_spawn_file_actions_adddup2(&actions, lifted.back().get(), to);
  }
  std::vector<char*> args = c_string_array(o.argv), envp = c_string_array(o.env);
  if (o.confine) {
    posix_spawn_file_actions_destroy(&actions);
    std::vector<std::pair<int, int>> fds;
    for (size_t i = 0; i < o.fds.size(); ++i) fds.emplace_back(lifted[i].get(), o.fds[i].second);
    Pipe report = make_pipe();  // closes on exec: nothing read means the program started
    UniqueFd report_write(::fcntl(report.write.get(), F_DUPFD_CLOEXEC, highest + 1));
    report.write.reset();
    if (!report_write) throw Error("cannot start " + o.argv.at(0) + ": " + std::strerror(errno));
    pid_t parent = ::getpid();
    Process p;
    p.pid_ = ::fork();
    if (p.pid_ < 0) {
      p.pid_ = -1;
      throw Error("cannot start " + o.argv.at(0) + ": fork failed: " + std::strerror(errno));
    }
    if (p.pid_ == 0) start_confined(o, fds, report_write.get(), parent, args.data(), envp.data());
    p.group_ = o.own_process_group;
    report_write.reset();
    StartFailure f;
    ssize_t n;
    do n = ::read(report.read.get(), &f, sizeof f);
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof f)) {
      p.wait_exit(std::chrono::milliseconds(5000));
      int step = f.step > 0 && f.step < 8 ? f.step : 7;
      throw Error("cannot start " + o.argv[0] + ": " + kSteps[step] +
                  " failed: " + std::strerror(f.err));
    }
    return p;
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (o.own_process_group) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  Process p;
  int rc = ::posix_spawn(&p.pid_, o.argv.at(0).c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    p.pid_ = -1;
    throw Error("cannot start " + o.argv[0] + ": " + std::strerror(rc));
  }
  p.group_ = o.own_process_group;
  return p;
}

Process::Process(Process&& o) noexcept : pid_(o.pid_), group_(o.group_), status_(o.status_) {
  o.pid_ = -1;
}

Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    kill();
    pid_ = o.pid_, group_ = o.group_, status_ = o.status_;
    o.pid_ = -1;
  }
  return *this;
}

std::optional<int> Process::wait_exit(std::chrono::milliseconds timeout) {
  if (status_ || pid_ <= 0) return status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) return status_ = status;
    if (r < 0 && errno != EINTR) return status_ = 0;  // not ours to reap any more
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int Process::kill() {
  if (pid_ <= 0) return 0;
  if (!status_) {
    if (group_) ::kill(-pid_, SIGKILL);  // a wrapper and what runs under it
    ::kill(pid_, SIGKILL);
    while (!wait_exit(std::chrono::milliseconds(1000))) {
    }
  }
  return *status_;
}

}  // namespace kforge
