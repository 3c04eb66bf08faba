#include "python_places.h"

#include <cstdlib>

namespace kforge::tasks {

std::vector<std::string> python_read_places(const std::vector<std::string>& places) {
  std::vector<std::string> read;
  std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  for (std::string p : places) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    if (p == "/" || (!home.empty() && (home == p || home.rfind(p + "/", 0) == 0))) continue;
    read.push_back(p);
  }
  for (const char* lib : {"/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64",
                          "/usr/local/lib", "/etc/ld.so.cache", "/dev/urandom"})
    read.push_back(lib);
  return read;
}

}  // namespace kforge::tasks
