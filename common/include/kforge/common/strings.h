// Small text helpers shared by the stages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kforge {

// [A-Za-z_][A-Za-z0-9_]*
bool is_identifier(const std::string& s);
// "[4096, 8192]"
std::string format_shape(const std::vector<int64_t>& sizes);
// Without leading and trailing spaces, tabs and line breaks.
std::string trim(const std::string& s);
// "a:b::c" split at ':' -> {"a", "b", "", "c"}
std::vector<std::string> split(const std::string& s, char sep);
// {"a", "b"} joined with ", " -> "a, b"
std::string join(const std::vector<std::string>& parts, const std::string& sep);

}  // namespace kforge
