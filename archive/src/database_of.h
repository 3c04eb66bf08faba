// The read models' one way to the archive's database (archive/ only): Archive's private member,
// through the one friend the public header names.
#pragma once

#include "kforge/archive/archive.h"

namespace kforge::archive::detail {

struct DatabaseAccess {
  static Database& of(Archive& ar) { return *ar.db_; }
};

inline Database& database_of(Archive& ar) {
  return DatabaseAccess::of(ar);
}

}  // namespace kforge::archive::detail
