// The archive's one error type, apart from its SQLite handle (sqlite.h), so that a command can
// catch it without seeing the database.
#pragma once

#include "kforge/common/error.h"

namespace kforge::archive {

// A database problem the user can act on (locked, corrupt, newer schema): names the file.
class ArchiveError : public Error {
 public:
  using Error::Error;
};

// What a command asked for is not in the archive: no archive file, no such run or candidate. The
// command line exits 2 for it, as for a task that does not exist.
class ArchiveMissing : public ArchiveError {
 public:
  using ArchiveError::ArchiveError;
};

}  // namespace kforge::archive
