// A KernelBench answer's CUDA source (load_inline's cuda_sources) read as kforge needs it: tokens,
// then the namespace-scope items sorted into device code (kept for the candidate) and host code
// (removed: kforge writes the host code), with what the wrapper's reading needs to know of both
// (kernels and their parameters, host functions, macros, integer constants).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/error.h"

namespace kforge::compile::kb {

// Why a construct of the source cannot be converted, at `line` of the CUDA source (1-based).
class SourceRefusal : public Error {
 public:
  SourceRefusal(int line, const std::string& why) : Error(why), line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

enum class Tok { Identifier, Number, String, Char, Punct, Directive };

struct Token {
  Tok kind = Tok::Punct;
  std::string text;
  int line = 1;
  size_t begin = 0, end = 0;  // bytes [begin, end) of the source
};

// C++ tokens without comments; a preprocessor directive is one token (its logical line). `<<<` and
// `>>>` are tokens (kernel launches); `>` never pairs into `>>` (template arguments close), so a
// shift is two adjacent `>` tokens.
std::vector<Token> tokenize(const std::string& source);

// The tokens' text joined by single spaces, short, for messages.
std::string spelled(const std::vector<Token>& t, size_t begin, size_t end, size_t max_chars = 80);

// Index of the token closing the bracket opened at `open` ( `(`, `[`, `{` ); throws SourceRefusal
// when it is not closed.
size_t matching(const std::vector<Token>& t, size_t open, size_t end);

struct Param {
  size_t begin = 0, end = 0;  // its tokens
  std::string name;           // "" when unnamed
  std::string type;           // the tokens before the name, spelled
  bool pointer = false, is_const = false;
};

// A function defined (or declared) at namespace scope.
struct Function {
  std::string name;     // as a plan names a kernel: with its named namespaces (`ns::k`)
  bool kernel = false;  // __global__
  bool device = false;  // device code: __global__, __device__ (also __host__ __device__)
  bool host = false;    // callable from host code: no qualifier, or __host__
  bool templated = false;
  size_t head = 0;                  // first token (template or qualifiers)
  size_t open = 0, close = 0;       // its parameter list's ( )
  std::optional<size_t> body_open;  // `{` of its body; none for a declaration
  size_t body_close = 0;            // `}` of its body
  std::vector<Param> params;
  int line = 1;
};

struct Macro {
  bool function_like = false;
  std::vector<std::string> params;
  std::vector<Token> body;
  int line = 1;
};

struct Removed {
  size_t begin = 0, end = 0;  // bytes of the source
  std::string what;           // "host function 'add_cuda'"
};

struct SourceParts {
  std::vector<Token> tokens;
  std::vector<Function> functions;  // in source order
  std::map<std::string, Macro> macros;
  // Namespace-scope integer constants (`constexpr int kBlock = 256;`): their initializers' tokens.
  std::map<std::string, std::pair<size_t, size_t>> constants;
  std::vector<Removed> removed;  // host code and headers kforge's candidate cannot have

  const Function* kernel(const std::string& name) const;
  const Function* host_function(const std::string& name) const;  // with a body
};

// Sorts `source`'s namespace-scope items (throws SourceRefusal where it cannot tell them apart).
SourceParts split_source(const std::string& source);

// An edit of the source: bytes [begin, end) become `text`.
struct Edit {
  size_t begin = 0, end = 0;
  std::string text;
};

// `source` with `edits` applied (they must not overlap), each removal leaving a comment on its
// first line and its line breaks, so that the candidate's lines are the answer's lines.
std::string apply_edits(const std::string& source, std::vector<Edit> edits);
// The edit that removes `r`, saying what it was.
Edit removal(const std::string& source, const Removed& r);

}  // namespace kforge::compile::kb
