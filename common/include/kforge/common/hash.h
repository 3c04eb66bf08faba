// Content hashes (XXH3-128, as 32 hex digits): task versions, candidate identity, cache keys.
#pragma once

#include <string>
#include <string_view>

namespace kforge {

std::string content_hash(std::string_view bytes);

}  // namespace kforge
