// The loop's proposers (plan.h's Proposer): the offline tuner, and the model (the LLM proposer's
// ensemble, kforge/evolve/proposer.h). A new operator or proposer is a class here, chosen by name.
#pragma once

#include "kforge/evolve/proposer.h"
#include "plan.h"

namespace kforge::evolve::loop {

// "tune": points of the parent's tune space not measured yet, each reserved as it is proposed (so
// another island or round proposes others), each a slot of its own.
class TunerProposer : public Proposer {
 public:
  TunerProposer(const RunConfig& config, Evaluator& ev, int64_t run)
      : config_(config), ev_(ev), run_(run) {}
  bool writes(std::string_view op) const override { return op == "tune"; }
  void propose(TaskState& s, Round& round, const Want& want, Slots& out) override;

 private:
  const RunConfig& config_;
  Evaluator& ev_;
  int64_t run_;
};

// The model's operators (prompt kinds by name): the prompt rendered now, from the archive as the
// committed rounds left it (the memory horizon: `lookahead` rounds back), asked on the model's
// lane. Optimize, crossover and ideas quote their parents' Nsight Compute profiles, measured first
// where the GPU has the tool (once per parent and GPU kind, on a GPU lane: the request waits).
class ModelProposer : public Proposer {
 public:
  ModelProposer(const RunConfig& config, Evaluator& ev, int64_t run, LlmProposer& llm)
      : config_(config), ev_(ev), run_(run), llm_(llm) {}
  bool writes(std::string_view op) const override;
  void propose(TaskState& s, Round& round, const Want& want, Slots& out) override;

 private:
  std::optional<Slots::First> profile_first(TaskState& s, int64_t id, Slots& out);
  const RunConfig& config_;
  Evaluator& ev_;
  int64_t run_;
  LlmProposer& llm_;
};

}  // namespace kforge::evolve::loop
