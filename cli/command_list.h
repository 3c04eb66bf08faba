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
  std::string_view examples;  // two command lines, each with what it does (the help's footer)
};

inline constexpr CommandInfo kCommands[] = {
    {"doctor", "Show toolchain versions, GPUs (or why none), and kforge's paths",
     "  kforge doctor\n      toolchain, GPUs (or why none), paths\n  kforge doctor --json\n      "
     "the same as JSON\n"},
    {"tasks", "List, show and check task suites",
     "  kforge tasks list level1\n      the tasks of a suite\n  kforge tasks check smoke\n      "
     "references on the check dims (CPU)\n"},
    {"compile",
     "Check and compile a candidate (no GPU needed): plan, NVRTC, types, limits, resources; "
     "--kernelbench converts a KernelBench answer",
     "  kforge compile --answer ANSWER.md --task smoke/softmax\n      an LLM answer checked and "
     "compiled\n  kforge compile k.cu --plan plan.json --task smoke/relu --tune BLOCK=512\n      "
     "device code and plan, one tune point\n"},
    {"verify",
     "Judge a candidate on the GPU: correctness on every configuration, then time, baselines and "
     "roofline "
     "(needs a GPU)",
     "  kforge verify --answer ANSWER.md --task smoke/softmax\n      correct or not, with "
     "evidence, then timed\n  kforge verify --answer ANSWER.md --task level1/layer_norm --admit "
     "--json\n      plus admission; the verdict as JSON\n"},
    {"baseline",
     "Time every task's reference as each kind of baseline (eager, scripted, torch.compile's "
     "modes) and store them (needs a GPU)",
     "  kforge baseline smoke\n      every baseline kind of each task, stored\n  kforge baseline "
     "level1/softmax --no-compile\n      eager and scripted only\n"},
    {"corpus",
     "Judge many answers (files or folders; each names its task in its first line) in one judge "
     "session, with "
     "a folder's manifest.json of expected outcomes (needs a GPU)",
     "  kforge corpus tests/gpu/exploits\n      every cheat against its expected outcome\n  kforge "
     "corpus tasks/level1/seeds --expect correct --kind seed\n      the seeds, stored\n"},
    {"evolve",
     "Search for faster kernels: seeds and archive kernels as parents, children screened, the best "
     "judged, "
     "admitted and stored (needs a GPU)",
     "  kforge evolve smoke --generations 4 --llm none\n      offline: the tuner over the seeds\n  "
     "kforge evolve level1 --model openai:gpt-4.1 --budget-minutes 60 --dry-run\n      what a run "
     "with a model would do\n"},
    {"gpu-worker",
     "Judge on one GPU for a kforge evolve elsewhere (another GPU or machine): started by its "
     "--gpus or "
     "--worker-command (needs a GPU)",
     "  kforge evolve level1 --gpus all\n      starts one per GPU itself\n  kforge evolve level1 "
     "--workers 4 --worker-command 'srun -n1 --gpus=1 kforge gpu-worker --connect {address} "
     "--worker {worker}'\n      through Slurm\n"},
    {"report",
     "A run's report in markdown: per task best vs each baseline, the best baseline and roofline, "
     "the field's metrics (best of all attempts and first sample), lineage, spend",
     "  kforge report 1\n      run 1 in markdown\n  kforge report 1 -o run1.md\n      the same "
     "into a file\n"},
    {"archive", "Browse, export and import the kernel archive",
     "  kforge archive top --suite level1\n      the winners, best first\n  kforge archive results "
     "level1 --kind seed\n      per task the best beside each baseline\n"},
    {"export",
     "Write the archive's winners as a library: C++ API, PyTorch ops, Python package, tests (no "
     "GPU needed)",
     "  kforge export --out kernels --suite level1\n      the winners as a library\n  cmake -S "
     "kernels -B kernels/build && cmake --build kernels/build\n      build it\n"},
    {"model",
     "A user's model: the chains of operations that take its time, ranked, written as tasks "
     "(profile); the model with kforge's kernels in, checked and timed end to end (check)",
     "  kforge model profile my_model.py\n      the chains that take the time, ranked\n  kforge "
     "model profile my_model.py --suite mine --top 3\n      the top three as a suite, for kforge "
     "evolve mine\n"},
    {"serve",
     "Browse the archive in a web browser: runs, leaderboard, tasks, candidates, search "
     "(read-only)",
     "  kforge serve\n      the archive at http://127.0.0.1:8737/\n  kforge serve --db run.db "
     "--port 9000\n      another archive and port\n"},
    {"llm", "Talk to the configured LLM endpoints",
     "  kforge llm ping --model openai:gpt-4.1\n      one tiny request: the reply, latency and "
     "tokens\n  kforge llm ping --config llm.toml\n      every model of an LLM config\n"},
    {"prompt", "Prompt templates",
     "  kforge prompt render translate --task level1/softmax\n      the first prompt of a task, as "
     "kforge sends it\n  kforge prompt render optimize --task level1/softmax --parent 12\n      a "
     "candidate's optimize prompt (from the archive)\n"},
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
