#include "kforge/compile/source_check.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>

#include "kforge/common/files.h"
#include "kforge/compile/module.h"

namespace kforge::compile {
namespace {

constexpr size_t kMaxHeaderName = 256;

// One logical source line: physical lines spliced by backslash-newline, comments replaced by a
// space (a block comment spanning lines does not end a directive), as the preprocessor sees it.
struct LogicalLine {
  int number = 1;  // the first physical line
  std::string text;
};

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Whether a raw string literal starts at `i` (R" after a prefix or a non-identifier character).
bool raw_string_at(const std::string& s, size_t i) {
  if (s.compare(i, 2, "R\"") != 0) return false;
  size_t start = i;
  while (start > 0 && identifier_char(s[start - 1])) --start;
  std::string prefix = s.substr(start, i - start);
  return prefix.empty() || prefix == "u8" || prefix == "u" || prefix == "U" || prefix == "L";
}

std::vector<LogicalLine> logical_lines(const std::string& s) {
  enum class State { Code, LineComment, BlockComment, Quoted, Raw } state = State::Code;
  std::vector<LogicalLine> out;
  LogicalLine line;
  int physical = 1;
  char quote = 0;
  std::string raw_end;  // )delim"
  auto end_line = [&] {
    out.push_back(std::move(line));
    line = LogicalLine{physical + 1, ""};
  };
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\' && state != State::Raw) {  // a splice: backslash, spaces, newline
      size_t j = i + 1;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r')) ++j;
      if (j < s.size() && s[j] == '\n') {
        ++physical;
        i = j;
        continue;
      }
    }
    if (c == '\n') {
      if (state == State::LineComment || state == State::Quoted) state = State::Code;
      if (state == State::Code) {
        end_line();
      } else {
        line.text += ' ';  // inside a block comment or raw string the directive goes on
      }
      ++physical;
      continue;
    }
    switch (state) {
      case State::Code:
        if (s.compare(i, 2, "//") == 0) {
          state = State::LineComment;
          line.text += ' ';
          ++i;
        } else if (s.compare(i, 2, "/*") == 0) {
          state = State::BlockComment;
          line.text += ' ';
          ++i;
        } else if (raw_string_at(s, i)) {
          size_t open = s.find('(', i + 2);
          if (open == std::string::npos || open - i - 2 > 16) {  // not a raw string after all
            line.text += c;
            break;
          }
          raw_end = ")" + s.substr(i + 2, open - i - 2) + "\"";
          line.text += "R\"\"";
          state = State::Raw;
          i = open;
        } else if (c == '"' || c == '\'') {
          state = State::Quoted;
          quote = c;
          line.text += c;
        } else {
          line.text += c;
        }
        break;
      case State::LineComment:
        break;
      case State::BlockComment:
        if (s.compare(i, 2, "*/") == 0) {
          state = State::Code;
          ++i;
        }
        break;
      case State::Quoted:
        line.text += c;
        if (c == '\\' && i + 1 < s.size() && s[i + 1] != '\n') {
          line.text += s[++i];
        } else if (c == quote) {
          state = State::Code;
        }
        break;
      case State::Raw:
        if (s.compare(i, raw_end.size(), raw_end) == 0) {
          state = State::Code;
          i += raw_end.size() - 1;
        }
        break;
    }
  }
  out.push_back(std::move(line));
  return out;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\f\v");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r\f\v");
  return s.substr(a, b - a + 1);
}

// Whether `file` is a regular file beneath `dir` once symbolic links are resolved.
bool under(const std::string& file, const std::string& dir) {
  std::string f = real_path(file), d = real_path(dir);
  struct stat st {};
  if (f.empty() || d.empty() || ::stat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return f.compare(0, d.size() + 1, d + "/") == 0;
}

// Why a header name may not be included, or "" if it may.
std::string header_problem(const std::string& name, const std::vector<std::string>& include_dirs,
                           bool must_exist) {
  if (name.empty()) return "an empty header name";
  if (name.size() > kMaxHeaderName)
    return "a header name longer than " + std::to_string(kMaxHeaderName) + " characters";
  for (char c : name)
    if (!identifier_char(c) && c != '.' && c != '/' && c != '-' && c != '+')
      return "a header name may hold letters, digits and _ . / - + only";
  if (name.front() == '/')
    return "an absolute path; only the CUDA headers, CCCL and kforge's shims can be included";
  for (size_t at = 0; at <= name.size();) {
    size_t slash = name.find('/', at);
    if (slash == std::string::npos) slash = name.size();
    if (name.compare(at, slash - at, "..") == 0 && slash - at == 2)
      return "a path that climbs with '..'; only the CUDA headers, CCCL and kforge's shims can be "
             "included";
    at = slash + 1;
  }
  if (!must_exist) return "";
  for (const std::string& shim : shim_header_names())
    if (name == shim) return "";
  for (const std::string& dir : include_dirs)
    if (under(dir + "/" + name, dir)) return "";
  return "no such header among the CUDA headers, CCCL and kforge's shims";
}

// The "..." or <...> operand at the start of `rest`, or nullopt when the operand is computed.
std::optional<std::string> header_operand(const std::string& rest, std::string* after = nullptr) {
  if (rest.empty() || (rest[0] != '"' && rest[0] != '<')) return std::nullopt;
  size_t close = rest.find(rest[0] == '"' ? '"' : '>', 1);
  if (close == std::string::npos) return std::nullopt;
  if (after) *after = trim(rest.substr(close + 1));
  return rest.substr(1, close - 1);
}

void check_directive(const LogicalLine& line, const std::string& directive, const std::string& rest,
                     const std::vector<std::string>& include_dirs,
                     std::vector<std::string>& problems) {
  std::string where = "line " + std::to_string(line.number) + ": ";
  if (directive == "embed") {
    problems.push_back(where + "#embed is not allowed: a candidate reads no files");
    return;
  }
  if (directive == "include" || directive == "include_next" || directive == "import") {
    std::string after;
    auto name = header_operand(rest, &after);
    if (!name) {
      problems.push_back(
          where + "#" + directive +
          " must name a header as <name> or \"name\" (computed includes are not allowed)");
      return;
    }
    if (!after.empty()) {
      problems.push_back(where + "#" + directive + " <" + *name +
                         ">: nothing may follow the header name");
      return;
    }
    if (std::string why = header_problem(*name, include_dirs, true); !why.empty())
      problems.push_back(where + "#" + directive + " \"" + *name + "\": " + why);
    return;
  }
  if (directive == "define") {
    for (std::string_view path_start : {"\"/", "</", "../", "/.."})
      if (rest.find(path_start) != std::string::npos) {
        problems.push_back(
            where + "#define holds a file path ('" + std::string(path_start) +
            "'): macros may not name files (a header's computed #include could use it)");
        return;
      }
  }
}

// __has_include / __has_include_next / __has_embed operands anywhere on a line.
void check_probes(const LogicalLine& line, const std::vector<std::string>& include_dirs,
                  std::vector<std::string>& problems) {
  std::string where = "line " + std::to_string(line.number) + ": ";
  for (std::string_view probe : {"__has_embed", "__has_include"}) {
    for (size_t at = line.text.find(probe); at != std::string::npos;
         at = line.text.find(probe, at + 1)) {
      if (probe == "__has_embed") {
        problems.push_back(where + "__has_embed is not allowed");
        continue;
      }
      size_t p = at + probe.size();
      if (line.text.compare(p, 5, "_next") == 0) p += 5;
      std::string rest = trim(line.text.substr(p));
      auto name =
          rest.empty() || rest[0] != '(' ? std::nullopt : header_operand(trim(rest.substr(1)));
      if (!name) {
        problems.push_back(where + "__has_include must name a header as <name> or \"name\"");
        continue;
      }
      if (std::string why = header_problem(*name, include_dirs, false); !why.empty())
        problems.push_back(where + "__has_include(\"" + *name + "\"): " + why);
    }
  }
}

}  // namespace

const std::vector<std::string>& shim_header_names() {
  static const std::vector<std::string> names = {
      "kforge_shims.h", "cmath",  "math.h",  "algorithm", "cstdint",  "stdint.h", "cstddef",
      "stddef.h",       "cfloat", "float.h", "climits",   "limits.h", "cuda.h"};
  return names;
}

std::vector<std::string> candidate_include_dirs() {
  std::string inc = cuda_include_dir();
  return {inc, inc + "/cccl"};
}

std::vector<std::string> preprocessing_problems(const std::string& source,
                                                const std::vector<std::string>& include_dirs) {
  std::vector<std::string> problems;
  if (source.find('\0') != std::string::npos) {
    problems.push_back("the source holds a NUL byte");
    return problems;
  }
  for (std::string_view tri : {"?\?=", "?\?/"})  // escaped: no trigraph here
    if (source.find(tri) != std::string::npos)
      problems.push_back("trigraphs ('" + std::string(tri) + "') are not allowed");
  for (const LogicalLine& line : logical_lines(source)) {
    std::string t = trim(line.text);
    size_t hash = t.rfind('#', 0) == 0 ? 1 : t.rfind("%:", 0) == 0 ? 2 : 0;
    if (hash) {
      std::string rest = trim(t.substr(hash));
      size_t n = 0;
      while (n < rest.size() && identifier_char(rest[n])) ++n;
      check_directive(line, rest.substr(0, n), trim(rest.substr(n)), include_dirs, problems);
    }
    check_probes(line, include_dirs, problems);
  }
  return problems;
}

std::optional<std::string> name_expression_problem(const std::string& e) {
  constexpr size_t kMaxName = 256;
  if (e.empty()) return "an empty kernel name";
  if (e.size() > kMaxName)
    return "a kernel name expression longer than " + std::to_string(kMaxName) + " characters";
  size_t i = 0;
  auto identifier = [&] {
    size_t start = i;
    if (i < e.size() && (std::isalpha(static_cast<unsigned char>(e[i])) || e[i] == '_'))
      while (i < e.size() && identifier_char(e[i])) ++i;
    return i > start;
  };
  if (!identifier()) return "must start with the kernel's name";
  while (e.compare(i, 2, "::") == 0) {
    i += 2;
    if (!identifier()) return "'::' must be followed by a name";
  }
  if (i == e.size()) return std::nullopt;
  if (e[i] != '<' || e.back() != '>')
    return "only a name, or a name with template arguments <...>, is allowed";
  for (size_t k = i + 1; k + 1 < e.size(); ++k) {
    char c = e[k];
    if (!identifier_char(c) && std::string_view(" ,+-*/%():").find(c) == std::string_view::npos) {
      char shown[8];
      std::snprintf(shown, sizeof shown,
                    std::isprint(static_cast<unsigned char>(c)) ? "%c" : "\\x%02x",
                    static_cast<unsigned char>(c));
      return std::string(
                 "template arguments may hold names, integers, spaces and , + - * / % ( ) :: only, "
                 "not '") +
             shown + "'";
    }
  }
  return std::nullopt;
}

}  // namespace kforge::compile
