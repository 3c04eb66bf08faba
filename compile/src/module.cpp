#include "kforge/compile/module.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

#include "compile_shims.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/compile/source_check.h"

namespace kforge::compile {

std::string cuda_include_dir() {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v && std::filesystem::is_directory(std::string(v) + "/include"))
      return std::string(v) + "/include";
  return KFORGE_CUDA_INCLUDE_DIR;
}

std::vector<std::string> module_options(const ModuleRequest& r) {
  std::string inc = cuda_include_dir();
  std::vector<std::string> opts = {"-std=c++17", "-I" + inc, "-I" + inc + "/cccl", "--pre-include=kforge_shims.h",
                                   "--ptxas-options=-v", "-lineinfo"};
  if (r.use_pch) {
    opts.push_back("-pch");
    if (!r.pch_dir.empty()) opts.push_back("--pch-dir=" + r.pch_dir);
  }
  return opts;
}

std::string source_with_tunables(const std::string& source, const std::map<std::string, int64_t>& defines) {
  if (defines.empty()) return source;
  // The prologue: leading blank, comment, #include and #pragma lines. Tunables are defined after
  // it, so the headers see the same macros for every tunable value and NVRTC's precompiled header
  // stays valid (a -D option would invalidate it: 2.2-3.1 s instead of 0.3 s for CUB sources).
  std::istringstream in(source);
  std::string line, prologue, rest;
  int line_no = 0, first_body_line = 1;
  bool in_prologue = true, in_comment = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (in_prologue) {
      std::string t = line.substr(std::min(line.size(), line.find_first_not_of(" \t")));
      bool keep = in_comment || t.empty() || t.rfind("//", 0) == 0 || t.rfind("#include", 0) == 0 ||
                  t.rfind("#pragma", 0) == 0 || t.rfind("/*", 0) == 0;
      if (keep) {
        if (t.rfind("/*", 0) == 0 && t.find("*/") == std::string::npos) in_comment = true;
        else if (in_comment && t.find("*/") != std::string::npos) in_comment = false;
        prologue += line + "\n";
        continue;
      }
      in_prologue = false;
      first_body_line = line_no;
    }
    rest += line + "\n";
  }
  if (in_prologue) first_body_line = line_no + 1;
  // The declaration ends the "header stop point" of NVRTC's automatic PCH before the #defines.
  std::string defs = "namespace kforge_tunables {}\n";
  for (const auto& [name, value] : defines) defs += "#define " + name + " " + std::to_string(value) + "\n";
  return prologue + defs + "#line " + std::to_string(first_body_line) + " \"" + kCandidateFileName + "\"\n" + rest;
}

Module compile_module_here(const ModuleRequest& r) {
  // In-memory headers: the shims, and C library names that forward to them.
  std::vector<std::pair<std::string, std::string>> headers;
  for (const std::string& name : shim_header_names()) {
    std::string_view text = name == "kforge_shims.h"                ? embedded::compile_shims_kforge_shims
                            : name == "cmath" || name == "math.h" ? embedded::compile_shims_cmath
                            : name == "algorithm"                 ? embedded::compile_shims_algorithm
                                                                  : embedded::compile_shims_forwarding;
    headers.emplace_back(name, std::string(text));
  }

  auto t0 = std::chrono::steady_clock::now();
  NvrtcOutput out = nvrtc_compile(source_with_tunables(r.source, r.defines), kCandidateFileName, r.arch, module_options(r), r.name_expressions, headers);
  Module m;
  m.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  m.ok = out.ok;
  // NVRTC narrates its automatic precompiled headers; that is kforge's business, not the LLM's.
  std::istringstream lines(out.log);
  for (std::string line; std::getline(lines, line);)
    if (line.find("precompiled header") == std::string::npos) m.log += line + "\n";
  while (!m.log.empty() && m.log.back() == '\n') m.log.pop_back();
  if (!out.ok) return m;
  m.ptx = std::move(out.ptx);
  m.cubin = std::move(out.cubin);
  m.lowered_names = std::move(out.lowered_names);
  m.resources = parse_resource_report(m.log);
  m.rejections = find_rejected_features(m.ptx);
  if (!m.rejections.empty()) m.ok = false;
  return m;
}

std::map<std::string, KernelResources> parse_resource_report(const std::string& log) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex barriers(R"(used (\d+) barriers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::map<std::string, KernelResources> out;
  std::istringstream lines(log);
  std::string line, current;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, entry)) {
      current = m[1];
      out[current];
      continue;
    }
    if (current.empty()) continue;
    KernelResources& k = out[current];
    if (std::regex_search(line, m, frame)) {
      k.stack_bytes = std::stoi(m[1]);
      k.spill_store_bytes = std::stoi(m[2]);
      k.spill_load_bytes = std::stoi(m[3]);
    }
    if (std::regex_search(line, m, used)) {
      k.registers = std::stoi(m[1]);
      if (std::regex_search(line, m, barriers)) k.barriers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) k.static_shared_bytes = std::stoi(m[1]);
    }
  }
  return out;
}

std::vector<std::string> find_rejected_features(const std::string& ptx) {
  std::vector<std::string> out;
  auto has_extern = [&](const std::string& fn) {
    std::regex re(R"(\.extern\s+\.func[^;]*\b)" + fn + R"(\b)");
    return std::regex_search(ptx, re);
  };
  if (has_extern("malloc") || has_extern("free"))
    out.push_back("device-side malloc/free (or new/delete) is not allowed: declare scratch memory as a plan workspace");
  if (has_extern("vprintf")) out.push_back("printf in device code is not allowed: kforge runs kernels unattended");
  if (has_extern("cudaLaunchDevice") || has_extern("cudaLaunchDeviceV2") || has_extern("cudaGetParameterBuffer") ||
      has_extern("cudaGetParameterBufferV2"))
    out.push_back("device-side kernel launches (dynamic parallelism) are not allowed: list every launch in the plan");
  // assert() (__assertfail) is allowed: it traps like any fault and becomes a runtime error.
  return out;
}

}  // namespace kforge::compile
