// What a candidate may ask of the preprocessor. NVRTC resolves #include against the file system
// (absolute paths, paths relative to its working directory, `..`), so a candidate's source, or a
// plan's kernel name expression (which NVRTC parses as code), could pull any readable file into
// the compile log. These checks run before NVRTC sees anything; the compile worker is also
// confined to the CUDA headers (common/sandbox.h), in case a route is missed here.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kforge::compile {

// Headers kforge provides in memory (the C library shims), reachable by these names only.
const std::vector<std::string>& shim_header_names();

// The folders a candidate's #include may reach: the CUDA headers and CCCL (CUB, libcu++, Thrust).
std::vector<std::string> candidate_include_dirs();

// Problems with the source's preprocessing, each a message for the LLM naming the line: an
// #include that is computed, absolute, climbs with `..`, or names no header in `include_dirs`
// (or the shims); #embed; __has_include of such a path; a #define whose body holds an absolute or
// climbing path (a header's computed #include could use it); trigraphs; NUL bytes. Empty if none.
std::vector<std::string> preprocessing_problems(const std::string& source,
                                                const std::vector<std::string>& include_dirs);

// Why `expression` is not an acceptable kernel name expression, or nullopt if it is: an
// identifier (optionally qualified with ::), optionally with template arguments made of
// identifiers, integer literals, spaces, `,` and the operators + - * / % ( ) ::.
std::optional<std::string> name_expression_problem(const std::string& expression);

}  // namespace kforge::compile
