// A candidate's identity: what the archive, the cache and the loop key a candidate by. Here, not in
// compile/, so that the archive can recompute the identity of what it imports.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace kforge {

// XXH3-128 of length-prefixed source, canonical plan JSON and sorted NAME=value tunables.
std::string candidate_identity(const std::string& source, const nlohmann::json& plan,
                               const std::map<std::string, int64_t>& tunables);

}  // namespace kforge
