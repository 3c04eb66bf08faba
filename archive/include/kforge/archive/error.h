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

}  // namespace kforge::archive
