// The NVRTC worker's side (kforge-nvrtc-worker): confines itself, then serves compile requests.
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kforge/common/sandbox.h"
#include "kforge/compile/compiler.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/compile/source_check.h"

namespace kforge::compile {
namespace {

using nlohmann::json;

struct WorkerArgs {
  std::string dir;
  int64_t time_limit_ms = 60000;
};

// The parent is gone when stdin's other end closes, even while NVRTC is busy: end then, rather
// than compile on for nobody.
void watch_parent() {
  std::thread([] {
    for (;;) {
      pollfd p{0, 0, 0};
      int rc = ::poll(&p, 1, -1);
      if (rc > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) ::_exit(0);
    }
  }).detach();
}

// Loads what NVRTC loads lazily (its builtins library) while the files are still reachable.
void warm_up() {
  ModuleRequest r;
  r.source = "__global__ void kforge_warm_up() {}\n";
  compile_module_here(r);
}

}  // namespace

int run_compile_worker(int argc, char** argv) {
  WorkerArgs a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--dir")
      a.dir = argv[i + 1];
    else if (flag == "--time-limit-ms")
      a.time_limit_ms = std::stoll(argv[i + 1]);
  }
  if (a.dir.empty() || argc % 2 == 0) {
    std::cerr << "usage: kforge-nvrtc-worker --dir FOLDER [--time-limit-ms N]\n"
                 "(started by kforge; it compiles only inside FOLDER's confinement)\n";
    return 2;
  }
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  watch_parent();
  warm_up();
  // Relative #include paths resolve against the working directory: an empty folder of its own.
  if (::chdir(a.dir.c_str()) != 0) {
    std::cerr << "kforge-nvrtc-worker: cannot enter " << a.dir << ": " << std::strerror(errno)
              << "\n";
    return 2;
  }
  std::vector<std::string> readable = candidate_include_dirs();
  if (std::string lib = nvrtc_library_dir(); !lib.empty()) readable.push_back(lib);
  Confinement confinement = confine_files(readable, {a.dir});
  std::cout << json{{"ready", true}, {"confinement", confinement.how}}.dump() << "\n" << std::flush;

  unsigned alarm_s = static_cast<unsigned>((a.time_limit_ms + 999) / 1000 + 1);
  std::string line;
  while (std::getline(std::cin, line)) {
    Module m;
    try {
      json req = json::parse(line);
      ModuleRequest r;
      r.source = req.at("source").get<std::string>();
      r.arch = req.at("arch").get<std::string>();
      r.defines = req.at("defines").get<std::map<std::string, int64_t>>();
      r.name_expressions = req.at("names").get<std::vector<std::string>>();
      r.use_pch = true;
      r.pch_dir = a.dir;
      // Its own limit too (the parent kills it at the same time): SIGALRM ends the process.
      ::alarm(alarm_s);
      m = compile_module_here(r);
      ::alarm(0);
    } catch (const std::exception& e) {
      m.ok = false;
      m.log = std::string("kforge-nvrtc-worker: ") + e.what();
    }
    std::cout << module_to_json(m) << "\n" << std::flush;
  }
  return 0;
}

}  // namespace kforge::compile
