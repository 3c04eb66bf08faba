#include "kforge/compile/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <memory>

namespace kforge::compile {
namespace {

#define KFORGE_NVRTC_CHECK(expr)                                                                \
  do {                                                                                          \
    nvrtcResult kforge_status_ = (expr);                                                        \
    if (kforge_status_ != NVRTC_SUCCESS)                                                        \
      throw NvrtcError(std::string(#expr) + " failed: " + nvrtcGetErrorString(kforge_status_) + \
                       " (" + __FILE__ + ":" + std::to_string(__LINE__) + ")");                 \
  } while (0)

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<_nvrtcProgram, ProgramDeleter>;

}  // namespace

NvrtcVersion nvrtc_version() {
  NvrtcVersion v;
  KFORGE_NVRTC_CHECK(nvrtcVersion(&v.major, &v.minor));
  return v;
}

std::string nvrtc_library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string arch_problem(const std::string& arch) {
  int count = 0;
  KFORGE_NVRTC_CHECK(nvrtcGetNumSupportedArchs(&count));
  std::vector<int> supported(static_cast<size_t>(count));
  KFORGE_NVRTC_CHECK(nvrtcGetSupportedArchs(supported.data()));
  std::string listed;
  for (int a : supported) listed += (listed.empty() ? "sm_" : ", sm_") + std::to_string(a);
  std::string digits = arch.rfind("sm_", 0) == 0 ? arch.substr(3) : "";
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) digits.pop_back();
  bool numeric = !digits.empty() && digits.size() <= 4 &&
                 digits.find_first_not_of("0123456789") == std::string::npos;
  if (!numeric)
    return "'" + arch + "' is not an architecture like sm_90a (NVRTC " +
           std::to_string(nvrtc_version().major) + "." + std::to_string(nvrtc_version().minor) +
           " targets " + listed + ")";
  if (std::find(supported.begin(), supported.end(), std::stoi(digits)) == supported.end())
    return "NVRTC " + std::to_string(nvrtc_version().major) + "." +
           std::to_string(nvrtc_version().minor) + " cannot target " + arch + "; it targets " +
           listed;
  return "";
}

std::string arch_for(int cc_major, int cc_minor) {
  std::string arch = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  if (cc_major == 9 && cc_minor == 0) arch += "a";
  return arch;
}

NvrtcOutput nvrtc_compile(const std::string& source, const std::string& program_name,
                          const std::string& arch, const std::vector<std::string>& options,
                          const std::vector<std::string>& name_expressions,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  std::vector<const char*> header_sources, header_names;
  for (const auto& [name, content] : headers) {
    header_names.push_back(name.c_str());
    header_sources.push_back(content.c_str());
  }
  nvrtcProgram raw = nullptr;
  KFORGE_NVRTC_CHECK(nvrtcCreateProgram(&raw, source.c_str(), program_name.c_str(),
                                        static_cast<int>(headers.size()), header_sources.data(),
                                        header_names.data()));
  Program prog(raw);
  for (const auto& n : name_expressions) KFORGE_NVRTC_CHECK(nvrtcAddNameExpression(raw, n.c_str()));

  std::vector<std::string> all = {"--gpu-architecture=" + arch};
  all.insert(all.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const auto& o : all) argv.push_back(o.c_str());

  NvrtcOutput out;
  nvrtcResult status = nvrtcCompileProgram(raw, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  KFORGE_NVRTC_CHECK(nvrtcGetProgramLogSize(raw, &log_size));
  out.log.resize(log_size);
  KFORGE_NVRTC_CHECK(nvrtcGetProgramLog(raw, out.log.data()));
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (status == NVRTC_ERROR_COMPILATION) return out;
  KFORGE_NVRTC_CHECK(status);

  size_t ptx_size = 0;
  KFORGE_NVRTC_CHECK(nvrtcGetPTXSize(raw, &ptx_size));
  out.ptx.resize(ptx_size);
  KFORGE_NVRTC_CHECK(nvrtcGetPTX(raw, out.ptx.data()));
  if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  size_t cubin_size = 0;
  KFORGE_NVRTC_CHECK(nvrtcGetCUBINSize(raw, &cubin_size));
  out.cubin.resize(cubin_size);
  KFORGE_NVRTC_CHECK(nvrtcGetCUBIN(raw, out.cubin.data()));
  for (const auto& n : name_expressions) {
    const char* lowered = nullptr;
    KFORGE_NVRTC_CHECK(nvrtcGetLoweredName(raw, n.c_str(), &lowered));
    out.lowered_names.push_back(lowered);
  }
  out.ok = true;
  return out;
}

}  // namespace kforge::compile
