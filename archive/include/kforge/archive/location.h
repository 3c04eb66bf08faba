// Where the kernel archive lives. The store itself (schema, retrieval, browse) is issue 4.
#pragma once

#include <filesystem>

namespace kforge::archive {

// --db wins; else $KFORGE_DB; else $XDG_DATA_HOME/kforge/archive.db (~/.local/share/kforge/...).
std::filesystem::path database_path(const std::filesystem::path& flag = {});

}  // namespace kforge::archive
