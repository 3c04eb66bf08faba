// Raw SQL over an archive file, for tests that look at (or doctor) rows the archive's typed reads
// do not show: a connection of its own, through the archive's SQLite wrapper, on the same file.
// The archive is WAL: this connection sees what the archive has committed, and the archive sees
// what this one commits (each statement here commits on its own unless it opens a transaction).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"

namespace kforge::test {

class ArchiveSql {
 public:
  explicit ArchiveSql(const std::string& path, archive::Access access = archive::Access::ReadWrite)
      : db_(path, access) {}
  explicit ArchiveSql(const archive::Archive& a,
                      archive::Access access = archive::Access::ReadWrite)
      : ArchiveSql(a.path(), access) {}

  archive::Database& database() { return db_; }
  void exec(const std::string& sql) { db_.exec(sql); }
  archive::Statement prepare(const std::string& sql) { return db_.prepare(sql); }
  int64_t last_insert_id() const { return db_.last_insert_id(); }

  // The first column of the first row, as an integer (a count(*)) or as text.
  int64_t count(const std::string& sql) {
    archive::Statement s = first_row(sql);
    return s.integer(0);
  }
  std::string text(const std::string& sql) {
    archive::Statement s = first_row(sql);
    return s.text(0);
  }
  // The first column of every row, in order.
  std::vector<std::string> column(const std::string& sql) {
    std::vector<std::string> out;
    for (archive::Statement s = db_.prepare(sql); s.step();) out.push_back(s.text(0));
    return out;
  }

 private:
  archive::Statement first_row(const std::string& sql) {
    archive::Statement s = db_.prepare(sql);
    if (!s.step()) throw std::runtime_error("no row from: " + sql);
    return s;
  }
  archive::Database db_;
};

}  // namespace kforge::test
