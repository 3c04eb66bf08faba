// The GPU workers' wire (worker_pool.h): one JSON object per line over a stream socket. Shared by
// the pool (the parent's side) and serve_gpu_jobs (the worker's side): lines are written whole and
// read with a cap on their length, each byte scanned once.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kforge/common/error.h"

namespace kforge::evolve {

// The longest line either side reads (a job carries a task file and a candidate's code; an answer a
// verdict or a profile): a peer sending more without a newline is breaking the protocol.
inline constexpr size_t kMaxLineBytes = size_t{16} << 20;
// The longest hello (a worker's description of its GPU).
inline constexpr size_t kMaxHelloBytes = size_t{64} << 10;

// Writes the whole line and its newline, or returns false (the peer is gone).
inline bool send_line(int fd, const std::string& line) {
  std::string data = line + "\n";
  for (size_t done = 0; done < data.size();) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Splits received bytes into lines of at most `max_bytes` (without the newline). Each byte is
// scanned for the newline once, however the line arrives.
class LineReader {
 public:
  explicit LineReader(size_t max_bytes) : max_(max_bytes) {}

  void append(const char* data, size_t n) { buffer_.append(data, n); }

  // The next whole line; nullopt when none is complete yet or the line under way is over the cap
  // (over_limit() says which).
  std::optional<std::string> next() {
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

  // The peer sent a line longer than the cap: nothing more is read from it.
  bool over_limit() const { return over_; }
  size_t max_bytes() const { return max_; }
  // What was received after the last whole line.
  std::string rest() const { return buffer_.substr(start_); }

 private:
  void compact() {  // drops what was read once it is most of the buffer
    if (start_ > 0 && start_ >= buffer_.size() / 2) {
      buffer_.erase(0, start_);
      scanned_ -= start_;
      start_ = 0;
    }
  }
  size_t max_;
  std::string buffer_;
  size_t start_ = 0;    // where the next line begins
  size_t scanned_ = 0;  // no newline in [start_, scanned_)
  bool over_ = false;
};

// Typed reads of what a peer sent: each returns the value or throws kforge::Error naming the field
// ("device.cc_major: \"nine\" is not an integer from 0 to 1000", "facts: missing").
namespace wire {

// A value as a problem quotes it: its JSON, cut at 80 bytes.
inline std::string quoted(const nlohmann::json& v) {
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 80 ? text.substr(0, 80) + "..." : text;
}

inline std::string path(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

// j[key] (j must be an object), `where` naming j.
inline const nlohmann::json& at(const nlohmann::json& j, const std::string& where,
                                const std::string& key) {
  if (!j.is_object())
    throw Error((where.empty() ? "the message" : where) + ": " + quoted(j) + " is not an object");
  auto it = j.find(key);
  if (it == j.end()) throw Error(path(where, key) + ": missing");
  return *it;
}

// v, which `name` names, as an integer from lo to hi.
inline int64_t integer_value(const nlohmann::json& v, const std::string& name, int64_t lo,
                             int64_t hi) {
  bool fits = v.is_number_integer() &&
              !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) &&
              v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!fits)
    throw Error(name + ": " + quoted(v) + " is not an integer from " + std::to_string(lo) + " to " +
                std::to_string(hi));
  return v.get<int64_t>();
}
inline int64_t integer(const nlohmann::json& j, const std::string& where, const std::string& key,
                       int64_t lo = 0, int64_t hi = std::numeric_limits<int32_t>::max()) {
  return integer_value(at(j, where, key), path(where, key), lo, hi);
}

inline double number(const nlohmann::json& j, const std::string& where, const std::string& key) {
  const nlohmann::json& v = at(j, where, key);
  if (!v.is_number()) throw Error(path(where, key) + ": " + quoted(v) + " is not a number");
  return v.get<double>();
}

inline std::string text(const nlohmann::json& j, const std::string& where, const std::string& key,
                        size_t max_bytes = 4096) {
  const nlohmann::json& v = at(j, where, key);
  if (!v.is_string()) throw Error(path(where, key) + ": " + quoted(v) + " is not a string");
  if (v.get_ref<const std::string&>().size() > max_bytes)
    throw Error(path(where, key) + ": a string of more than " + std::to_string(max_bytes) +
                " bytes");
  return v.get<std::string>();
}

inline bool boolean(const nlohmann::json& j, const std::string& where, const std::string& key) {
  const nlohmann::json& v = at(j, where, key);
  if (!v.is_boolean()) throw Error(path(where, key) + ": " + quoted(v) + " is not true or false");
  return v.get<bool>();
}

inline const nlohmann::json& object(const nlohmann::json& j, const std::string& where,
                                    const std::string& key) {
  const nlohmann::json& v = at(j, where, key);
  if (!v.is_object()) throw Error(path(where, key) + ": " + quoted(v) + " is not an object");
  return v;
}

}  // namespace wire
}  // namespace kforge::evolve
