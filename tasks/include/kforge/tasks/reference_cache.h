// Compiled task references, each compiled once: the one owner of compiled references for the parts
// of a process that need a task's reference outside the judge's timing (the loop's checks and
// prompts, the GPU workers, admission's checks, the CLI), instead of a map in each.
//
// The judge keeps a cache of its own (verify's Judge::Session): TorchScript keeps executor state
// in a compiled reference (the first run's optimisation setting, the profiling executor's
// profile), so a reference the judge times as eager and scripted must not have been run by
// anything else first, or its baselines would depend on what else ran (docs/decisions.md, "Where
// the CLI's libraries went (issue 36)").
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kforge/tasks/reference.h"
#include "kforge/tasks/task.h"

namespace kforge::tasks {

class ReferenceCache {
 public:
  // At most `max_entries` tasks (0: no bound); past it the cache starts again empty, so that a
  // process sent ever new tasks (a GPU worker) does not grow without end. Handed-out references
  // stay valid while their holders keep them.
  explicit ReferenceCache(size_t max_entries = 0) : max_entries_(max_entries) {}
  ReferenceCache(const ReferenceCache&) = delete;
  ReferenceCache& operator=(const ReferenceCache&) = delete;

  // The task's reference, compiled on the first ask; throws what Reference::compile throws (and
  // keeps nothing). Entries are keyed by what compiling reads (the task's version, file, reference
  // and declared tensors), not by its dims: a task with other dims (admission's unseen ones)
  // shares its reference.
  std::shared_ptr<const Reference> reference(const Task& task);
  // describe_outputs(task, reference), worked out once per task (names, dtypes and ranks do not
  // depend on the dims).
  std::vector<OutputInfo> outputs(const Task& task);
  // Keeps `reference`, compiled from `task` elsewhere (load_task's check), unless the task has one.
  void adopt(const Task& task, Reference reference);
  size_t size() const;

 private:
  struct Entry;
  std::shared_ptr<Entry> entry(const Task& task);
  size_t max_entries_;
  mutable std::mutex mutex_;  // the map; each entry has its own, so tasks compile at once
  std::map<std::string, std::shared_ptr<Entry>> entries_;
};

// The cache a process shares outside the judge (at most 256 tasks).
ReferenceCache& shared_references();

}  // namespace kforge::tasks
