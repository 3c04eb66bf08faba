// How kforge's TOML configs (the LLM config, the run config) are read: one way to read the file and
// one range check for every integer and number, made before a value is narrowed to its field's
// type (a 64-bit 4294967296 once became a concurrency of 0, 2147483648 a negative max_tokens) and
// refusing NaN and infinities (`nan <= 0` is false, so NaN passed every "must be positive").
#pragma once

#include <toml++/toml.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/error.h"
#include "kforge/common/input_file.h"
#include "kforge/common/toml_limits.h"

namespace kforge::evolve {

inline constexpr int64_t kMaxConfigBytes = int64_t{1} << 20;

// Where a value came from, for its error.
struct ConfigPlace {
  std::string file;
  std::optional<int> line;
  std::string field;
};

// The file's table. InputError naming the file (and line) when it is not a regular file of at most
// kMaxConfigBytes, nests or dots keys past toml_limits.h's bounds, or is not valid TOML.
inline toml::table parse_config_file(const std::string& path) {
  std::string text = read_input_file(path, kMaxConfigBytes);
  if (auto p = toml_problem(text)) throw InputError(path, p->line, "", p->what);
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw InputError(path, static_cast<int>(e.source().begin.line), "",
                     "not valid TOML: " + std::string(e.description()));
  }
}

// `value` (nullopt: not an integer, or past 64 bits) as an Int when it lies in [lo, hi];
// InputError "must be a whole number [of UNIT] from lo to hi" otherwise.
template <typename Int>
Int config_integer(std::optional<int64_t> value, Int lo, Int hi, const ConfigPlace& at,
                   const std::string& unit = "") {
  if (!value || *value < static_cast<int64_t>(lo) || *value > static_cast<int64_t>(hi))
    throw InputError(at.file, at.line, at.field,
                     "must be a whole number" + (unit.empty() ? "" : " of " + unit) + " from " +
                         std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<Int>(*value);
}

// `value` (nullopt: not a number) when it is finite and in [lo, hi] (above lo with above_lo);
// InputError otherwise, its problem "must be " + `what`.
inline double config_number(std::optional<double> value, double lo, double hi, bool above_lo,
                            const ConfigPlace& at, const std::string& what) {
  if (!value || !std::isfinite(*value) || *value < lo || (above_lo && *value == lo) || *value > hi)
    throw InputError(at.file, at.line, at.field, "must be " + what);
  return *value;
}

// The TOML node as a boolean; InputError "must be true or false" otherwise.
inline bool config_bool(const toml::node& n, const ConfigPlace& at) {
  if (!n.is_boolean()) throw InputError(at.file, at.line, at.field, "must be true or false");
  return **n.as_boolean();
}

// The TOML node as one of `choices`; InputError otherwise: 'must be "a" or "b"' for two choices,
// "must be one of a, b, c" for more.
inline std::string config_choice(const toml::node& n, const std::vector<std::string>& choices,
                                 const ConfigPlace& at) {
  if (n.is_string())
    for (const std::string& c : choices)
      if (**n.as_string() == c) return c;
  std::string said;
  if (choices.size() == 2) {
    said = "\"" + choices[0] + "\" or \"" + choices[1] + "\"";
  } else {
    said = "one of ";
    for (size_t i = 0; i < choices.size(); ++i) said += (i ? ", " : "") + choices[i];
  }
  throw InputError(at.file, at.line, at.field, "must be " + said);
}

// A TOML node's line, when it has one.
inline std::optional<int> toml_line(const toml::node* n) {
  if (!n || n->source().begin.line == 0) return std::nullopt;
  return static_cast<int>(n->source().begin.line);
}

// The TOML node as config_integer's and config_number's input.
inline std::optional<int64_t> toml_int(const toml::node& n) {
  return n.is_integer() ? std::optional<int64_t>(**n.as_integer()) : std::nullopt;
}
inline std::optional<double> toml_number(const toml::node& n) {
  return n.is_number() ? n.value<double>() : std::nullopt;
}

}  // namespace kforge::evolve
