#include "kforge/common/sandbox.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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
  static const std::set<std::string> exact = {"PATH", "HOME",   "LANG",
                                              "TZ",   "TMPDIR", "LD_LIBRARY_PATH"};
  if (is_secret_name(name)) return false;
  return exact.count(name) || name.rfind("LC_", 0) == 0 || name.rfind("CUDA_", 0) == 0 ||
         name.rfind("NVIDIA_", 0) == 0;
}

uint64_t read_rights() {
  return LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
}

uint64_t all_rights(long abi) {
  uint64_t r = read_rights() | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
               LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
               LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
               LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
               LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
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

namespace {

// landlock_ruleset_attr as of ABI 6 (Debian 12's header has only the first field); the kernel
// takes the longer form as long as the fields it does not know are zero.
struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;  // ABI 4
  uint64_t scoped = 0;              // ABI 6
};
constexpr uint64_t kNetBindTcp = 1ULL << 0, kNetConnectTcp = 1ULL << 1;
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0, kScopeSignal = 1ULL << 1;

// The rights that apply to a file (not a folder): a rule beneath a file may name only these.
uint64_t file_rights() {
  return LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
         kAccessFsTruncate | kAccessFsIoctlDev;
}

}  // namespace

LandlockRules::LandlockRules(const FileAccess& access) {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    confinement_.how =
        std::string("not confined: the kernel offers no Landlock (") + std::strerror(errno) + ")";
    return;
  }
  RulesetAttr attr;
  attr.handled_access_fs = all_rights(abi);
  if (access.no_tcp && abi >= 4)  // and no port rule: no TCP at all
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
  if (access.scoped && abi >= 6) attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
  size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  OwnedFd ruleset(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0)));
  if (ruleset.get() < 0)
    throw Error(std::string("landlock_create_ruleset failed: ") + std::strerror(errno));
  std::string read_list, write_list;
  auto allow = [&](const std::string& path, uint64_t rights, std::string& list) {
    OwnedFd at(::open(path.c_str(), O_PATH | O_CLOEXEC));
    if (at.get() < 0) return;  // absent: nothing to allow
    struct stat st {};
    if (::fstat(at.get(), &st) != 0) return;
    landlock_path_beneath_attr rule{};
    rule.allowed_access =
        S_ISDIR(st.st_mode) ? rights : rights & file_rights() & attr.handled_access_fs;
    rule.parent_fd = at.get();
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
      throw Error("landlock_add_rule for " + path + " failed: " + std::strerror(errno));
    list += (list.empty() ? "" : ", ") + path;
  };
  for (const std::string& d : access.read) allow(d, read_rights(), read_list);
  for (const std::string& d : access.write) allow(d, all_rights(abi), write_list);
  fd_ = ::fcntl(ruleset.get(), F_DUPFD_CLOEXEC, 0);
  if (fd_ < 0)
    throw Error(std::string("cannot keep the Landlock rule set: ") + std::strerror(errno));
  confinement_.active = true;
  confinement_.how = "Landlock ABI " + std::to_string(abi) + ": read " +
                     (read_list.empty() ? "nothing" : read_list) + "; write " +
                     (write_list.empty() ? "nothing" : write_list) +
                     (attr.handled_access_net ? "; no TCP" : "") +
                     (attr.scoped ? "; signals only inside" : "");
}

LandlockRules::~LandlockRules() {
  if (fd_ >= 0) ::close(fd_);
}

int LandlockRules::apply() const noexcept {
  if (fd_ < 0) return 0;  // no Landlock here: nothing to apply (confinement().active says so)
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::syscall(SYS_landlock_restrict_self, fd_, 0) != 0) return errno;
  return 0;
}

Confinement confine_files(const std::vector<std::string>& read_dirs,
                          const std::vector<std::string>& write_dirs) {
  FileAccess access;
  access.read = read_dirs;
  access.write = write_dirs;
  LandlockRules rules(access);
  if (int err = rules.apply())
    throw Error(std::string("confining with Landlock failed: ") + std::strerror(err));
  return rules.confinement();
}

}  // namespace kforge
