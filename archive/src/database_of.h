// The read models' one way to the archive's database (archive/ only): when Archive::db() leaves the
// public header, this is the one line that changes.
#pragma once

#include "kforge/archive/archive.h"

namespace kforge::archive::detail {

inline Database& database_of(Archive& ar) {
  return ar.db();
}

}  // namespace kforge::archive::detail
