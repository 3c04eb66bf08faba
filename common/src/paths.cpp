#include "kforge/common/paths.h"

#include <cstdlib>

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

std::filesystem::path data_dir() { return xdg("XDG_DATA_HOME", ".local/share") / "kforge"; }

}  // namespace kforge
