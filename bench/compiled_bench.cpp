// torch.compile's baselines on the GPU machine (issue 20; docs/benchmarks.md, "torch.compile"):
//   kforge-bench-compiled [--jobs N] [--python PY] [--build-only] [--no-max-autotune] --out DIR
//   TASKS...
// 1. builds every task's AOTInductor packages (one per compiled kind: default mode, max-autotune),
//    N at a time (the build cost per package: the helper's seconds, from a cold or warm
//    TorchInductor cache as the machine has it);
// 2. per task, kforge's baselines (every kind, the compiled ones from their packages) as the judge
//    times them, and each compiled kind timed by torch.compile from Python with CUDA events on the
//    judge's own input sets (saved to DIR) in the same mode, the same protocol (kforge_inductor.py
//    time): the fidelity ratio.
// Prints a markdown table and one JSON line per task.
#include <torch/serialize.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/paths.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/compiled_reference.h"
#include "kforge/verify/gpu_generator.h"
#include "kforge/verify/judge.h"
#include "kforge/verify/memory.h"

using namespace kforge;
using nlohmann::json;

namespace {

std::string fixed(double v, int digits = 4) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v;
  return o.str();
}

// The judge's pool for measure_baselines (seed 1): the same sets, drawn the same way.
std::vector<torch::Tensor> pool_of(const tasks::Task& t, int sets) {
  std::vector<torch::Tensor> flat;
  for (int k = 0; k < sets; ++k)
    for (size_t i = 0; i < t.inputs.size(); ++i)
      flat.push_back(verify::generate_cuda(t, i, t.dims, 1 + 50 + static_cast<uint64_t>(k), 0, 0));
  return flat;
}

// torch.compile timed by the helper in Python in `mode` on `flat` (the pool): its JSON line.
json python_time(const tasks::Task& t, const std::vector<torch::Tensor>& flat,
                 const std::string& python, const std::string& dir, std::string_view mode) {
  std::string base = dir + "/" + content_hash(t.id() + " " + std::string(mode)).substr(0, 12);
  std::vector<torch::Tensor> cpu;
  for (const auto& x : flat) cpu.push_back(x.cpu());
  std::vector<char> bytes = torch::pickle_save(c10::IValue(c10::List<torch::Tensor>(cpu)));
  std::ofstream(base + ".pt", std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  json inputs = json::array();
  for (size_t i = 0; i < t.inputs.size(); ++i) inputs.push_back({{"name", t.inputs[i].name}});
  json spec = {{"task", t.id()},
               {"source", t.reference},
               {"inputs", inputs},
               {"allow_tf32", t.allow_tf32},
               {"mode", mode},
               {"device", 0},
               {"inputs_file", base + ".pt"},
               {"expect_torch", ""}};
  write_file_atomic(base + ".json", spec.dump());
  std::string helper = base + ".py";
  write_file_atomic(
      helper, *read_file(std::string(KFORGE_SOURCE_DIR) + "/verify/inductor/kforge_inductor.py"));
  std::string cmd = python + " " + helper + " time " + base + ".json 2>" + base + ".log";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  json j = json::parse(out.substr(0, out.find('\n')), nullptr, false);
  return j.is_object() ? j : json{{"ok", false}, {"reason", "no answer (" + base + ".log)"}};
}

}  // namespace

int main(int argc, char** argv) {
  kforge::verify::keep_large_cached_blocks_whole();  // as kforge does: the same allocator
  int jobs = 4;
  bool build_only = false, max_autotune = true;
  std::string python, out_dir;
  std::vector<std::string> specs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--jobs" && i + 1 < argc)
      jobs = std::stoi(argv[++i]);
    else if (a == "--python" && i + 1 < argc)
      python = argv[++i];
    else if (a == "--out" && i + 1 < argc)
      out_dir = argv[++i];
    else if (a == "--build-only")
      build_only = true;
    else if (a == "--no-max-autotune")
      max_autotune = false;
    else
      specs.push_back(a);
  }
  if (specs.empty() || out_dir.empty()) {
    std::cerr << "usage: kforge-bench-compiled [--jobs N] [--python PY] [--build-only] "
                 "[--no-max-autotune] --out DIR TASKS...\n";
    return 2;
  }
  make_directories(out_dir);
  std::vector<tasks::Task> all;
  for (const std::string& s : specs)
    for (const auto& f : tasks::resolve_tasks(s, std::string(KFORGE_SOURCE_DIR) + "/tasks"))
      all.push_back(tasks::load_task(f));
  verify::VerifyOptions options;
  options.compiled.python = python;
  options.compiled.max_autotune = max_autotune;  // off: its packages are not built
  if (python.empty()) python = python_candidates().at(0);

  // 1. The packages, `jobs` at a time.
  options.compiled.build_jobs = jobs;
  std::vector<const tasks::Task*> pointers;
  for (const tasks::Task& t : all) pointers.push_back(&t);
  const std::vector<BaselineKind> kinds = verify::compiled_kinds();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<verify::CompiledPackage> packages = verify::compiled_packages(
      pointers, 0, options.compiled, [](const tasks::Task& t, const verify::CompiledPackage& p) {
        std::cerr << "built " << t.id() << " (" << *verify::compiled_mode(p.kind) << ") in "
                  << fixed(p.build_s, 1) << " s"
                  << (p.absent.empty() ? "" : ": absent: " + p.absent) << std::endl;
      });
  double build_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << packages.size() << " package(s) in " << fixed(build_wall, 1) << " s wall, " << jobs
            << " at a time" << std::endl;
  if (build_only) return 0;

  // 2. Baselines in the judge's way, and each compiled kind from Python on the same sets.
  std::cout << "| task | eager ms | scripted ms |";
  for (BaselineKind kind : kinds) {
    std::string label(baseline_info(kind).label);
    std::cout << " " << label << " build s | " << label << " ms | Python " << label
              << " ms | kforge / Python |";
  }
  std::cout << "\n|---|---:|---:|";
  for (size_t i = 0; i < kinds.size(); ++i) std::cout << "---:|---:|---:|---:|";
  std::cout << "\n";
  std::map<BaselineKind, std::vector<double>> ratios;
  double build_sum = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    const tasks::Task& t = all[k];
    verify::Baselines b = verify::measure_baselines(t, options);
    BaselineTimes times = verify::medians(b.list);
    json line = {{"task", t.id()}, {"baselines", times.to_json()}, {"build_s", json::object()}};
    std::cout << "| " << t.id() << " | " << fixed(*times.ms(BaselineKind::Eager)) << " | "
              << fixed(*times.ms(BaselineKind::Scripted)) << " |";
    for (size_t i = 0; i < kinds.size(); ++i) {
      const verify::CompiledPackage& package = packages[k * kinds.size() + i];
      std::string_view mode = *verify::compiled_mode(kinds[i]);
      std::string name(to_string(kinds[i]));
      build_sum += package.build_s;
      line["build_s"][name] = package.build_s;
      std::optional<double> ms = times.ms(kinds[i]);
      std::string py = "-", ratio = "-";
      if (ms) {
        json p = python_time(t, pool_of(t, options.timing.pool), python, out_dir, mode);
        line["python"][name] = p;
        if (p.value("ok", false)) {
          double r = *ms / p["median_ms"].get<double>();
          ratios[kinds[i]].push_back(r);
          py = fixed(p["median_ms"].get<double>());
          ratio = fixed(r, 3);
        } else {
          py = "failed: " + p.value("reason", "");
        }
      }
      std::cout << " " << fixed(package.build_s, 1) << " | "
                << (ms ? fixed(*ms) : "absent: " + times.absent(kinds[i])) << " | " << py << " | "
                << ratio << " |";
    }
    std::cout << std::endl;
    std::cerr << line.dump() << std::endl;
  }
  std::cout << "\n"
            << all.size() << " task(s); " << packages.size() << " packages built in "
            << fixed(build_wall, 1) << " s wall with " << jobs << " at a time ("
            << fixed(build_sum, 1) << " s summed)" << std::endl;
  for (auto& [kind, rs] : ratios) {
    std::sort(rs.begin(), rs.end());
    int within = 0;
    for (double r : rs) within += r >= 0.95 && r <= 1.05;
    std::cout << "fidelity of " << baseline_info(kind).label << ": " << within << " of "
              << rs.size() << " within 5 %, kforge / Python median " << fixed(rs[rs.size() / 2], 3)
              << ", range " << fixed(rs.front(), 3) << "-" << fixed(rs.back(), 3) << std::endl;
  }
  return 0;
}
