// Child processes, owned: descriptors that close themselves, a spawned process that is killed and
// reaped when its owner lets go, and waits with deadlines. The NVRTC workers, the GPU runners (and
// compute-sanitizer around them), the reference children and the KernelBench importer's Python all
// start through here.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kforge/common/sandbox.h"

namespace kforge {

// An owned file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// A pipe, close-on-exec at both ends (throws kforge::Error).
struct Pipe {
  UniqueFd read, write;
};
Pipe make_pipe();
// A pair of connected Unix stream sockets, close-on-exec at both ends (throws kforge::Error).
std::pair<UniqueFd, UniqueFd> socket_pair();

// How a child ended, in words: "exited with status N" / "killed by signal N (Segmentation fault)".
std::string describe_exit(int wait_status);

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the path
  std::vector<std::string> env;   // the whole environment, "NAME=value" (child_environment())
  // Descriptors of this process to appear in the child as the given numbers (the rest close on
  // exec, as kforge opens everything close-on-exec).
  std::vector<std::pair<int, int>> fds;
  bool own_process_group = false;  // kill() then reaches everything the child starts (a wrapper)
  // Set: the child is confined before its program starts (a fork and exec rather than
  // posix_spawn; sandbox.h). Its core dumps are off either way only when set.
  std::optional<ChildConfinement> confine;
};

// A child process. Destroying it, or kill(), sends SIGKILL (to its group when it has one) and
// reaps it; once it has ended (wait_exit() or kill() saw it), nothing more is sent, and both
// return how it ended.
class Process {
 public:
  Process() = default;
  // Throws kforge::Error naming argv[0] and the reason when it cannot be started.
  static Process spawn(const SpawnOptions& options);
  Process(Process&& o) noexcept;
  Process& operator=(Process&& o) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() { kill(); }

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !status_; }
  // The wait status once the child has ended within `timeout`, else nullopt (it still runs).
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  // SIGKILL (unless it has ended) and reap; returns the wait status (0 when there was no child).
  int kill();

 private:
  pid_t pid_ = -1;
  bool group_ = false;
  std::optional<int> status_;
};

}  // namespace kforge
