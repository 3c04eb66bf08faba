#include "kforge/compile/compiler.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/line_channel.h"
#include "kforge/common/paths.h"
#include "kforge/common/process.h"
#include "kforge/common/sandbox.h"
#include "kforge/common/secrets.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/compile/source_check.h"

namespace kforge::compile {
namespace {

using nlohmann::json;

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kB64[(v >> s) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_decode(const std::string& in) {
  int table[256];
  std::fill(std::begin(table), std::end(table), -1);
  for (int k = 0; k < 64; ++k) table[static_cast<unsigned char>(kB64[k])] = k;
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char c : in) {
    int d = table[static_cast<unsigned char>(c)];
    if (d < 0) continue;
    v = (v << 6) | d;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xff);
    }
  }
  return out;
}

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, n);
  return p.substr(0, p.rfind('/'));
}

// A worker's own folder (its working directory, temporary files, NVRTC's precompiled headers),
// removed with it. This process holds a lock on `lock` while the folder is in use, so a folder
// whose lock is free belongs to a kforge that died; the next Compiler sweeps it away.
class PrivateDir {
 public:
  PrivateDir() = default;
  PrivateDir(std::string path, int lock_fd) : path(std::move(path)), lock_fd_(lock_fd) {}
  PrivateDir(PrivateDir&& o) noexcept { *this = std::move(o); }
  PrivateDir& operator=(PrivateDir&& o) noexcept {
    release();
    path = std::exchange(o.path, "");
    lock_fd_ = std::exchange(o.lock_fd_, -1);
    return *this;
  }
  ~PrivateDir() { release(); }

  std::string path;

 private:
  void release() {
    if (!path.empty()) remove_tree(path);
    if (lock_fd_ >= 0) ::close(lock_fd_);
    path.clear();
    lock_fd_ = -1;
  }
  int lock_fd_ = -1;
};

bool take_lock(int fd) {
  return ::flock(fd, LOCK_EX | LOCK_NB) == 0;
}

PrivateDir make_private_dir(const std::string& root) {
  make_directories(root);
  std::string pattern = root + "/worker-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw Error("cannot create a folder under " + root + ": " + std::strerror(errno));
  int fd = ::open((pattern + "/lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 || !take_lock(fd))
    throw Error("cannot lock " + pattern + "/lock: " + std::strerror(errno));
  return PrivateDir(pattern, fd);
}

// Removes the folders of workers whose kforge is gone (killed before it could clean up).
void sweep_private_dirs(const std::string& root) {
  DIR* d = ::opendir(root.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("worker-", 0) != 0) continue;
    std::string dir = root + "/" + name;
    int fd = ::open((dir + "/lock").c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      if (take_lock(fd)) stale.push_back(dir);
      ::close(fd);
    } else if (struct stat st{};
               ::stat(dir.c_str(), &st) == 0 && ::time(nullptr) - st.st_mtime > 60) {
      stale.push_back(dir);  // never locked: a kforge that died between mkdtemp and the lock
    }
  }
  ::closedir(d);
  for (const std::string& dir : stale) remove_tree(dir);
}

std::string find_worker(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("KFORGE_NVRTC_WORKER"); env && *env) return env;
  std::string next_to_me = self_dir() + "/kforge-nvrtc-worker";
  if (::access(next_to_me.c_str(), X_OK) == 0) return next_to_me;
  return KFORGE_WORKER_BUILD_PATH;
}

}  // namespace

std::string module_to_json(const Module& m) {
  json j;
  j["ok"] = m.ok;
  j["log"] = m.log;
  j["ptx"] = m.ptx;
  j["cubin"] = base64_encode(m.cubin);
  j["lowered_names"] = m.lowered_names;
  j["rejections"] = m.rejections;
  j["compile_ms"] = m.compile_ms;
  json res = json::object();
  for (const auto& [name, r] : m.resources)
    res[name] = {{"registers", r.registers},
                 {"barriers", r.barriers},
                 {"static_shared_bytes", r.static_shared_bytes},
                 {"stack_bytes", r.stack_bytes},
                 {"spill_store_bytes", r.spill_store_bytes},
                 {"spill_load_bytes", r.spill_load_bytes}};
  j["resources"] = res;
  return j.dump();
}

Module module_from_json(const std::string& text) {
  json j = json::parse(text);
  Module m;
  m.ok = j.at("ok").get<bool>();
  m.log = j.at("log").get<std::string>();
  m.ptx = j.at("ptx").get<std::string>();
  m.cubin = base64_decode(j.at("cubin").get<std::string>());
  m.lowered_names = j.at("lowered_names").get<std::vector<std::string>>();
  m.rejections = j.at("rejections").get<std::vector<std::string>>();
  m.compile_ms = j.at("compile_ms").get<double>();
  for (auto it = j.at("resources").begin(); it != j.at("resources").end(); ++it) {
    KernelResources r;
    r.registers = it.value().at("registers");
    r.barriers = it.value().at("barriers");
    r.static_shared_bytes = it.value().at("static_shared_bytes");
    r.stack_bytes = it.value().at("stack_bytes");
    r.spill_store_bytes = it.value().at("spill_store_bytes");
    r.spill_load_bytes = it.value().at("spill_load_bytes");
    m.resources[it.key()] = r;
  }
  return m;
}

std::string module_cache_key(const ModuleRequest& r) {
  NvrtcVersion v = nvrtc_version();
  json j;
  j["scheme"] = kCompileScheme;
  j["nvrtc"] = std::to_string(v.major) + "." + std::to_string(v.minor);
  j["arch"] = r.arch;
  ModuleRequest options_only;
  options_only.arch = r.arch;
  j["options"] = module_options(options_only);
  j["defines"] = r.defines;
  j["names"] = r.name_expressions;
  j["source_hash"] = content_hash(r.source);
  return content_hash(j.dump());
}

// A pool of kforge-nvrtc-worker processes speaking one JSON line each way.
class Compiler::Workers {
 public:
  Workers(size_t count, std::string path, std::string root, std::chrono::milliseconds limit)
      : path_(std::move(path)), root_(std::move(root)), limit_(limit) {
    slots_.resize(std::max<size_t>(count, 1));
    sweep_private_dirs(root_);
  }
  ~Workers() {
    for (auto& s : slots_) stop(s, std::chrono::milliseconds(2000));
  }

  // Returns the module, or a failed one saying why (timeout, crash). `restarted` counts
  // replacements.
  Module compile(const ModuleRequest& r, bool& timed_out, bool& restarted,
                 std::string& confinement) {
    size_t i = acquire();
    Slot& s = slots_[i];
    Module m;
    try {
      if (!s.process.running()) start(s, confinement);
      json req = {{"source", r.source},
                  {"arch", r.arch},
                  {"defines", r.defines},
                  {"names", r.name_expressions}};
      if (!write_line(s.to_child.get(), req.dump())) throw Error("the NVRTC worker's pipe closed");
      std::string reply;
      LineReader::Got rr =
          s.from_child_lines.next(reply, std::chrono::steady_clock::now() + limit_);
      if (rr == LineReader::Got::Timeout) {
        timed_out = true;
        restarted = true;
        stop(s);
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.1f", limit_.count() / 1000.0);
        m.log = std::string("NVRTC did not finish within ") + secs +
                " s; the compile was killed (simplify the source: macro or template blow-up, huge "
                "unrolling?)";
      } else if (rr != LineReader::Got::Line) {  // closed (no cap: TooLong cannot be)
        restarted = true;
        int status = stop(s);
        m.log = "the NVRTC worker died while compiling this source" +
                (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")"
                                     : std::string());
      } else {
        m = module_from_json(reply);
      }
    } catch (...) {
      stop(s);
      release(i);
      throw;
    }
    release(i);
    return m;
  }

 private:
  struct Slot {
    PrivateDir dir;
    Process process;
    UniqueFd to_child, from_child;
    LineReader from_child_lines;  // the worker's replies: no cap (a module is as large as it is)
    bool busy = false;
  };

  size_t acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      for (size_t i = 0; i < slots_.size(); ++i)
        if (!slots_[i].busy) {
          slots_[i].busy = true;
          return i;
        }
      cv_.wait(lock);
    }
  }
  void release(size_t i) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slots_[i].busy = false;
    }
    cv_.notify_one();
  }

  // Starts a worker and waits for its hello (it has loaded NVRTC and confined itself), so that
  // its start-up does not count against the first compile's time limit.
  void start(Slot& s, std::string& confinement) {
    s.dir = make_private_dir(root_);
    Pipe in = make_pipe(), out = make_pipe();
    SpawnOptions o;
    // No API keys, nothing the worker does not need; its temporary files in its own folder.
    o.env = child_environment({{"TMPDIR", s.dir.path}});
    o.argv = {path_, "--dir", s.dir.path, "--time-limit-ms", std::to_string(limit_.count())};
    o.fds = {{in.read.get(), 0}, {out.write.get(), 1}};
    try {
      s.process = Process::spawn(o);
    } catch (const Error& e) {
      throw Error(std::string("cannot start the NVRTC worker: ") + e.what());
    }
    s.to_child = std::move(in.write);
    s.from_child = std::move(out.read);
    // The child's ends are the child's: a worker that dies before its hello is seen at once (the
    // pipe closes), not when the hello's deadline passes.
    in.read.reset();
    out.write.reset();
    s.from_child_lines.reset(s.from_child.get());
    std::string hello;
    if (s.from_child_lines.next(hello, std::chrono::steady_clock::now() +
                                           std::max(limit_, std::chrono::milliseconds(60000))) !=
        LineReader::Got::Line) {
      int status = stop(s);
      throw Error("the NVRTC worker " + path_ + " did not start (" + describe_exit(status) + ")");
    }
    confinement = json::parse(hello).value("confinement", "");
  }

  // Closing its stdin lets the worker end by itself (NVRTC removes its precompiled headers); one
  // that does not within `grace` is killed. Its folder goes with it.
  int stop(Slot& s, std::chrono::milliseconds grace = std::chrono::milliseconds(0)) {
    s.to_child.reset();
    s.from_child.reset();
    int status = 0;
    if (std::optional<int> ended = s.process.wait_exit(grace))
      status = *ended;
    else
      status = s.process.kill();
    s.process = Process();
    s.dir = PrivateDir();
    return status;
  }

  std::string path_;
  std::string root_;  // the workers' folders
  std::chrono::milliseconds limit_;
  std::vector<Slot> slots_;
  std::mutex mutex_;
  std::condition_variable cv_;
};

Compiler::Compiler(CompilerOptions options) : options_(std::move(options)) {
  if (options_.cache_dir.empty()) options_.cache_dir = (cache_dir() / "modules").string();
  if (options_.work_dir.empty()) options_.work_dir = (cache_dir() / "nvrtc").string();
  if (!options_.in_process)
    workers_ = std::make_unique<Workers>(options_.workers, find_worker(options_.worker_path),
                                         options_.work_dir, options_.time_limit);
}

Compiler::~Compiler() = default;

namespace {

Module refused_module(const std::vector<std::string>& problems) {
  Module m;
  m.log = "kforge did not compile this source:";
  for (const std::string& p : problems) m.log += std::string("\n") + kCandidateFileName + ": " + p;
  return m;
}

}  // namespace

Module Compiler::compile(const ModuleRequest& request) {
  // What NVRTC would read on the candidate's behalf is checked first (even a cached module's
  // source: a cache written before a check existed must not serve what the check refuses).
  std::vector<std::string> problems =
      preprocessing_problems(request.source, candidate_include_dirs());
  for (const std::string& name : request.name_expressions)
    if (auto why = name_expression_problem(name))
      problems.push_back("kernel name expression: " + *why);
  if (!problems.empty()) return refused_module(problems);
  std::string key, file;
  if (options_.use_cache) {
    key = module_cache_key(request);
    file = options_.cache_dir + "/" + key.substr(0, 2) + "/" + key + ".json";
    if (auto text = read_file(file)) {
      try {
        Module m = module_from_json(*text);
        m.cache_hit = true;
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.hits;
        return m;
      } catch (const json::exception&) {
        // A damaged cache entry is a miss; the compile below replaces it.
      }
    }
  }
  Module m;
  bool timed_out = false, restarted = false;
  std::string confinement;
  if (workers_) {
    ModuleRequest r = request;
    r.use_pch = true;
    m = workers_->compile(r, timed_out, restarted, confinement);
  } else {
    m = compile_module_here(request);
  }
  m.log = redact_secrets(std::move(m.log));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
    stats_.timeouts += timed_out;
    stats_.worker_restarts += restarted;
    if (!confinement.empty()) stats_.confinement = confinement;
  }
  // Timeouts and crashes are not cached: they depend on the machine and the limit.
  if (options_.use_cache && !timed_out && !restarted) {
    make_directories(file.substr(0, file.rfind('/')));
    write_file_atomic(file, module_to_json(m));
  }
  return m;
}

CompilerStats Compiler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace kforge::compile
