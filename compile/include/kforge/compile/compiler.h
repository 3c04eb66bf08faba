// The compile service: a content-addressed on-disk cache in front of long-lived NVRTC worker
// processes. A worker that runs past the time limit (a pathological source) or crashes is killed
// and replaced; the candidate gets a compile error saying so, and the run goes on.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "kforge/compile/module.h"

namespace kforge::compile {

struct CompilerOptions {
  size_t workers = 1;                           // child processes (compiles in parallel)
  std::chrono::milliseconds time_limit{60000};  // per compile
  bool use_cache = true;
  std::string cache_dir;    // default: kforge::cache_dir()/modules
  bool in_process = false;  // compile in this process (no time limit)
  std::string worker_path;  // default: found next to this executable
  std::string work_dir;     // workers' own folders; default: kforge::cache_dir()/nvrtc
};

struct CompilerStats {
  int64_t hits = 0, misses = 0, timeouts = 0, worker_restarts = 0;
  std::string confinement;  // how the last worker that answered was confined (common/sandbox.h)
};

// Cache key of a request: its source, options, architecture, NVRTC version and kforge's compile
// scheme (docs/answer-format.md, "Identity").
std::string module_cache_key(const ModuleRequest& request);

class Compiler {
 public:
  explicit Compiler(CompilerOptions options = {});
  ~Compiler();
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  Module compile(const ModuleRequest& request);  // thread-safe
  CompilerStats stats() const;
  const CompilerOptions& options() const { return options_; }

 private:
  class Workers;
  CompilerOptions options_;
  std::unique_ptr<Workers> workers_;
  mutable std::mutex mutex_;
  CompilerStats stats_;
};

// Worker side (kforge-nvrtc-worker's main): `--dir FOLDER --time-limit-ms N`. Confines itself
// to the CUDA headers and FOLDER (common/sandbox.h), works in FOLDER, and serves JSON-lines
// requests on stdin/stdout until stdin closes; ends when the parent does, or a compile overruns.
int run_compile_worker(int argc, char** argv);

// Module <-> JSON (the cache file and the worker's reply).
std::string module_to_json(const Module& m);
Module module_from_json(const std::string& text);

}  // namespace kforge::compile
