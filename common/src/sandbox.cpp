#include "kforge/common/sandbox.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>

#include "kforge/common/error.h"
#include "kforge/common/secrets.h"

extern char** environ;

namespace kforge {
namespace {

// Access rights newer than the kernel headers Debian 12 ships (linux/landlock.h of 6.1).
constexpr uint64_t kAccessFsRefer = 1ULL << 13;     // ABI 2
constexpr uint64_t kAccessFsTruncate = 1ULL << 14;  // ABI 3
constexpr uint64_t kAccessFsIoctlDev = 1ULL << 15;  // ABI 5

bool kept_for_child(const std::string& name) {
  static const std::set<std::string> exact = {"PATH", "HOME", "LANG", "TZ", "TMPDIR", "LD_LIBRARY_PATH"};
  if (is_secret_name(name)) return false;
  return exact.count(name) || name.rfind("LC_", 0) == 0 || name.rfind("CUDA_", 0) == 0 || name.rfind("NVIDIA_", 0) == 0;
}

uint64_t read_rights() { return LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR; }

uint64_t all_rights(long abi) {
  uint64_t r = read_rights() | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
               LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
               LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
               LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) r |= kAccessFsRefer;
  if (abi >= 3) r |= kAccessFsTruncate;
  if (abi >= 5) r |= kAccessFsIoctlDev;
  return r;
}

class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::vector<std::string> child_environment(const std::map<std::string, std::string>& set) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    if (kept_for_child(name) && !set.count(name)) out.push_back(entry);
  }
  for (const auto& [name, value] : set) out.push_back(name + "=" + value);
  return out;
}

std::string landlock_support() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) return std::string("no Landlock in this kernel (") + std::strerror(errno) + ")";
  return "Landlock ABI " + std::to_string(abi);
}

std::vector<char*> c_string_array(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

Confinement confine_files(const std::vector<std::string>& read_dirs, const std::vector<std::string>& write_dirs) {
  Confinement c;
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    c.how = std::string("not confined: the kernel offers no Landlock (") + std::strerror(errno) + ")";
    return c;
  }
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = all_rights(abi);
  OwnedFd ruleset(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0)));
  if (ruleset.get() < 0) throw Error(std::string("landlock_create_ruleset failed: ") + std::strerror(errno));
  std::string read_list, write_list;
  auto allow = [&](const std::string& dir, uint64_t rights, std::string& list) {
    OwnedFd at(::open(dir.c_str(), O_PATH | O_CLOEXEC));
    if (at.get() < 0) return;  // absent: nothing to allow
    landlock_path_beneath_attr rule{};
    rule.allowed_access = rights;
    rule.parent_fd = at.get();
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
      throw Error("landlock_add_rule for " + dir + " failed: " + std::strerror(errno));
    list += (list.empty() ? "" : ", ") + dir;
  };
  for (const std::string& d : read_dirs) allow(d, read_rights(), read_list);
  for (const std::string& d : write_dirs) allow(d, all_rights(abi), write_list);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw Error(std::string("PR_SET_NO_NEW_PRIVS failed: ") + std::strerror(errno));
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0)
    throw Error(std::string("landlock_restrict_self failed: ") + std::strerror(errno));
  c.active = true;
  c.how = "Landlock ABI " + std::to_string(abi) + ": read " + (read_list.empty() ? "nothing" : read_list) + "; write " +
          (write_list.empty() ? "nothing" : write_list);
  return c;
}

}  // namespace kforge
