#include "kforge/common/line_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "kforge/common/error.h"

namespace kforge {

std::optional<std::string> LineSplitter::next() {
  if (over_) return std::nullopt;
  size_t nl = buffer_.find('\n', scanned_);
  if (nl == std::string::npos) {
    scanned_ = buffer_.size();
    over_ = buffer_.size() - start_ > max_;
    compact();
    return std::nullopt;
  }
  if (nl - start_ > max_) {
    over_ = true;
    return std::nullopt;
  }
  std::string line = buffer_.substr(start_, nl - start_);
  start_ = scanned_ = nl + 1;
  compact();
  return line;
}

void LineSplitter::clear() {
  buffer_.clear();
  start_ = scanned_ = 0;
  over_ = false;
}

void LineSplitter::compact() {
  if (start_ > 0 && start_ >= buffer_.size() / 2) {
    buffer_.erase(0, start_);
    scanned_ -= start_;
    start_ = 0;
  }
}

bool write_all(int fd, std::string_view data) {
  bool socket = true;  // until send() says otherwise
  for (size_t done = 0; done < data.size();) {
    const char* at = data.data() + done;
    size_t left = data.size() - done;
    ssize_t n = socket ? ::send(fd, at, left, MSG_NOSIGNAL) : ::write(fd, at, left);
    if (n < 0 && socket && errno == ENOTSOCK) {
      socket = false;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool write_line(int fd, std::string_view line) {
  std::string data;
  data.reserve(line.size() + 1);
  data.append(line);
  data += '\n';
  return write_all(fd, data);
}

Wait wait_readable(int fd, std::optional<Deadline> deadline) {
  for (;;) {
    int ms = -1;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline -
                                                               std::chrono::steady_clock::now());
      if (left.count() <= 0) return Wait::Timeout;
      ms = static_cast<int>(std::min<int64_t>(left.count(), INT_MAX));
    }
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return Wait::Ready;
    if (rc == 0) continue;  // the deadline is checked above
    if (errno == EINTR) continue;
    return Wait::Failed;
  }
}

LineReader::Got LineReader::next(std::string& line, std::optional<Deadline> deadline) {
  char chunk[65536];
  for (;;) {
    if (std::optional<std::string> l = lines_.next()) {
      line = std::move(*l);
      return Got::Line;
    }
    if (lines_.over_limit()) return Got::TooLong;
    Wait w = wait_readable(fd_, deadline);
    if (w == Wait::Timeout) return Got::Timeout;
    if (w == Wait::Failed)
      throw Error(std::string("waiting for a line from another process failed: ") +
                  std::strerror(errno));
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return Got::Closed;
    lines_.append(chunk, static_cast<size_t>(n));
  }
}

void LineReader::reset(int fd) {
  fd_ = fd;
  lines_.clear();
}

}  // namespace kforge
