// Untrusted JSON (launch plans, LLM answers, archive lines) parsed with bounds. nlohmann's parser
// recurses once per level of nesting, so 100,000 nested '[' overflow the stack: the text's size
// and nesting depth are checked first, by a linear scan, and every parser exception (syntax, a
// number like 1e400 that overflows a double, bytes that are not UTF-8) becomes an InputError that
// names the input, with the offending bytes escaped.
//
//   nlohmann::json j = parse_json_bounded(text, "plan");   // throws InputError("plan", ...)
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kforge/common/error.h"
#include "kforge/common/strings.h"

namespace kforge {

inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxJsonBytes = size_t{1} << 20;

// The deepest nesting of '[' and '{' outside strings, counting no further than limit + 1.
inline int json_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// Throws InputError(what, std::nullopt, "", problem) for text over `max_bytes`, nested deeper than
// `max_depth`, or not valid JSON.
inline nlohmann::json parse_json_bounded(std::string_view text, const std::string& what,
                                         int max_depth = kMaxJsonDepth,
                                         size_t max_bytes = kMaxJsonBytes) {
  if (text.size() > max_bytes)
    throw InputError(
        what, std::nullopt, "",
        std::to_string(text.size()) + " bytes of JSON; the limit is " + std::to_string(max_bytes));
  if (json_depth(text, max_depth) > max_depth)
    throw InputError(what, std::nullopt, "",
                     "JSON nested more than " + std::to_string(max_depth) + " levels deep");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // its message gives the line and column
    throw InputError(what, std::nullopt, "", "not valid JSON: " + printable(e.what()));
  }
}

}  // namespace kforge
