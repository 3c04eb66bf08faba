// The loop's plan of work (issue 37; docs/evolve.md, "The steady state"): a task's rounds, each a
// list of slots (a tuner point, a starting kernel, or a model request) whose children are compiled
// and screened as they come, and what a proposer is to the loop: it writes the children of one
// slot the loop asked for, by operator name, from parents the loop picked.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/run.h"
#include "population.h"
#include "run_records.h"

namespace kforge::evolve::loop {

// A child of a slot: a proposal once compiled, and its screen.
struct Child {
  Checked checked;
  std::optional<records::Screen> screen;  // none: not compiled
  bool screened_here = false;             // measured in this process: recorded with its slot
  bool skipped = false;                   // not measured: a budget ran out first
  std::string gpu_uuid;
  int64_t id = 0;  // the candidate's archive id, once recorded
};

struct Round;

// One source of children in a round. Resolved when nothing of it is pending.
struct Slot {
  size_t task = 0;
  Round* round = nullptr;  // its round outlives it (a round is committed after its slots)
  int generation = 0, island = 0;
  bool from_model = false;
  std::optional<int> repair_depth;  // a repair's
  int pending = 1;                  // its request or compile, then each child's compile and screen
  std::vector<Child> children;
};
using SlotPtr = std::shared_ptr<Slot>;

struct Round {
  size_t task = 0;
  int number = 0;  // the generation of its children
  std::vector<SlotPtr> slots;
  size_t unrecorded = 0;
};
using RoundPtr = std::shared_ptr<Round>;

struct TaskState {
  std::shared_ptr<const tasks::Task> task;
  archive::TaskId task_id;
  Population population;
  TaskStatus status;  // (what it spent: the loop's Budget, by task id)
  int proposed = -1;  // the last round proposed
};

// The run's random stream for a task's round and an island (or a model child: 1000 + k), so that a
// resumed run draws what the uninterrupted one did.
std::mt19937_64 stream(uint64_t seed, const std::string& task, int round, int island);

// Where a proposer puts a slot's children, and tells what it spent (the scheduler, scheduler.h).
class Slots {
 public:
  virtual ~Slots() = default;
  virtual void event(const TaskState& s, LoopEvent e) = 0;  // the hooks' (--log-json's lines)
  virtual void spent_gpu(const TaskState& s, double seconds) = 0;
  // A proposal compiled as it is (a tuner point, a starting kernel).
  virtual void add(Round& round, int island, Proposal p) = 0;
  // GPU work a model request waits on (a parent's profile, which its prompt quotes): `work` runs on
  // a GPU lane ahead of screens and returns what to do with its result (on the loop's thread). One
  // job per key at a time: a request that needs a key already under way waits on that job.
  struct First {
    int64_t key = 0;
    std::function<std::function<void()>()> work;
  };
  using Job = std::function<std::vector<Proposal>()>;  // a request: runs on the model's lane
  // A model request: once every job of `first` is done, `prompt` renders it (on the loop's thread,
  // from the archive as it is then) and gives the job that asks the model for the proposals.
  virtual void ask(Round& round, int island, std::optional<int> repair_depth,
                   std::vector<First> first, std::function<Job()> prompt) = 0;
};

// One slot the loop wants written: an operator by name ("tune", or a model's prompt kind:
// "translate", "optimize", "crossover", "ideas", "repair_compile", "repair_wrong"), its parents
// (candidate ids; "tune": the member whose tune space it explores), and where it goes.
struct Want {
  std::string op;
  std::vector<int64_t> parents;
  int island = 0;
  size_t count = 1;                 // "tune": points
  int sample = 0;                   // a model's: tells repeated asks of one prompt apart
  std::optional<int> repair_depth;  // a repair's
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual bool writes(std::string_view op) const = 0;
  // Writes the slot(s) of `want` into `round` of task `s`, from its population as the task's last
  // committed round left it.
  virtual void propose(TaskState& s, Round& round, const Want& want, Slots& out) = 0;
};

// The family of this code in the task's population (made, with its tune space, when new).
Family& family_of(TaskState& s, Evaluator& ev, const std::string& source, const std::string& plan);

}  // namespace kforge::evolve::loop
