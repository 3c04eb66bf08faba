// JSON stored in the archive's text columns, read back: text that is not JSON (a damaged or
// hand-edited file) is an ArchiveError naming the file, table, row and column, not a parser crash.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kforge/archive/sqlite.h"

namespace kforge::archive {

inline nlohmann::json stored_json(Database& db, Statement& s, int col, const std::string& table,
                                  const std::string& column, int64_t row) {
  try {
    return nlohmann::json::parse(s.text(col));
  } catch (const nlohmann::json::exception& e) {
    std::string why = e.what();
    if (size_t at = why.find("] "); at != std::string::npos)
      why = why.substr(at + 2);  // drop "[json.exception...]"
    throw ArchiveError(db.path() + ": table " + table + ", row " + std::to_string(row) +
                       ", column " + column + ": the stored text is not JSON (" + why +
                       "); the archive is damaged or was edited by hand");
  }
}

}  // namespace kforge::archive
