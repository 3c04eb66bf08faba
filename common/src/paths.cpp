#include "kforge/common/paths.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "kforge/common/strings.h"

namespace kforge {
namespace {

std::filesystem::path env_path(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::filesystem::path(v) : std::filesystem::path();
}

std::filesystem::path xdg(const char* var, const char* fallback_under_home) {
  if (auto p = env_path(var); !p.empty()) return p;
  if (auto home = env_path("HOME"); !home.empty()) return home / fallback_under_home;
  return std::filesystem::temp_directory_path();
}

}  // namespace

std::filesystem::path cache_dir() {
  if (auto p = env_path("KFORGE_CACHE_DIR"); !p.empty()) return p;
  return xdg("XDG_CACHE_HOME", ".cache") / "kforge";
}

std::filesystem::path data_dir() {
  return xdg("XDG_DATA_HOME", ".local/share") / "kforge";
}

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (const std::string& dir : split(path ? path : "", ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::vector<std::string> python_candidates(const std::string& named) {
  if (!named.empty()) return {named};
  if (auto p = env_path("KFORGE_PYTHON"); !p.empty()) return {p.string()};
  std::vector<std::string> out;
  for (const std::string& p : {find_in_path("python3"), std::string("/usr/bin/python3")})
    if (!p.empty() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  return out;
}

}  // namespace kforge
