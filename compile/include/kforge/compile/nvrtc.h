// NVRTC, owned: one call compiles CUDA C++ to PTX and CUBIN for one architecture.
// A source that does not compile is a result (ok == false, with NVRTC's log), not an exception;
// an NVRTC API failure (out of memory, bad option) throws NvrtcError.
#pragma once

#include <string>
#include <vector>

#include "kforge/common/error.h"

namespace kforge::compile {

class NvrtcError : public Error {
 public:
  using Error::Error;
};

struct NvrtcVersion {
  int major = 0, minor = 0;
};
NvrtcVersion nvrtc_version();

struct NvrtcOutput {
  bool ok = false;
  std::string log;
  std::string ptx;
  std::string cubin;                       // bytes
  std::vector<std::string> lowered_names;  // one per requested name expression
};

// `arch` like "sm_90a"; options are NVRTC options besides the architecture.
// `headers` are in-memory headers (name, content) the source may include.
NvrtcOutput nvrtc_compile(const std::string& source, const std::string& program_name,
                          const std::string& arch, const std::vector<std::string>& options,
                          const std::vector<std::string>& name_expressions = {},
                          const std::vector<std::pair<std::string, std::string>>& headers = {});

// The folder libnvrtc was loaded from (its builtins library lives beside it), or "".
std::string nvrtc_library_dir();

// Why NVRTC cannot target `arch` ("" when it can): the form is sm_XY with an optional "a" or "f"
// suffix, XY one of NVRTC's supported architectures (listed in the message when it is not).
std::string arch_problem(const std::string& arch);

// "sm_90a" for compute capability 9.0 (Hopper's arch-specific features), else "sm_XY".
std::string arch_for(int cc_major, int cc_minor);

}  // namespace kforge::compile
