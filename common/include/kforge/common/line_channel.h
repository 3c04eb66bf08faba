// The line channel every pair of kforge processes speaks over a pipe or a stream socket (the NVRTC
// workers, the judge and its runner, the reference child, the GPU workers, KernelBench's helper):
// a line is written whole, what arrives is split into lines under a cap (each byte scanned once),
// and the next line is awaited until a deadline. Each caller keeps its own bounds and words its
// own errors; this only moves the bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kforge {

using Deadline = std::chrono::steady_clock::time_point;

// A cap that is no cap: a peer of kforge's own whose lines are as long as they need to be.
inline constexpr size_t kNoLineCap = SIZE_MAX;

// Splits received bytes into lines of at most `max_bytes` (without the newline). Each byte is
// scanned for the newline once, however the line arrives.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_bytes = kNoLineCap) : max_(max_bytes) {}

  void append(const char* data, size_t n) { buffer_.append(data, n); }

  // The next whole line; nullopt when none is complete yet or the line under way is over the cap
  // (over_limit() says which).
  std::optional<std::string> next();

  // The peer sent a line longer than the cap: no line comes out any more.
  bool over_limit() const { return over_; }
  size_t max_bytes() const { return max_; }
  // What was received after the last whole line.
  std::string rest() const { return buffer_.substr(start_); }
  // Forgets everything received (a new peer on the same reader).
  void clear();

 private:
  void compact();  // drops what was read once it is most of the buffer
  size_t max_;
  std::string buffer_;
  size_t start_ = 0;    // where the next line begins
  size_t scanned_ = 0;  // no newline in [start_, scanned_)
  bool over_ = false;
};

// Writes all of `data` to `fd`: a stream socket (never raising SIGPIPE) or anything write() takes.
// False when the peer is gone or the write failed (errno says why).
bool write_all(int fd, std::string_view data);
// `line` and its newline, written whole (one JSON object per line: the caller's dump()).
bool write_line(int fd, std::string_view line);

enum class Wait { Ready, Timeout, Failed };

// Waits until `fd` has something to read (data, its end, an error) or `deadline` passes (none: as
// long as it takes); a deadline already past is Timeout without looking. Retries EINTR; Failed
// when poll() fails (errno says why).
Wait wait_readable(int fd, std::optional<Deadline> deadline);

// Lines read from `fd` (not owned: a pipe's read end or a stream socket), each at most
// `max_bytes`.
class LineReader {
 public:
  enum class Got { Line, Timeout, Closed, TooLong };

  explicit LineReader(int fd = -1, size_t max_bytes = kNoLineCap) : fd_(fd), lines_(max_bytes) {}

  // The next line, waiting until `deadline` (none: as long as it takes). A line already received
  // comes first, even past the deadline. Closed: the other end closed or a read failed; TooLong:
  // the line under way passed the cap (nothing more is read). Throws kforge::Error when poll()
  // fails (a harness fault, not the peer's).
  Got next(std::string& line, std::optional<Deadline> deadline = std::nullopt);

  // Reads from `fd` from now on, with nothing received yet.
  void reset(int fd);
  int fd() const { return fd_; }
  size_t max_bytes() const { return lines_.max_bytes(); }

 private:
  int fd_;
  LineSplitter lines_;
};

}  // namespace kforge
