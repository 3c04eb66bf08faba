// What kforge's child processes (NVRTC workers, GPU runners, compute-sanitizer, the KernelBench
// importer's Python) may see and touch. They start with a minimal environment: no API keys,
// nothing they do not need. Those that run or read untrusted input are also confined with Linux
// Landlock where the kernel offers it: the NVRTC worker confines itself (confine_files); a child
// that kforge starts confined gets its rules between fork and exec (Process::spawn with
// SpawnOptions::confine), one rule set either way (LandlockRules).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kforge {

// The environment for a child: from this process's, only PATH, HOME, LANG, LC_*, TZ, TMPDIR,
// LD_LIBRARY_PATH and the CUDA_* / NVIDIA_* variables, never one whose name says it holds a
// secret (is_secret_name); then `set` (added or replacing). "NAME=value" entries.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& set = {});

// `strings` as the null-terminated array of C strings that execve and posix_spawn take (argv,
// envp); valid while `strings` lives unchanged.
std::vector<char*> c_string_array(const std::vector<std::string>& strings);

// How far a process's file access is confined.
struct Confinement {
  bool active = false;  // false: the kernel offers no Landlock (or refused it); see `how`
  std::string how;      // "Landlock ABI 4: read ..., write ..." or why not
};

// Whether this kernel offers Landlock: "Landlock ABI N", or why not (no side effects).
std::string landlock_support();

// What a confined process may reach besides its open descriptors.
struct FileAccess {
  std::vector<std::string> read;  // read, list and execute beneath these folders (or these files)
  std::vector<std::string>
      write;            // also write, create and remove beneath these (or write these files)
  bool no_tcp = false;  // no TCP connect nor bind (Landlock ABI 4 and later)
  // No signals to, nor abstract Unix sockets of, processes outside the confinement (ABI 6 and
  // later); with Landlock of any ABI it can neither trace nor read the /proc files of those.
  bool scoped = false;
};

// A Landlock rule set, made in this process and applied to the process to confine: this one
// (confine_files) or a child between fork and exec (SpawnOptions::confine). Paths that do not
// exist are left out. Throws kforge::Error only when a step fails after the kernel said Landlock
// is there.
class LandlockRules {
 public:
  explicit LandlockRules(const FileAccess& access);
  ~LandlockRules();
  LandlockRules(const LandlockRules&) = delete;
  LandlockRules& operator=(const LandlockRules&) = delete;
  // active: the rules will hold; else `how` says why not (no Landlock here).
  const Confinement& confinement() const { return confinement_; }
  // Confines the calling process (and its future children) for good: no new privileges, then
  // the rules. System calls only, so a forked child may call it before exec. 0, or an errno value.
  int apply() const noexcept;
  // The rule set's descriptor (-1 without Landlock), to hand to a confined process that confines
  // its own children one layer further (landlock_restrict_self on it): a process of a deeper
  // layer can neither trace, nor open the /proc files of, nor (ABI 6) signal one of a shallower.
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  Confinement confinement_;
};

// Confines this process (and its future children), for good: from now on it may read (and list,
// and map for execution) only beneath `read_dirs`, and read and write only beneath `write_dirs`.
// Paths that do not exist are left out. Not undoable; a harness error (kforge::Error) only when a
// step fails after the kernel said Landlock is there.
Confinement confine_files(const std::vector<std::string>& read_dirs,
                          const std::vector<std::string>& write_dirs);

// How Process::spawn confines a child before it runs a single instruction of its program.
struct ChildConfinement {
  const LandlockRules* files = nullptr;  // when given and active; must outlive the spawn call
  int64_t memory_bytes = 0;              // RLIMIT_DATA; 0: unchanged
  int64_t cpu_seconds = 0;               // RLIMIT_CPU (SIGXCPU, SIGKILL 5 s later); 0: unchanged
  std::string workdir;                   // its working folder; "": this process's
  // SIGKILL when the spawning thread ends (PR_SET_PDEATHSIG): spawn from one that outlives it.
  bool die_with_parent = true;
};

}  // namespace kforge
