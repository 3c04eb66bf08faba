// Small file helpers on POSIX calls (LibTorch 2.11's wheel interposes std::filesystem symbols of an
// older libstdc++ on the GPU machine; see docs/decisions.md).
#pragma once

#include <optional>
#include <string>

namespace kforge {

// mkdir -p; throws kforge::Error naming the path on failure.
void make_directories(const std::string& path);

// A new private folder $TMPDIR/PREFIX-XXXXXX (or under /tmp); throws kforge::Error on failure.
std::string make_temp_directory(const std::string& prefix);

// rm -rf: removes `path` and everything beneath it (symbolic links, not what they point to).
// Missing paths are fine; failures are ignored (a clean-up).
void remove_tree(const std::string& path);

// The canonical absolute path (symbolic links resolved), or "" when it does not exist.
std::string real_path(const std::string& path);

// Whole-file read; nullopt when the file does not exist or cannot be read.
std::optional<std::string> read_file(const std::string& path);

// Writes to a temporary file in the same folder, then renames it over `path`: readers see the old
// file or the new one, never half of one, also with several writers at once.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace kforge
