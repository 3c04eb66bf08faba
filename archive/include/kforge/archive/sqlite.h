// SQLite, owned: a connection and prepared statements with checked calls. Only archive/ uses it.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kforge/archive/error.h"

namespace kforge::archive {

class Statement;

// How a file is opened: ReadOnly never writes (no journal mode change, no schema, `query_only`).
enum class Access { ReadOnly, ReadWrite, Create };

class Database {
 public:
  // Opens with foreign keys and a busy timeout. Nothing is written: the caller checks what the file
  // is before it switches the journal to WAL (use_wal) or changes anything.
  Database(const std::string& path, Access access, int busy_timeout_ms = 5000);
  Database(const std::string& path, bool create, int busy_timeout_ms = 5000)
      : Database(path, create ? Access::Create : Access::ReadWrite, busy_timeout_ms) {}
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  void exec(const std::string& sql);
  // WAL, synchronous = NORMAL: one writer and many readers at once. Only for a kforge archive.
  void use_wal();
  bool read_only() const { return access_ == Access::ReadOnly; }
  Statement prepare(const std::string& sql);
  int64_t last_insert_id() const { return sqlite3_last_insert_rowid(db_); }
  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }
  [[noreturn]] void fail(int rc, const std::string& what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  Access access_;
};

class Statement {
 public:
  Statement(Database& db, const std::string& sql);
  ~Statement();
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_), sql_(std::move(o.sql_)) {
    o.stmt_ = nullptr;
  }
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
  std::optional<double> maybe_real(int col) const {
    return is_null(col) ? std::nullopt : std::optional<double>(real(col));
  }

 private:
  Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back unless commit() was called. Inside another transaction
// it is a SAVEPOINT, so a caller can make several writes (an import line) one atomic unit.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool nested_ = false;
  bool done_ = false;
};

}  // namespace kforge::archive
