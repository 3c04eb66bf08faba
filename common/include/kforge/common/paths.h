// Where kforge keeps its files (XDG base directories).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kforge {

// $KFORGE_CACHE_DIR, else $XDG_CACHE_HOME/kforge, else ~/.cache/kforge.
std::filesystem::path cache_dir();
// $XDG_DATA_HOME/kforge, else ~/.local/share/kforge.
std::filesystem::path data_dir();

// `name` as PATH would run it ("" when no folder of PATH has it); a name with a '/' as it is.
std::string find_in_path(const std::string& name);
// The Pythons kforge tries for its PyTorch helpers, in order: `named` alone when given, else
// $KFORGE_PYTHON alone when set, else python3 on PATH, then Debian's /usr/bin/python3.
std::vector<std::string> python_candidates(const std::string& named = "");

}  // namespace kforge
