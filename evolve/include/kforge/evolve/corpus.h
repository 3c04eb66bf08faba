// A corpus of answers (`kforge corpus`): answer files, each naming its task in its first line
// (`<!-- task: suite/name -->`), judged in one session, each against the outcomes that count as
// right for it (a folder's manifest.json: tests/gpu/exploits). Compiles run in parallel, ahead of
// the GPU, which judges one candidate at a time. An answer's own problem (no task line, a task that
// does not load or whose reference fails) is data: the answer is not judged, and says why. A
// failure of kforge's own (a compile worker that does not start, a bug) is an exception that
// reaches the caller, never a "not judged" line.
#pragma once

#include <cstddef>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/evolve/evaluator.h"

namespace kforge::evolve {

// One answer file and what it should get.
struct CorpusEntry {
  std::string path, name, task_spec;  // task_spec: "" when no line names the task
  std::vector<std::string> expected;  // outcomes that count as right; empty: no expectation
  std::string text;
};

// The answer files `paths` name (files as given; a folder's *.md but README.md, sorted), each with
// its expectation: the folder's manifest.json ("kernels", or "without_sanitizer" where
// compute-sanitizer is absent), else `expect` when given. Throws UsageError for a path that is not
// there, InputError for a manifest that is not JSON.
std::vector<CorpusEntry> collect_corpus(const std::vector<std::string>& paths,
                                        const std::string& expect, bool sanitizer);

struct CorpusOptions {
  std::string tasks_dir;  // the suites' folder; "": tasks::default_tasks_root()
  // How the candidates were made, as stored.
  archive::LineageKind kind = archive::LineageKind::Manual;
  int tune_points = 1;  // screen up to this many points of each tune space
  bool admit = false;   // admission for every correct candidate
  bool store = true;    // record every judged candidate in the evaluator's archive
};

// What became of one answer.
struct CorpusResult {
  const CorpusEntry* entry = nullptr;
  std::string not_judged;  // why it was not judged (its own problem); empty when judged
  Checked checked;         // the candidate judged (the chosen tune point)
  Evaluation evaluation;
  std::string outcome;  // the verdict's outcome, or "admission:<outcome>" when admission failed
  bool as_expected = false;  // no expectation, or one of the expected outcomes
  double tuning_ms = 0;
  nlohmann::json tuning = nlohmann::json::array();  // per screened point (none for one point)
};

// What a corpus run says while it runs; the command prints it.
class CorpusObserver {
 public:
  virtual ~CorpusObserver() = default;
  // Answer `index` entered a step: "compiling", "screening N tune points", "judging".
  virtual void on_step(size_t index, const std::string& step) { (void)index, (void)step; }
  // Its tune points were screened (two or more): s.chosen is judged in full.
  virtual void on_screened(const CorpusEntry& entry, const std::vector<Checked>& points,
                           const Screened& s) {
    (void)entry, (void)points, (void)s;
  }
  // Its result, before it is recorded.
  virtual void on_result(size_t index, const CorpusResult& result) = 0;
};

class Corpus {
 public:
  // Loads every answer (its task's reference compiled here, on the calling thread) and queues its
  // compiles on the evaluator's threads, so that they run while the GPU starts.
  Corpus(std::vector<CorpusEntry> entries, CorpusOptions options, Evaluator& evaluator);

  const std::vector<CorpusEntry>& entries() const { return entries_; }
  // The tasks of the answers that will be judged, in order (for their compiled baselines).
  std::vector<const tasks::Task*> tasks() const;
  // Judges every answer in order on the evaluator's GPU (attached by now) and records it unless
  // options.store is false or it never had code. Throws what kforge's own failures throw.
  void judge(CorpusObserver& observer);

 private:
  struct Loaded {
    std::optional<Proposal> proposal;
    std::string error;  // the answer's own problem
  };
  Loaded load(const CorpusEntry& e);

  std::vector<CorpusEntry> entries_;
  CorpusOptions options_;
  Evaluator& evaluator_;
  std::vector<Loaded> loaded_;
  std::vector<std::future<std::vector<Checked>>> ready_;
};

}  // namespace kforge::evolve
