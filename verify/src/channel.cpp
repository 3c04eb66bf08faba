#include "kforge/verify/channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kforge/common/line_channel.h"
#include "kforge/common/sandbox.h"

namespace kforge::verify {
namespace {

constexpr size_t kMaxFdsPerRead = 64;

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

void Channel::send(nlohmann::json body, const std::vector<int>& fds) {
  if (!fds.empty()) body["fds"] = fds.size();
  std::string line = body.dump() + "\n";
  size_t sent = 0;
  if (!fds.empty()) {  // the descriptors ride with the first byte; the rest goes as any line's
    msghdr msg{};
    iovec iov{line.data(), line.size()};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()), 0);
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    ssize_t n = ::sendmsg(socket_.get(), &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR) n = ::sendmsg(socket_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0) throw ChannelError("sending to the other process failed: " + errno_text());
    sent = static_cast<size_t>(n);
  }
  if (!write_all(socket_.get(), std::string_view(line).substr(sent)))
    throw ChannelError("sending to the other process failed: " + errno_text());
}

bool Channel::take_line(Message& out) {
  std::optional<std::string> next = lines_.next();
  if (!next) {
    if (lines_.over_limit()) throw ChannelError("a message longer than 64 MiB");
    return false;
  }
  const std::string& line = *next;
  try {
    out.body = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw ChannelError("a message that is not JSON: " + std::string(e.what()) + ": " +
                       line.substr(0, 200));
  }
  out.fds.clear();
  if (out.body.is_object() && out.body.contains("fds")) {
    size_t want = out.body["fds"].get<size_t>();
    if (want > fds_.size())
      throw ChannelError("a message announces " + std::to_string(want) + " descriptors but " +
                         std::to_string(fds_.size()) + " arrived");
    for (size_t i = 0; i < want; ++i) {
      out.fds.push_back(std::move(fds_.front()));
      fds_.pop_front();
    }
  }
  return true;
}

Received Channel::receive(Message& out, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (take_line(out)) return Received::Message;
    Wait w = wait_readable(socket_.get(), deadline);
    if (w == Wait::Failed)
      throw ChannelError("waiting for the other process failed: " + errno_text());
    if (w == Wait::Timeout) return Received::Timeout;
    char data[65536];
    std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFdsPerRead));
    msghdr msg{};
    iovec iov{data, sizeof data};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    ssize_t n = ::recvmsg(socket_.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ECONNRESET) return Received::Closed;
      throw ChannelError("reading from the other process failed: " + errno_text());
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds_.emplace_back(fd);
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) throw ChannelError("too many descriptors in one message");
    if (n == 0) return Received::Closed;
    lines_.append(data, static_cast<size_t>(n));
  }
}

UniqueFd memfd_with(const std::string& name, const std::string& bytes) {
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC));
  if (!fd) throw ChannelError("memfd_create failed: " + errno_text());
  if (!write_all(fd.get(), bytes)) throw ChannelError("writing a memfd failed: " + errno_text());
  return fd;
}

std::string read_all(int fd) {
  std::string out;
  char buf[65536];
  off_t offset = 0;
  while (true) {
    ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw ChannelError("reading a descriptor failed: " + errno_text());
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    offset += n;
  }
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, int channel_fd_in_child) {
  auto [mine, theirs] = socket_pair();
  char path[] = "/tmp/kforge-child-stderr-XXXXXX";
  stderr_file_.reset(::mkstemp(path));
  if (!stderr_file_)
    throw ChannelError("cannot create a file for a child's stderr: " + errno_text());
  ::unlink(path);
  SpawnOptions o;
  o.argv = argv;
  o.env = child_environment();  // no API keys or anything else a runner does not need
  o.fds = {{theirs.get(), channel_fd_in_child}, {stderr_file_.get(), 2}};
  o.own_process_group =
      true;  // so a kill reaches a runner started under a wrapper (compute-sanitizer)
  try {
    process_ = Process::spawn(o);
  } catch (const Error& e) {
    throw ChannelError(e.what());
  }
  channel_ = Channel(std::move(mine));
}

ChildProcess::~ChildProcess() = default;  // the Process kills and reaps

std::string ChildProcess::kill_now() {
  return describe_exit(process_.kill());
}

std::optional<std::string> ChildProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (std::optional<int> status = process_.wait_exit(timeout)) return describe_exit(*status);
  return std::nullopt;
}

std::string ChildProcess::stderr_tail(size_t max_bytes) const {
  std::string all = read_all(stderr_file_.get());
  return all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all;
}

}  // namespace kforge::verify
