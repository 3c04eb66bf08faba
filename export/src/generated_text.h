// The one rule per language for text that reaches a generated file (docs/security.md, "Export:
// task and archive text in generated code"). Text from a task file or the archive (a summary, a
// suite's folder name, a kernel's name, a candidate's identity, a reference) is data, never code:
//
//   C++     inside a string literal or after `//`, written by cpp_text: printable ASCII other than
//           `"`, `\` and `?` as it is, every other byte as a three-digit octal escape (\012). No
//           line ends (so a comment cannot end early), no backslash before a line end (no line
//           splice), no `??` (no trigraph under -std=c++11 -trigraphs), no quote (a literal cannot
//           end early); an octal escape never takes in the character after it.
//   names   (C++ identifiers, the CMake package, the Python module) are checked, never escaped:
//           anything but [A-Za-z_][A-Za-z0-9_]* is refused with a kforge::Error naming the task and
//           the field.
//   CMake and Python files are fixed templates: the only text put in is the package's name, a
//           checked name; everything else they show comes from manifest.json, which is JSON data.
#pragma once

#include <string>
#include <string_view>

namespace kforge::exporter {

// `s` for the inside of a C++ string literal or a `//` comment (the rule above).
std::string cpp_text(std::string_view s);

// `s` as a C++ string literal: "..." around cpp_text(s).
inline std::string cpp_literal(std::string_view s) {
  return "\"" + cpp_text(s) + "\"";
}

// `name` when it is a C++ identifier; else throws kforge::Error "WHO: FIELD: 'NAME' is not ...".
const std::string& checked_name(const std::string& name, const std::string& who,
                                const std::string& field);

}  // namespace kforge::exporter
