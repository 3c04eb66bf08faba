#include "kforge/common/identity.h"

#include <functional>

#include "kforge/common/hash.h"

namespace kforge {

std::string candidate_identity(const std::string& source, const nlohmann::json& plan,
                               const std::map<std::string, int64_t>& tunables) {
  std::string tuned;
  for (const auto& [k, v] : tunables) tuned += k + "=" + std::to_string(v) + "\n";
  std::string canonical = plan.dump();  // nlohmann::json objects are key-sorted
  std::string buf;
  for (const std::string& part : {std::cref(source), std::cref(canonical), std::cref(tuned)})
    buf += std::to_string(part.size()) + ":" + part;
  return content_hash(buf);
}

}  // namespace kforge
