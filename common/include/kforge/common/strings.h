// Small text helpers shared by the stages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kforge {

// [A-Za-z_][A-Za-z0-9_]*
bool is_identifier(const std::string& s);
// "[4096, 8192]"
std::string format_shape(const std::vector<int64_t>& sizes);
// Without leading and trailing spaces, tabs and line breaks.
std::string trim(const std::string& s);
// `s` with ASCII letters in lower case (HTTP header names, finish reasons, content types).
std::string lower_ascii(std::string s);
// "a:b::c" split at ':' -> {"a", "b", "", "c"}
std::vector<std::string> split(const std::string& s, char sep);
// {"a", "b"} joined with ", " -> "a, b"
std::string join(const std::vector<std::string>& parts, const std::string& sep);

// Whether `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF); when
// not, `bad_offset` gets the offset of the first bad byte.
bool is_valid_utf8(std::string_view s, size_t* bad_offset = nullptr);
// 1-based line and column of a byte offset (for "line 3, column 7" messages).
std::pair<int, int> line_and_column(std::string_view s, size_t offset);
// Untrusted text (from a candidate, an LLM, an archive) made safe to print on a terminal and to
// put in JSON: control characters (ANSI escapes among them; line breaks and tabs stay), C1
// controls, bidirectional overrides and bytes that are not UTF-8 become visible \xNN / \u{NNNN}.
std::string printable(std::string_view s);

// A line diff of a against b (longest common subsequence; fine for kernels of a few hundred lines):
// each line prefixed "  " (both), "- " (a only) or "+ " (b only).
std::string diff_lines(const std::string& a, const std::string& b);

}  // namespace kforge
