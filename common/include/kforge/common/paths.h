// Where kforge keeps its files (XDG base directories).
#pragma once

#include <filesystem>

namespace kforge {

// $KFORGE_CACHE_DIR, else $XDG_CACHE_HOME/kforge, else ~/.cache/kforge.
std::filesystem::path cache_dir();
// $XDG_DATA_HOME/kforge, else ~/.local/share/kforge.
std::filesystem::path data_dir();

}  // namespace kforge
