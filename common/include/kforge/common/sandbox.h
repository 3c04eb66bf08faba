// What kforge's child processes (NVRTC workers, GPU runners, compute-sanitizer) may see and touch.
// They start with a minimal environment: no API keys, nothing they do not need. The NVRTC worker,
// which reads files on a candidate's behalf, also confines itself to the CUDA headers with Linux
// Landlock where the kernel offers it.
#pragma once

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

// Confines this process (and its future children), for good: from now on it may read (and list,
// and map for execution) only beneath `read_dirs`, and read and write only beneath `write_dirs`.
// Paths that do not exist are left out. Not undoable; a harness error (kforge::Error) only when a
// step fails after the kernel said Landlock is there.
Confinement confine_files(const std::vector<std::string>& read_dirs, const std::vector<std::string>& write_dirs);

}  // namespace kforge
