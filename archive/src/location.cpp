#include "kforge/archive/location.h"

#include <cstdlib>

#include "kforge/common/paths.h"

namespace kforge::archive {

std::filesystem::path database_path(const std::filesystem::path& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("KFORGE_DB"); env && *env) return env;
  return data_dir() / "archive.db";
}

}  // namespace kforge::archive
