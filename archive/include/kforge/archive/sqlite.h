// SQLite, owned: a connection and prepared statements with checked calls. Only archive/ uses it.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kforge/common/error.h"

namespace kforge::archive {

// A database problem the user can act on (locked, corrupt, newer schema): names the file.
class ArchiveError : public Error {
 public:
  using Error::Error;
};

class Statement;

class Database {
 public:
  // Opens (creating if asked) with WAL, foreign keys and a busy timeout.
  Database(const std::string& path, bool create, int busy_timeout_ms = 5000);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  void exec(const std::string& sql);
  Statement prepare(const std::string& sql);
  int64_t last_insert_id() const { return sqlite3_last_insert_rowid(db_); }
  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }
  [[noreturn]] void fail(int rc, const std::string& what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

class Statement {
 public:
  Statement(Database& db, const std::string& sql);
  ~Statement();
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_), sql_(std::move(o.sql_)) { o.stmt_ = nullptr; }
  Statement(const Statement&) = delete;

  Statement& bind(int index, int64_t v);
  Statement& bind(int index, double v);
  Statement& bind(int index, const std::string& v);
  Statement& bind(int index, const char* v) { return bind(index, std::string(v)); }
  Statement& bind_null(int index);
  template <typename T>
  Statement& bind(int index, const std::optional<T>& v) {
    return v ? bind(index, *v) : bind_null(index);
  }
  bool step();  // true while a row is available
  void run();   // steps to completion
  void reset();

  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string text(int col) const;
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::optional<double> maybe_real(int col) const { return is_null(col) ? std::nullopt : std::optional<double>(real(col)); }

 private:
  Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back unless commit() was called.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace kforge::archive
