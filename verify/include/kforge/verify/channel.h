// The judge-runner channel: one end of a Unix stream socket carrying JSON lines, with file
// descriptors (VMM shareable handles, memfds holding modules) passed beside them (SCM_RIGHTS).
// A message that carries descriptors says how many in its "fds" field; they arrive in order.
// Also the child process that holds the other end (spawn, watchdog kill, exit evidence).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/error.h"
#include "kforge/common/line_channel.h"
#include "kforge/common/process.h"

namespace kforge::verify {

class ChannelError : public Error {
 public:
  using Error::Error;
};

using kforge::UniqueFd;  // common/process.h

struct Message {
  nlohmann::json body;
  std::vector<UniqueFd> fds;
};

enum class Received { Message, Timeout, Closed };

// The longest message either side reads: more without a newline is a ChannelError.
inline constexpr size_t kMaxMessageBytes = size_t{64} << 20;

class Channel {
 public:
  explicit Channel(UniqueFd socket) : socket_(std::move(socket)) {}
  // Sends `body` as one line; `fds` (not taken) ride with its first byte and body["fds"] is set.
  void send(nlohmann::json body, const std::vector<int>& fds = {});
  // Waits up to `timeout` for the next message. A line that is not JSON or that announces more
  // descriptors than arrived is a ChannelError.
  Received receive(Message& out, std::chrono::milliseconds timeout);
  int fd() const { return socket_.get(); }

 private:
  bool take_line(Message& out);
  UniqueFd socket_;
  LineSplitter lines_{kMaxMessageBytes};
  std::deque<UniqueFd> fds_;
};

using kforge::socket_pair;  // common/process.h

// A memfd holding `bytes` (how compiled modules reach the runner).
UniqueFd memfd_with(const std::string& name, const std::string& bytes);
// Everything in a file descriptor (from offset 0).
std::string read_all(int fd);

// A child process holding the other end of a channel: its descriptor `channel_fd` in the child
// is the socket; its stderr goes to a temporary file kept for evidence.
class ChildProcess {
 public:
  // argv[0] is a path. Throws ChannelError when it cannot be started.
  ChildProcess(const std::vector<std::string>& argv, int channel_fd_in_child);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  Channel& channel() { return channel_; }
  pid_t pid() const { return process_.pid(); }
  // SIGKILL to its process group and reap. Returns how the child ended (as wait_exit words it).
  std::string kill_now();
  // Waits up to `timeout` for the child to exit; returns "exited with status N" / "killed by
  // signal N (Segmentation fault)", or nullopt while it still runs.
  std::optional<std::string> wait_exit(std::chrono::milliseconds timeout);
  // The last `max_bytes` of the child's stderr.
  std::string stderr_tail(size_t max_bytes = 4000) const;

 private:
  Channel channel_{UniqueFd()};
  Process process_;
  UniqueFd stderr_file_;
};

}  // namespace kforge::verify
