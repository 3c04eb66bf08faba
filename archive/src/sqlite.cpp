#include "kforge/archive/sqlite.h"

#include "kforge/common/secrets.h"

namespace kforge::archive {

Database::Database(const std::string& path, Access access, int busy_timeout_ms)
    : path_(path), access_(access) {
  bool create = access == Access::Create;
  int flags = (access == Access::ReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
              SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw ArchiveError(path + ": cannot open the archive: " + msg +
                       (create ? "" : " (create it with a command that writes, or pass --db)"));
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms);
  sqlite3_extended_result_codes(db_, 1);
  exec("PRAGMA foreign_keys = ON");
  if (access == Access::ReadOnly) exec("PRAGMA query_only = 1");
}

void Database::use_wal() {
  // WAL: one writer and many readers at once; a crash never leaves half a transaction.
  Statement wal(*this, "PRAGMA journal_mode = WAL");
  wal.step();
  exec("PRAGMA synchronous = NORMAL");
}

Database::~Database() {
  if (db_) sqlite3_close_v2(db_);
}

void Database::fail(int rc, const std::string& what) const {
  std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
    throw ArchiveError(path_ + ": the archive is locked by another process (" + msg +
                       "); try again when it finishes");
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB)
    throw ArchiveError(path_ + ": the archive is damaged or not a kforge archive (" + msg +
                       "); nothing was written. Keep the file for inspection and use another --db");
  if (primary == SQLITE_READONLY)
    throw ArchiveError(path_ + ": the archive is read-only (" + msg + ")");
  if (primary == SQLITE_FULL)
    throw ArchiveError(path_ + ": the disk is full (" + msg + "); nothing was written");
  throw Error(path_ + ": SQLite failed in " + what + ": " + msg);
}

void Database::exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) fail(rc, sql.substr(0, 60));
}

Statement Database::prepare(const std::string& sql) {
  return Statement(*this, sql);
}

Statement::Statement(Database& db, const std::string& sql) : db_(&db), sql_(sql) {
  int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr);
  if (rc != SQLITE_OK) db.fail(rc, "prepare: " + sql.substr(0, 60));
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int i, int64_t v) {
  if (int rc = sqlite3_bind_int64(stmt_, i, v); rc != SQLITE_OK) db_->fail(rc, "bind");
  return *this;
}
Statement& Statement::bind(int i, double v) {
  if (int rc = sqlite3_bind_double(stmt_, i, v); rc != SQLITE_OK) db_->fail(rc, "bind");
  return *this;
}
Statement& Statement::bind(int i, const std::string& text) {
  // No secret reaches the archive, whatever route its text took (kforge/common/secrets.h).
  std::string v = redact_secrets(text);
  if (int rc = sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
      rc != SQLITE_OK)
    db_->fail(rc, "bind");
  return *this;
}
Statement& Statement::bind_null(int i) {
  if (int rc = sqlite3_bind_null(stmt_, i); rc != SQLITE_OK) db_->fail(rc, "bind");
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail(rc, sql_.substr(0, 60));
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int col) const {
  const unsigned char* t = sqlite3_column_text(stmt_, col);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt_, col))
           : std::string();
}

Transaction::Transaction(Database& db)
    : db_(db), nested_(sqlite3_get_autocommit(db.handle()) == 0) {
  db_.exec(nested_ ? "SAVEPOINT kforge_nested" : "BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (done_) return;
  if (nested_)
    sqlite3_exec(db_.handle(), "ROLLBACK TO kforge_nested; RELEASE kforge_nested", nullptr, nullptr,
                 nullptr);
  else
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec(nested_ ? "RELEASE kforge_nested" : "COMMIT");
  done_ = true;
}

}  // namespace kforge::archive
