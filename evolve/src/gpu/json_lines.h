// The GPU workers' wire (worker_pool.h): one JSON object per line over a stream socket, on the
// line channel of common/line_channel.h. Shared by the pool (the parent's side) and serve_gpu_jobs
// (the worker's side): the caps on a line's length, and typed reads of what a peer sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kforge/common/error.h"
#include "kforge/common/line_channel.h"

namespace kforge::evolve {

// The longest line either side reads (a job carries a task file and a candidate's code; an answer a
// verdict or a profile): a peer sending more without a newline is breaking the protocol.
inline constexpr size_t kMaxLineBytes = size_t{16} << 20;
// The longest hello (a worker's description of its GPU).
inline constexpr size_t kMaxHelloBytes = size_t{64} << 10;

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
