// Compiling one candidate source into a module: NVRTC with kforge's shims and options, the
// resource report (-Xptxas -v), lowered kernel names, and the rejection of device code kforge
// never runs (malloc, printf, device-side launches).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kforge::compile {

struct KernelResources {
  int registers = 0;
  int barriers = 0;
  int static_shared_bytes = 0;
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

struct ModuleRequest {
  std::string source;
  std::string arch = "sm_90a";
  std::map<std::string, int64_t> defines;     // tunables: -DNAME=value
  std::vector<std::string> name_expressions;  // kernels as the plan names them
  bool use_pch = false;                       // automatic precompiled headers (long-lived workers)
  std::string pch_dir;                        // where they go (a worker's private folder)
};

struct Module {
  bool ok = false;
  std::string log;  // NVRTC's log (errors refer to candidate.cu(LINE), the source's own lines)
  std::string ptx;
  std::string cubin;                                 // bytes
  std::vector<std::string> lowered_names;            // one per name expression
  std::map<std::string, KernelResources> resources;  // by lowered (mangled) name
  std::vector<std::string> rejections;               // banned device features found in the PTX
  double compile_ms = 0;
  bool cache_hit = false;
};

// The file name errors refer to: "candidate.cu(12): error: ...".
inline constexpr const char* kCandidateFileName = "candidate.cu";

// Bumped by hand whenever shims or options change what a source compiles to (part of cache keys).
inline constexpr int kCompileScheme = 4;

// The NVRTC options kforge uses for `request` (besides the architecture).
std::vector<std::string> module_options(const ModuleRequest& request);

// The source NVRTC sees: tunables as #define lines after the leading #include lines, then a
// #line directive so errors keep the candidate's own line numbers.
std::string source_with_tunables(const std::string& source,
                                 const std::map<std::string, int64_t>& defines);

// Compiles in this process. A source that does not compile is `ok == false` with the log. No
// checks of what the source includes: Compiler::compile runs them (compile/source_check.h).
Module compile_module_here(const ModuleRequest& request);

// Parses ptxas's "-v" report out of an NVRTC log.
std::map<std::string, KernelResources> parse_resource_report(const std::string& log);

// Device features kforge refuses, found in PTX: each a message for the LLM.
std::vector<std::string> find_rejected_features(const std::string& ptx);

// The CUDA headers directory NVRTC is pointed at ($CUDA_HOME/include, else the build's).
std::string cuda_include_dir();

}  // namespace kforge::compile
