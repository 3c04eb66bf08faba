// kforge's commands and their one-line descriptions: one list for the front door (cli/front.cpp,
// which answers --help without loading LibTorch) and for kforge-core's CLI11 tree.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kforge::cli {

struct CommandInfo {
  std::string_view name, description;
};

inline constexpr CommandInfo kCommands[] = {
    {"doctor", "Show toolchain versions, GPUs (or why none), and kforge's paths"},
    {"tasks", "List, show and check task suites"},
    {"compile",
     "Check and compile a candidate (no GPU needed): plan, NVRTC, types, limits, resources; "
     "--kernelbench converts a KernelBench answer"},
    {"verify",
     "Judge a candidate on the GPU: correctness on every configuration, then time, baselines and "
     "roofline "
     "(needs a GPU)"},
    {"baseline",
     "Time every task's reference as each kind of baseline (eager, scripted, torch.compile's "
     "modes) and store them (needs a GPU)"},
    {"corpus",
     "Judge many answers (files or folders; each names its task in its first line) in one judge "
     "session, with "
     "a folder's manifest.json of expected outcomes (needs a GPU)"},
    {"evolve",
     "Search for faster kernels: seeds and archive kernels as parents, children screened, the best "
     "judged, "
     "admitted and stored (needs a GPU)"},
    {"gpu-worker",
     "Judge on one GPU for a kforge evolve elsewhere (another GPU or machine): started by its "
     "--gpus or "
     "--worker-command (needs a GPU)"},
    {"report",
     "A run's report in markdown: per task best vs each baseline, the best baseline and roofline, "
     "the field's metrics (best of all attempts and first sample), lineage, spend"},
    {"archive", "Browse, export and import the kernel archive"},
    {"export",
     "Write the archive's winners as a library: C++ API, PyTorch ops, Python package, tests (no "
     "GPU needed)"},
    {"serve",
     "Browse the archive in a web browser: runs, leaderboard, tasks, candidates, search "
     "(read-only)"},
    {"llm", "Talk to the configured LLM endpoints"},
    {"prompt", "Prompt templates"},
};

inline std::string command_description(std::string_view name) {
  for (const CommandInfo& c : kCommands)
    if (c.name == name) return std::string(c.description);
  return "";
}

// Edit distance (insertions, deletions, substitutions), for "did you mean".
inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The candidate nearest to `word`, when it is close enough to be a likely typo or a prefix.
inline std::optional<std::string> nearest(std::string_view word,
                                          const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    size_t d = c.rfind(word, 0) == 0 && word.size() >= 2 ? 1 : edit_distance(word, c);
    if (!best || d < best_distance) best = c, best_distance = d;
  }
  if (best && best_distance <= std::max<size_t>(1, best->size() / 3)) return best;
  return std::nullopt;
}

}  // namespace kforge::cli
