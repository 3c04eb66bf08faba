#include "kernelbench/cuda_source.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

#include "kforge/compile/source_check.h"

namespace kforge::compile::kb {
namespace {

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Longest first: `<<<` before `<<` before `<`. No `>>` (see tokenize).
const char* const kPuncts[] = {"<<<", ">>>", "...", "<<=", "::", "->", "++", "--",
                               "<<",  "<=",  ">=",  "==",  "!=", "&&", "||", "+=",
                               "-=",  "*=",  "/=",  "%=",  "&=", "|=", "^=", "##"};

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    bool line_start = true;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '\n') {
        ++line_, ++i_, line_start = true;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++i_;
      } else if (s_.compare(i_, 2, "//") == 0) {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (s_.compare(i_, 2, "/*") == 0) {
        block_comment();
      } else if (c == '#' && line_start) {
        out.push_back(directive());
      } else {
        out.push_back(token());
        line_start = false;
      }
    }
    return out;
  }

 private:
  void block_comment() {
    size_t end = s_.find("*/", i_ + 2);
    end = end == std::string::npos ? s_.size() : end + 2;
    line_ += static_cast<int>(std::count(s_.begin() + i_, s_.begin() + end, '\n'));
    i_ = end;
  }

  // To the end of the logical line (backslash-newline continues it; a comment ends nothing).
  Token directive() {
    Token t{Tok::Directive, "", line_, i_, i_};
    while (i_ < s_.size() && s_[i_] != '\n') {
      if (s_[i_] == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
        i_ += 2, ++line_;
      } else if (s_.compare(i_, 2, "/*") == 0) {
        block_comment();
      } else if (s_.compare(i_, 2, "//") == 0) {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        ++i_;
      }
    }
    t.end = i_;
    t.text = s_.substr(t.begin, t.end - t.begin);
    return t;
  }

  Token token() {
    Token t{Tok::Punct, "", line_, i_, i_};
    char c = s_[i_];
    if (ident_start(c)) {
      while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
      std::string word = s_.substr(t.begin, i_ - t.begin);
      static const std::set<std::string> prefixes = {"u8",  "u",  "U",  "L", "R",
                                                     "u8R", "uR", "UR", "LR"};
      if (i_ < s_.size() && (s_[i_] == '"' || s_[i_] == '\'') && prefixes.count(word)) {
        if (word.back() == 'R' && s_[i_] == '"')
          raw_string();
        else
          quoted(s_[i_]);
        t.kind = s_[t.end] == '\'' ? Tok::Char : Tok::String;
      } else {
        t.kind = Tok::Identifier;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i_ + 1 < s_.size() &&
                std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
      t.kind = Tok::Number;
      while (i_ < s_.size()) {
        char d = s_[i_];
        if ((d == '+' || d == '-') && std::strchr("eEpP", s_[i_ - 1]) &&
            !(s_[t.begin] == '0' && i_ - t.begin >= 2 &&
              (s_[t.begin + 1] == 'x' || s_[t.begin + 1] == 'X') &&
              (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E')))
          ++i_;
        else if (ident_char(d) || d == '.' || d == '\'')
          ++i_;
        else
          break;
      }
    } else if (c == '"' || c == '\'') {
      t.kind = c == '"' ? Tok::String : Tok::Char;
      quoted(c);
    } else {
      size_t n = 1;
      for (const char* p : kPuncts)
        if (s_.compare(i_, std::strlen(p), p) == 0) {
          n = std::strlen(p);
          break;
        }
      i_ += n;
    }
    t.end = i_;
    t.text = s_.substr(t.begin, t.end - t.begin);
    return t;
  }

  void quoted(char q) {
    ++i_;
    while (i_ < s_.size() && s_[i_] != q && s_[i_] != '\n') i_ += s_[i_] == '\\' ? 2 : 1;
    if (i_ < s_.size() && s_[i_] == q) ++i_;
    i_ = std::min(i_, s_.size());
  }

  void raw_string() {
    size_t open = s_.find('(', i_);
    if (open == std::string::npos) return quoted('"');
    std::string close = ")" + s_.substr(i_ + 1, open - i_ - 1) + "\"";
    size_t end = s_.find(close, open);
    end = end == std::string::npos ? s_.size() : end + close.size();
    line_ += static_cast<int>(std::count(s_.begin() + i_, s_.begin() + end, '\n'));
    i_ = end;
  }

  const std::string& s_;
  size_t i_ = 0;
  int line_ = 1;
};

// Identifiers of host code: an item naming one of these is host code.
bool host_word(const std::vector<Token>& t, size_t i) {
  static const std::set<std::string> words = {"torch",         "at",           "c10",
                                              "pybind11",      "py",           "Tensor",
                                              "ATen",          "cudaStream_t", "PYBIND11_MODULE",
                                              "TORCH_LIBRARY", "TORCH_CHECK"};
  static const std::set<std::string> std_host = {
      "vector", "string",   "map",        "unordered_map", "tuple", "pair",     "cout",
      "cerr",   "function", "shared_ptr", "unique_ptr",    "mutex", "once_flag"};
  const std::string& w = t[i].text;
  if (t[i].kind != Tok::Identifier) return false;
  if (words.count(w) || w.rfind("cublas", 0) == 0 || w.rfind("cudnn", 0) == 0) return true;
  return w == "std" && i + 2 < t.size() && t[i + 1].text == "::" && std_host.count(t[i + 2].text);
}

bool any_of_words(const std::vector<Token>& t, size_t b, size_t e,
                  const std::set<std::string>& words) {
  for (size_t i = b; i < e; ++i)
    if (t[i].kind == Tok::Identifier && words.count(t[i].text)) return true;
  return false;
}

// Whether `#include <name>` is one a kforge candidate can have (the CUDA headers, CCCL, the shims),
// and not one of the CUDA toolkit's host-only headers.
bool candidate_header(const std::string& name) {
  static const std::set<std::string> host_only = {"cuda_runtime.h", "cuda_runtime_api.h", "cuda.h",
                                                  "cuda_profiler_api.h", "nvrtc.h"};
  for (const char* prefix :
       {"cublas", "cudnn", "cusparse", "cufft", "cusolver", "torch/", "ATen/", "c10/", "pybind11/"})
    if (name.rfind(prefix, 0) == 0) return false;
  if (host_only.count(name)) return false;
  return preprocessing_problems("#include <" + name + ">\n", candidate_include_dirs()).empty();
}

class Splitter {
 public:
  Splitter(const std::string& source, SourceParts& out) : src_(source), out_(out), t_(out.tokens) {}

  void items(size_t b, size_t e, const std::string& ns) {
    size_t i = b;
    while (i < e) {
      if (t_[i].kind == Tok::Directive) {
        directive(t_[i]);
        ++i;
      } else if (t_[i].text == ";") {
        ++i;
      } else if (t_[i].text == "namespace") {
        i = namespace_item(i, e, ns);
      } else if (t_[i].text == "extern" && i + 2 < e && t_[i + 1].kind == Tok::String &&
                 t_[i + 2].text == "{") {
        size_t close = matching(t_, i + 2, e);
        items(i + 3, close, ns);
        i = close + 1;
      } else {
        i = item(i, e, ns);
      }
    }
  }

 private:
  size_t namespace_item(size_t i, size_t e, const std::string& ns) {
    size_t j = i + 1;
    std::string name;
    while (j < e && (t_[j].kind == Tok::Identifier || t_[j].text == "::")) name += t_[j++].text;
    if (j < e && t_[j].text == "{") {
      size_t close = matching(t_, j, e);
      items(j + 1, close, name.empty() ? ns : ns + name + "::");
      return close + 1;
    }
    size_t semi = j;
    while (semi < e && t_[semi].text != ";") ++semi;
    declaration(i, semi, ns);  // `namespace py = pybind11;`
    return semi + 1;
  }

  // One item: a declaration up to `;`, or a definition with a body.
  size_t item(size_t i, size_t e, const std::string& ns) {
    bool aggregate = false, initializer = false;
    for (size_t j = i; j < e; ++j) {
      const std::string& x = t_[j].text;
      if (t_[j].kind == Tok::Directive)
        throw SourceRefusal(t_[j].line, "a preprocessor directive inside a declaration (" +
                                            spelled(t_, i, j) +
                                            "); kforge cannot tell device "
                                            "code from host code there");
      if (x == "(" || x == "[") {
        j = matching(t_, j, e);
      } else if (x == ";") {
        declaration(i, j, ns);
        return j + 1;
      } else if (x == "=") {
        initializer = true;
      } else if (x == "struct" || x == "class" || x == "union" || x == "enum") {
        aggregate = true;
      } else if (x == "{") {
        size_t close = matching(t_, j, e);
        if (aggregate || initializer) {
          j = close;
          continue;
        }
        function(i, j, close, ns);
        return close + 1;
      }
    }
    declaration(i, e, ns);
    return e;
  }

  void directive(const Token& d) {
    size_t p = d.text.find_first_not_of(" \t", 1);
    if (p == std::string::npos) return;
    size_t q = p;
    while (q < d.text.size() && ident_char(d.text[q])) ++q;
    std::string word = d.text.substr(p, q - p), rest = d.text.substr(q);
    if (word == "include") {
      size_t a = rest.find_first_of("<\""),
             b = a == std::string::npos ? a : rest.find_first_of(">\"", a + 1);
      std::string name = b == std::string::npos ? "" : rest.substr(a + 1, b - a - 1);
      if (!candidate_header(name))
        out_.removed.push_back({d.begin, d.end, "#include <" + name + ">"});
    } else if (word == "define") {
      macro(d, rest);
    }
  }

  void macro(const Token& d, const std::string& rest) {
    size_t p = rest.find_first_not_of(" \t");
    if (p == std::string::npos || !ident_start(rest[p])) return;
    size_t q = p;
    while (q < rest.size() && ident_char(rest[q])) ++q;
    Macro m;
    m.line = d.line;
    std::string name = rest.substr(p, q - p), body = rest.substr(q);
    if (q < rest.size() && rest[q] == '(') {
      size_t close = rest.find(')', q);
      if (close == std::string::npos) return;
      m.function_like = true;
      for (const Token& t : tokenize(rest.substr(q + 1, close - q - 1)))
        if (t.kind == Tok::Identifier) m.params.push_back(t.text);
      body = rest.substr(close + 1);
    }
    std::string spliced;
    for (size_t i = 0; i < body.size(); ++i)
      if (!(body[i] == '\\' && i + 1 < body.size() && body[i + 1] == '\n')) spliced += body[i];
    m.body = tokenize(spliced);
    for (Token& t : m.body) t.line = d.line, t.begin = t.end = 0;
    // A macro of host code (TORCH_CHECK, torch::, the runtime's error strings) goes with it: device
    // code that used it would not compile anyway. The wrapper's reading still expands it.
    static const std::set<std::string> host_only = {"cudaGetErrorString", "cudaError_t",
                                                    "cudaGetLastError", "cudaDeviceSynchronize"};
    for (size_t i = 0; i < m.body.size(); ++i)
      if (host_word(m.body, i) || host_only.count(m.body[i].text)) {
        out_.removed.push_back({d.begin, d.end, "host macro '" + name + "'"});
        break;
      }
    out_.macros[name] = std::move(m);
  }

  void declaration(size_t b, size_t e, const std::string& ns) {
    if (b >= e) return;
    static const std::set<std::string> device = {"__global__", "__device__", "__constant__",
                                                 "__shared__", "__managed__"};
    bool is_device = any_of_words(t_, b, e, device);
    bool is_host = false;
    for (size_t i = b; i < e && !is_device; ++i) is_host = is_host || host_word(t_, i);
    bool using_std = t_[b].text == "using" && b + 2 < e && t_[b + 1].text == "namespace" &&
                     t_[b + 2].text == "std";
    if (!is_device && (is_host || using_std)) {
      out_.removed.push_back({t_[b].begin, t_[e < t_.size() ? e : e - 1].end,
                              "host declaration '" + spelled(t_, b, e, 60) + "'"});
      return;
    }
    if (size_t open = params_paren(b, e); open < e && is_device) {
      Function f = signature(b, open, ns);
      f.close = matching(t_, open, e);
      f.params = params(open, f.close);
      out_.functions.push_back(f);
      return;
    }
    constant(b, e);
  }

  // `[static] [inline] constexpr|const <integer type> NAME = init`: kept, and known to the wrapper.
  void constant(size_t b, size_t e) {
    static const std::set<std::string> ints = {"int",      "unsigned", "long",    "short",
                                               "size_t",   "int64_t",  "int32_t", "uint32_t",
                                               "uint64_t", "signed",   "auto"};
    size_t i = b;
    bool is_const = false, is_int = false;
    for (; i < e && t_[i].kind == Tok::Identifier && (i + 1 >= e || t_[i + 1].text != "="); ++i) {
      const std::string& w = t_[i].text;
      if (w == "const" || w == "constexpr")
        is_const = true;
      else if (ints.count(w))
        is_int = true;
      else if (w != "static" && w != "inline")
        return;
    }
    if (is_const && is_int && i + 1 < e && t_[i].kind == Tok::Identifier && t_[i + 1].text == "=")
      out_.constants[t_[i].text] = {i + 2, e};
  }

  // The `(` of a function's parameter list in [b, e): the last parenthesised group at the top
  // level that follows a name other than an attribute's; e when there is none.
  size_t params_paren(size_t b, size_t e) {
    static const std::set<std::string> not_names = {
        "__launch_bounds__", "decltype",    "noexcept", "alignas", "__attribute__",
        "__declspec",        "__maxnreg__", "throw",    "sizeof"};
    size_t found = e;
    for (size_t j = b; j < e; ++j) {
      if (t_[j].text != "(" && t_[j].text != "[" && t_[j].text != "{") continue;
      size_t close = matching(t_, j, e);
      if (t_[j].text == "(" && j > b && t_[j - 1].kind == Tok::Identifier &&
          !not_names.count(t_[j - 1].text))
        found = j;
      j = close;
    }
    return found;
  }

  Function signature(size_t b, size_t open, const std::string& ns) {
    Function f;
    f.head = b;
    f.open = open;
    f.line = t_[b].line;
    f.templated = t_[b].text == "template";
    f.kernel = any_of_words(t_, b, open, {"__global__"});
    f.device = f.kernel || any_of_words(t_, b, open, {"__device__"});
    f.host = !f.device || any_of_words(t_, b, open, {"__host__"});
    std::string name = t_[open - 1].text;
    for (size_t j = open - 1;
         j >= b + 2 && t_[j - 1].text == "::" && t_[j - 2].kind == Tok::Identifier; j -= 2)
      name = t_[j - 2].text + "::" + name;
    f.name = ns + name;
    return f;
  }

  void function(size_t b, size_t body_open, size_t body_close, const std::string& ns) {
    size_t open = params_paren(b, body_open);
    if (open == body_open)
      throw SourceRefusal(
          t_[b].line, "a definition kforge cannot read ('" + spelled(t_, b, body_open) + " {')");
    Function f = signature(b, open, ns);
    f.close = matching(t_, open, body_open);
    f.params = params(open, f.close);
    f.body_open = body_open;
    f.body_close = body_close;
    if (!f.device)
      out_.removed.push_back(
          {t_[b].begin, t_[body_close].end,
           (f.name == "PYBIND11_MODULE" ? std::string("the PYBIND11_MODULE block")
                                        : "host function '" + f.name + "'") +
               " (kforge writes the host code)"});
    out_.functions.push_back(std::move(f));
  }

  std::vector<Param> params(size_t open, size_t close) {
    std::vector<Param> out;
    size_t start = open + 1;
    int angle = 0;
    for (size_t j = open + 1; j <= close; ++j) {
      const std::string& x = t_[j].text;
      if (j < close && (x == "(" || x == "[" || x == "{")) {
        j = matching(t_, j, close);
        continue;
      }
      if (x == "<" && j > open + 1 && t_[j - 1].kind == Tok::Identifier) ++angle;
      if (x == ">" && angle > 0) --angle;
      if (j == close || (x == "," && angle == 0)) {
        if (j > start) out.push_back(param(start, j));
        start = j + 1;
      }
    }
    if (out.size() == 1 && out[0].type.empty() && out[0].name == "void") out.clear();
    return out;
  }

  Param param(size_t b, size_t e) {
    Param p;
    p.begin = b;
    p.end = e;
    size_t end = e;
    for (size_t j = b; j < e; ++j)
      if (t_[j].text == "=") {
        end = j;
        break;
      }
    while (end > b && t_[end - 1].text == "]") {  // `float x[]`
      while (end > b && t_[end - 1].text != "[") --end;
      --end;
    }
    static const std::set<std::string> type_words = {
        "int",          "float",      "double",   "char",   "bool",  "long",
        "short",        "void",       "unsigned", "signed", "const", "volatile",
        "__restrict__", "__restrict", "half",     "size_t", "auto"};
    size_t name_at = end;
    if (end > b + 1 && t_[end - 1].kind == Tok::Identifier && !type_words.count(t_[end - 1].text))
      name_at = end - 1;
    if (name_at < end) p.name = t_[name_at].text;
    p.type = spelled(t_, b, name_at, 200);
    int star = -1;
    for (size_t j = b; j < name_at; ++j)
      if (t_[j].text == "*") star = static_cast<int>(j);
    p.pointer = star >= 0;
    for (size_t j = b; star >= 0 && j < static_cast<size_t>(star); ++j)
      if (t_[j].text == "const") p.is_const = true;
    return p;
  }

  const std::string& src_;
  SourceParts& out_;
  const std::vector<Token>& t_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  return Lexer(source).run();
}

std::string spelled(const std::vector<Token>& t, size_t begin, size_t end, size_t max_chars) {
  end = std::min(end, t.size());
  // `<` `>` hug their neighbours only around a template argument (`data_ptr<float>()`).
  auto template_open = [&](size_t i) {
    return t[i].text == "<" && i > begin && t[i - 1].kind == Tok::Identifier && i + 2 < end &&
           t[i + 1].kind == Tok::Identifier && (t[i + 2].text == ">" || t[i + 2].text == ",");
  };
  auto template_close = [&](size_t i) {
    return t[i].text == ">" && i >= begin + 2 && template_open(i - 2);
  };
  static const std::set<std::string> tight_before = {")", ",", ".", "::", "[", "]", ";", "->"};
  static const std::set<std::string> tight_after = {"(", "[", ".", "::", "->", "!", "~"};
  static const std::set<std::string> control = {"if", "while", "for", "switch", "return"};
  std::string s;
  for (size_t i = begin; i < end; ++i) {
    bool tight =
        i > begin &&
        (tight_before.count(t[i].text) || tight_after.count(t[i - 1].text) || template_open(i) ||
         template_close(i) || (i >= begin + 1 && template_open(i - 1)) ||
         (t[i].text == "(" && t[i - 1].kind == Tok::Identifier && !control.count(t[i - 1].text)) ||
         (t[i].text == "(" && template_close(i - 1)));
    if (i > begin && !tight) s += ' ';
    s += t[i].text;
  }
  if (s.size() > max_chars) s = s.substr(0, max_chars - 3) + "...";
  return s;
}

size_t matching(const std::vector<Token>& t, size_t open, size_t end) {
  const std::string& o = t[open].text;
  std::string c = o == "(" ? ")" : o == "[" ? "]" : "}";
  int depth = 0;
  for (size_t i = open; i < end && i < t.size(); ++i) {
    if (t[i].text == o) ++depth;
    if (t[i].text == c && --depth == 0) return i;
  }
  throw SourceRefusal(t[open].line, "'" + o + "' is never closed");
}

const Function* SourceParts::kernel(const std::string& name) const {
  for (const Function& f : functions)
    if (f.kernel && f.name == name) return &f;
  return nullptr;
}

const Function* SourceParts::host_function(const std::string& name) const {
  for (const Function& f : functions)
    if (f.host && f.body_open && f.name == name) return &f;
  return nullptr;
}

SourceParts split_source(const std::string& source) {
  SourceParts out;
  out.tokens = tokenize(source);
  Splitter(source, out).items(0, out.tokens.size(), "");
  return out;
}

Edit removal(const std::string& source, const Removed& r) {
  Edit e{r.begin, r.end, "/* kforge: removed " + r.what + " */"};
  e.text += std::string(std::count(source.begin() + r.begin, source.begin() + r.end, '\n'), '\n');
  return e;
}

std::string apply_edits(const std::string& source, std::vector<Edit> edits) {
  std::sort(edits.begin(), edits.end(),
            [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
  std::string out;
  size_t at = 0;
  for (const Edit& e : edits) {
    if (e.begin < at) continue;  // inside an earlier removal: gone with it
    out += source.substr(at, e.begin - at) + e.text;
    at = e.end;
  }
  out += source.substr(at);
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return out + "\n";
}

}  // namespace kforge::compile::kb
