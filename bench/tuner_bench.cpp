// bench/tuner: how many evaluations the offline tuner needs (docs/benchmarks.md, "The tuner").
//   spaces [SUITE...]            each seed's tune space size at the timed dims (CPU; GPU facts when
//   present) measure TASK... --out FILE   screens every point of each seed's space on the GPU (the
//   exhaustive table) replay FILE [--streams N]    replays the loop's tuner against the table, N
//   random streams (CPU)
// The aim (issue 18): within 3 % of the exhaustive best in at most 25 % of the space's evaluations.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kforge/common/files.h"
#include "kforge/compile/answer.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/tuner.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/memory.h"

namespace fs = std::filesystem;
using namespace kforge;
using nlohmann::json;

namespace {

struct Seed {
  std::shared_ptr<const tasks::Task> task;
  std::string source, plan_text;
  compile::Plan plan;
  std::vector<compile::Tunables> space;
};

compile::DeviceFacts facts() {
  return verify::Driver::get().available() ? verify::plan_facts(0)
                                           : compile::DeviceFacts::for_arch("sm_90a");
}

std::optional<Seed> load_seed(const fs::path& task_file, evolve::Evaluator& ev) {
  auto task = std::make_shared<const tasks::Task>(tasks::load_task(task_file));
  fs::path file = task->file.parent_path() / "seeds" / (task->name + ".md");
  std::optional<std::string> text = read_file(file.string());
  if (!text) return std::nullopt;
  compile::Answer a = compile::parse_answer(*text);
  Seed s{
      task, a.source, a.plan, compile::parse_plan_text(a.plan, *task, ev.task_tensors(*task)), {}};
  s.space = compile::tune_space(s.plan, task->dims, ev.facts());
  return s;
}

std::vector<fs::path> task_files(const std::vector<std::string>& specs) {
  std::vector<fs::path> out;
  for (const std::string& spec : specs)
    for (const fs::path& f : tasks::resolve_tasks(spec, tasks::default_tasks_root()))
      out.push_back(f);
  return out;
}

evolve::EvaluatorOptions options() {
  evolve::EvaluatorOptions o;
  o.facts = facts();
  o.db = (fs::temp_directory_path() / ("kforge-bench-tuner-" + std::to_string(::getpid()) + ".db"))
             .string();
  return o;
}

int spaces(const std::vector<std::string>& specs) {
  evolve::Evaluator ev(options(), nullptr);
  std::printf("%-32s %8s  %s\n", "seed", "points", "tunables");
  for (const fs::path& f :
       task_files(specs.empty() ? std::vector<std::string>{"smoke", "level1", "level2"} : specs)) {
    std::optional<Seed> s = load_seed(f, ev);
    if (!s) continue;
    std::string names;
    for (const auto& [name, values] : s->plan.tune)
      names += name + "(" + std::to_string(values.size()) + ") ";
    std::printf("%-32s %8zu  %s\n", s->task->id().c_str(), s->space.size(), names.c_str());
  }
  return 0;
}

int measure(const std::vector<std::string>& specs, const std::string& out_file) {
  evolve::Evaluator ev(options(), nullptr);
  std::unique_ptr<evolve::Gpu> gpu = evolve::make_judge_gpu(verify::VerifyOptions{});
  ev.attach_gpu(gpu.get());
  json tables = json::array();
  for (const fs::path& f : task_files(specs)) {
    std::optional<Seed> s = load_seed(f, ev);
    if (!s) throw Error(f.string() + ": no seed");
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::future<std::vector<evolve::Checked>>> ready;
    for (const compile::Tunables& t : s->space) {
      evolve::Proposal p;
      p.task = s->task, p.source = s->source, p.plan = s->plan_text, p.tunables = t;
      ready.push_back(ev.check_async(p, 1));
    }
    json points = json::array();
    for (auto& r : ready) {
      evolve::Checked c = std::move(r.get().front());
      json point{{"tunables", c.report.tunables}, {"median_ms", nullptr}};
      if (!c.report.ok()) {
        point["outcome"] = "compile failed";
      } else {
        verify::Verdict v = ev.screen(c);
        point["outcome"] = verify::to_string(v.outcome);
        if (v.correct() && v.timing) point["median_ms"] = v.timing->time.median_ms;
      }
      points.push_back(point);
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%s: %zu points screened in %.1f s\n", s->task->id().c_str(),
                 s->space.size(), secs);
    tables.push_back({{"task", s->task->id()},
                      {"device", gpu->device().name},
                      {"seconds", secs},
                      {"points", points}});
    std::ofstream(out_file) << tables.dump(1)
                            << "\n";  // after each task: a time limit keeps what was measured
  }
  return 0;
}

size_t percentile(std::vector<size_t> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

int replay(const std::string& file, int streams) {
  evolve::Evaluator ev(options(), nullptr);
  json tables = json::parse(*read_file(file));
  std::printf(
      "| seed | points | correct | best ms | slowest | within 3 %% | seed's point | from it: evals "
      "| "
      "from a random point: evals, median (p90) | %% of exhaustive | random search (p90) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<double> fractions;
  for (const json& t : tables) {
    std::optional<Seed> s = load_seed(task_files({t["task"].get<std::string>()}).at(0), ev);
    evolve::Measured table;
    std::vector<compile::Tunables> space;
    size_t correct = 0;
    double best = 1e300;
    for (const json& p : t["points"]) {
      compile::Tunables tun = p["tunables"].get<compile::Tunables>();
      space.push_back(tun);
      if (p["median_ms"].is_null()) continue;
      table[tun] = p["median_ms"].get<double>();
      ++correct, best = std::min(best, p["median_ms"].get<double>());
    }
    // From the seed's own point (its author's pick, often the best already) and from a random
    // point of the space (the search itself), each over `streams` random streams.
    auto runs = [&](const evolve::TunerOptions& o, bool random_start) {
      std::vector<size_t> n;
      for (int k = 0; k < streams; ++k) {
        const compile::Tunables& start =
            random_start ? space[(static_cast<size_t>(k) * 7919u) % space.size()] : space.front();
        n.push_back(evolve::evaluations_to_reach(s->plan, space, table, start, 8, 2, 0.03,
                                                 static_cast<uint64_t>(k + 1), o)
                        .value_or(space.size()));
      }
      return n;
    };
    evolve::TunerOptions pure_random{.exhaustive_max = 0, .elite = 0, .random_share = 1};
    std::vector<size_t> from_seed = runs({}, false), tuner = runs({}, true),
                        random = runs(pure_random, true);
    double fraction =
        static_cast<double>(percentile(tuner, 0.5)) / static_cast<double>(space.size());
    fractions.push_back(fraction);
    size_t near = 0;
    double slowest = 0;
    for (const auto& [t, ms] : table) near += *ms <= 1.03 * best, slowest = std::max(slowest, *ms);
    auto start = table.find(space.front());
    std::printf(
        "| %s | %zu | %zu | %.4f | %.1fx | %zu | %s | %zu | %zu (%zu) | %.0f %% | %zu (%zu) |\n",
        t["task"].get<std::string>().c_str(), space.size(), correct, best, slowest / best, near,
        start == table.end() ? "-"
                             : (std::to_string(*start->second / best).substr(0, 4) + "x").c_str(),
        percentile(from_seed, 0.5), percentile(tuner, 0.5), percentile(tuner, 0.9), 100 * fraction,
        percentile(random, 0.5), percentile(random, 0.9));
  }
  std::sort(fractions.begin(), fractions.end());
  if (!fractions.empty())
    std::printf(
        "\nFrom a random point, median over seeds: %.0f %% of the exhaustive evaluations (%d "
        "random streams each)\n",
        100 * fractions[fractions.size() / 2], streams);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  kforge::verify::keep_large_cached_blocks_whole();  // as kforge does: the same allocator
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fprintf(stderr,
                 "usage: kforge-bench-tuner spaces [SUITE...] | measure TASK... --out FILE | "
                 "replay FILE [--streams N]\n");
    return 2;
  }
  try {
    std::string mode = args[0], out;
    int streams = 101;
    std::vector<std::string> rest;
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--out" && i + 1 < args.size())
        out = args[++i];
      else if (args[i] == "--streams" && i + 1 < args.size())
        streams = std::stoi(args[++i]);
      else
        rest.push_back(args[i]);
    }
    if (mode == "spaces") return spaces(rest);
    if (mode == "measure" && !out.empty()) return measure(rest, out);
    if (mode == "replay" && rest.size() == 1) return replay(rest[0], streams);
    std::fprintf(stderr, "kforge-bench-tuner: bad arguments\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kforge-bench-tuner: %s\n", e.what());
    return 1;
  }
}
