// Bounds on the TOML text kforge hands to toml++ (task files, LLM configs, run configs). toml++
// recurses once per level of nesting and once per part of a dotted key, so `[[[[...` or
// `a.a.a....b = 1` a million levels deep overflowed the stack: the text is checked first by one
// linear scan, and only text within the limits reaches the parser.
//
//   if (auto p = toml_problem(text)) throw InputError(file, p->line, "", p->what);
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kforge {

inline constexpr int kMaxTomlDepth = 32;     // nested [ and { (a [[table]] header counts 2)
inline constexpr int kMaxTomlKeyParts = 32;  // a.b.c = 1, [a.b.c]: dotted parts of one key

struct TomlProblem {
  int line;          // 1-based
  std::string what;  // "nested more than 32 levels deep ([ and {)"
};

// The first reason toml++ must not see `text`: nesting or dotted keys past the limits. Strings
// and comments are skipped as TOML defines them; one pass, no recursion.
inline std::optional<TomlProblem> toml_problem(std::string_view text) {
  std::vector<char> open;  // the brackets open now; never longer than kMaxTomlDepth + 1
  int line = 1, parts = 0;
  bool key = true;  // reading a key (a line start outside brackets, a header, after { or ,)
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      if (open.empty()) key = true, parts = 0;
      continue;
    }
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      bool triple = text.compare(i, 3, std::string(3, c)) == 0;
      size_t end = i + (triple ? 3 : 1);
      bool escapes = c == '"';
      while (end < text.size()) {
        if (escapes && text[end] == '\\') {
          end += 2;
          continue;
        }
        if (!triple && text[end] == '\n') break;  // unterminated: toml++ reports it
        if (triple ? text.compare(end, 3, std::string(3, c)) == 0 : text[end] == c) break;
        ++end;
      }
      for (size_t k = i; k < end && k < text.size(); ++k) line += text[k] == '\n';
      if (!triple && end < text.size() && text[end] == '\n') end -= 1;  // the loop reads the '\n'
      i = std::min(end + (triple ? 2 : 0), text.size());
      continue;
    }
    if (c == '[' || c == '{') {
      open.push_back(c);
      if (static_cast<int>(open.size()) > kMaxTomlDepth)
        return TomlProblem{
            line, "nested more than " + std::to_string(kMaxTomlDepth) + " levels deep ([ and {)"};
      if (c == '{') key = true, parts = 0;
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (c == ',' && !open.empty() && open.back() == '{') {
      key = true, parts = 0;
    } else if (c == '=') {
      key = false;
    } else if (c == '.' && key && ++parts >= kMaxTomlKeyParts) {
      return TomlProblem{
          line, "a key of more than " + std::to_string(kMaxTomlKeyParts) + " dotted parts"};
    }
  }
  return std::nullopt;
}

}  // namespace kforge
