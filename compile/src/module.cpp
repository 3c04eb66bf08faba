#include "kforge/compile/module.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "compile_shims.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/compile/source_check.h"

namespace kforge::compile {

std::string cuda_include_dir() {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var);
        v && *v && std::filesystem::is_directory(std::string(v) + "/include"))
      return std::string(v) + "/include";
  return KFORGE_CUDA_INCLUDE_DIR;
}

std::vector<std::string> module_options(const ModuleRequest& r) {
  std::string inc = cuda_include_dir();
  std::vector<std::string> opts = {"-std=c++17",         "-I" + inc,
                                   "-I" + inc + "/cccl", "--pre-include=kforge_shims.h",
                                   "--ptxas-options=-v", "-lineinfo"};
  if (r.use_pch) {
    opts.push_back("-pch");
    if (!r.pch_dir.empty()) opts.push_back("--pch-dir=" + r.pch_dir);
  }
  return opts;
}

std::string source_with_tunables(const std::string& source,
                                 const std::map<std::string, int64_t>& defines) {
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
        if (t.rfind("/*", 0) == 0 && t.find("*/") == std::string::npos)
          in_comment = true;
        else if (in_comment && t.find("*/") != std::string::npos)
          in_comment = false;
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
  for (const auto& [name, value] : defines)
    defs += "#define " + name + " " + std::to_string(value) + "\n";
  return prologue + defs + "#line " + std::to_string(first_body_line) + " \"" + kCandidateFileName +
         "\"\n" + rest;
}

namespace {

// NVRTC narrates its automatic precompiled headers; that is kforge's business, not the LLM's: its
// "precompiled header" lines, and the warning that kforge's own `#line` directive (above) stops
// one, with the lines it quotes and, when no other warning is left, the remark on suppressing
// warnings (the line it names is not the candidate's).
std::string without_pch_narration(const std::string& log) {
  std::vector<std::string> kept;
  std::istringstream lines(log);
  bool in_pch_warning = false, other_warnings = false;
  for (std::string line; std::getline(lines, line);) {
    bool blank = line.find_first_not_of(" \t\r") == std::string::npos;
    if (in_pch_warning) {
      in_pch_warning = !blank;
      continue;
    }
    if (line.find("precompiled header") != std::string::npos) continue;
    if (line.find("PCH creation disabled") != std::string::npos) {
      in_pch_warning = true;
      continue;
    }
    other_warnings |= line.find(": warning") != std::string::npos;
    kept.push_back(line);
  }
  std::string out;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (!other_warnings && kept[i].rfind("Remark: The warnings can be suppressed", 0) == 0) {
      if (i + 1 < kept.size() && kept[i + 1].empty()) ++i;
      continue;
    }
    out += kept[i] + "\n";
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

Module compile_module_here(const ModuleRequest& r) {
  // In-memory headers: the shims, and C library names that forward to them.
  std::vector<std::pair<std::string, std::string>> headers;
  for (const std::string& name : shim_header_names()) {
    std::string_view text = name == "kforge_shims.h" ? embedded::compile_shims_kforge_shims
                            : name == "cmath" || name == "math.h" ? embedded::compile_shims_cmath
                            : name == "algorithm" ? embedded::compile_shims_algorithm
                            : name == "cuda.h"    ? embedded::compile_shims_cuda
                                                  : embedded::compile_shims_forwarding;
    headers.emplace_back(name, std::string(text));
  }

  auto t0 = std::chrono::steady_clock::now();
  NvrtcOutput out = nvrtc_compile(source_with_tunables(r.source, r.defines), kCandidateFileName,
                                  r.arch, module_options(r), r.name_expressions, headers);
  Module m;
  m.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  m.ok = out.ok;
  m.log = without_pch_narration(out.log);
  if (!out.ok) return m;
  m.ptx = std::move(out.ptx);
  m.cubin = std::move(out.cubin);
  m.lowered_names = std::move(out.lowered_names);
  m.resources = parse_resource_report(m.log);
  m.rejections = find_rejected_features(m.ptx);
  if (!m.rejections.empty()) m.ok = false;
  return m;
}

namespace {

// Linear scans for the two functions below: NVRTC logs echo candidate text and PTX carries the
// candidate's names, so no backtracking regex runs over them.
bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// The number written just before the first `text` of `line` that has one ("12 bytes smem");
// at most 9 digits, so it fits an int.
std::optional<int> number_before(const std::string& line, const std::string& text) {
  for (size_t at = line.find(text); at != std::string::npos; at = line.find(text, at + 1)) {
    size_t begin = at;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
    if (begin < at && at - begin <= 9) return std::stoi(line.substr(begin, at - begin));
  }
  return std::nullopt;
}

// The number written just after the first `text` of `line` that has one ("Used 12").
std::optional<int> number_after(const std::string& line, const std::string& text) {
  for (size_t at = line.find(text); at != std::string::npos; at = line.find(text, at + 1)) {
    size_t begin = at + text.size(), end = begin;
    while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
    if (begin < end && end - begin <= 9) return std::stoi(line.substr(begin, end - begin));
  }
  return std::nullopt;
}

}  // namespace

std::map<std::string, KernelResources> parse_resource_report(const std::string& log) {
  static const std::string kEntry = "Compiling entry function '";
  std::map<std::string, KernelResources> out;
  std::istringstream lines(log);
  std::string line, current;
  while (std::getline(lines, line)) {
    if (size_t at = line.find(kEntry); at != std::string::npos) {
      size_t begin = at + kEntry.size(), end = line.find('\'', begin);
      if (end != std::string::npos && end > begin) {
        current = line.substr(begin, end - begin);
        out[current];
        continue;
      }
    }
    if (current.empty()) continue;
    KernelResources& k = out[current];
    auto stack = number_before(line, " bytes stack frame, ");
    auto stores = number_before(line, " bytes spill stores, ");
    auto loads = number_before(line, " bytes spill loads");
    if (stack && stores && loads) {
      k.stack_bytes = *stack;
      k.spill_store_bytes = *stores;
      k.spill_load_bytes = *loads;
    }
    if (auto used = number_after(line, "Used "); used && number_before(line, " registers")) {
      k.registers = *used;
      if (auto b = number_after(line, "used "); b && number_before(line, " barriers"))
        k.barriers = *b;
      if (auto smem = number_before(line, " bytes smem")) k.static_shared_bytes = *smem;
    }
  }
  return out;
}

std::vector<std::string> find_rejected_features(const std::string& ptx) {
  // The names of every `.extern .func ... ;` declaration, each declaration read once.
  std::set<std::string> externs;
  static const std::string kExtern = ".extern";
  for (size_t at = ptx.find(kExtern); at != std::string::npos;) {
    size_t i = at + kExtern.size(), ws = i;
    while (i < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[i]))) ++i;
    size_t end = std::min(ptx.find(';', i), ptx.size());
    if (i > ws && ptx.compare(i, 5, ".func") == 0) {
      for (i += 5; i < end;) {
        if (!is_word_char(ptx[i])) {
          ++i;
          continue;
        }
        size_t begin = i;
        while (i < end && is_word_char(ptx[i])) ++i;
        if (i - begin <= 64) externs.insert(ptx.substr(begin, i - begin));
      }
    }
    at = end < ptx.size() ? ptx.find(kExtern, std::max(end, at + 1)) : std::string::npos;
  }
  std::vector<std::string> out;
  auto has_extern = [&](const std::string& fn) { return externs.count(fn) > 0; };
  if (has_extern("malloc") || has_extern("free"))
    out.push_back(
        "device-side malloc/free (or new/delete) is not allowed: declare scratch memory as a plan "
        "workspace");
  if (has_extern("vprintf"))
    out.push_back("printf in device code is not allowed: kforge runs kernels unattended");
  if (has_extern("cudaLaunchDevice") || has_extern("cudaLaunchDeviceV2") ||
      has_extern("cudaGetParameterBuffer") || has_extern("cudaGetParameterBufferV2"))
    out.push_back(
        "device-side kernel launches (dynamic parallelism) are not allowed: list every launch in "
        "the plan");
  // assert() (__assertfail) is allowed: it traps like any fault and becomes a runtime error.
  return out;
}

}  // namespace kforge::compile
