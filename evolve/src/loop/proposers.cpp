#include "proposers.h"

#include <algorithm>
#include <chrono>

#include "kforge/common/hash.h"

namespace kforge::evolve::loop {

std::mt19937_64 stream(uint64_t seed, const std::string& task, int round, int island) {
  uint32_t task_hash =
      static_cast<uint32_t>(std::stoull(content_hash(task).substr(0, 16), nullptr, 16));
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), task_hash,
                    static_cast<uint32_t>(round), static_cast<uint32_t>(island)};
  return std::mt19937_64(seq);
}

Family& family_of(TaskState& s, Evaluator& ev, const std::string& source, const std::string& plan) {
  return s.population.family(source, plan, [&] {
    Family f;
    f.source = source, f.plan = plan;
    f.parsed = compile::parse_plan_text(plan, *s.task, ev.task_tensors(*s.task));
    f.space = compile::tune_space(f.parsed, s.task->dims, ev.facts());
    return f;
  });
}

void TunerProposer::propose(TaskState& s, Round& round, const Want& want, Slots& out) {
  const std::vector<Member>& members = s.population.members();
  auto parent = std::find_if(members.begin(), members.end(),
                             [&](const Member& m) { return m.id == want.parents.at(0); });
  if (parent == members.end()) return;
  Family& f = *s.population.family(parent->family);
  // A stream of its own (the loop drew the parent from the island's).
  std::mt19937_64 rng = stream(config_.seed, s.task->id(), round.number, 500 + want.island);
  for (const compile::Tunables& t :
       propose_points(f.parsed, f.space, f.measured, want.count, rng, config_.tuner)) {
    f.measured.emplace(t, std::nullopt);  // the commit sets it
    Proposal p;
    p.task = s.task;
    p.source = f.source, p.plan = f.plan, p.tunables = t;
    p.lineage = {
        run_, {parent->id}, round.number, want.island, archive::LineageKind::Tune, "offline-tuner"};
    out.add(round, want.island, std::move(p));
  }
}

bool ModelProposer::writes(std::string_view op) const {
  std::optional<PromptKind> kind = parse_prompt_kind(op);
  return kind && kind != PromptKind::Idea;  // an idea's implementation is part of "ideas"
}

void ModelProposer::propose(TaskState& s, Round& round, const Want& want, Slots& out) {
  PromptKind kind = *parse_prompt_kind(want.op);
  Ask ask;
  ask.kind = kind;
  ask.sample = want.sample;
  // What every committed round wrote: this task's rounds up to this one less the lookahead.
  ask.horizon = std::max(0, round.number - std::max(config_.lookahead, 1) + 1);
  if (!want.parents.empty()) ask.parent = want.parents[0];
  if (want.parents.size() > 1) ask.second_parent = want.parents[1];
  std::vector<Slots::First> first;
  if (kind == PromptKind::Optimize || kind == PromptKind::Crossover || kind == PromptKind::Ideas)
    for (int64_t parent : want.parents)
      if (std::optional<Slots::First> f = profile_first(s, parent, out)) first.push_back(*f);
  ask.lineage = {run_, want.parents, round.number, want.island};  // how and by whom: the proposer
  out.ask(round, want.island, want.repair_depth, std::move(first),
          [this, ask, task = s.task] { return llm_.prepare(ask, task, ev_.archive()); });
}

// The parent's profile, where none is recorded for this GPU's kind: measured on a GPU lane (its
// child's request waits on it), recorded on the loop's thread.
std::optional<Slots::First> ModelProposer::profile_first(TaskState& s, int64_t id, Slots& out) {
  Gpu* gpu = ev_.gpu();
  if (!config_.profile || !gpu || gpu->profiler().empty()) return std::nullopt;
  if (ev_.archive().profile(archive::CandidateId{id}, ev_.device_id())) return std::nullopt;
  const std::vector<Member>& members = s.population.members();
  auto m =
      std::find_if(members.begin(), members.end(), [&](const Member& x) { return x.id == id; });
  if (m == members.end()) return std::nullopt;
  const Family& f = *s.population.family(m->family);
  Proposal p;
  p.task = s.task;
  p.source = f.source, p.plan = f.plan, p.tunables = m->tunables;
  auto work = [this, &s, &out, id, p = std::move(p)]() -> std::function<void()> {
    auto t0 = std::chrono::steady_clock::now();
    nlohmann::json profile = ev_.profile(ev_.check(p));
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return [this, &s, &out, id, took, profile = std::move(profile)] {
      ev_.archive().add_profile(archive::CandidateId{id},
                                ev_.device_id(profile.value("gpu_uuid", "")), profile);
      LoopEvent e;
      e.kind = LoopEvent::Kind::Profile;
      e.candidate = id, e.seconds = took, e.error = profile.value("error", "");
      out.event(s, std::move(e));
    };
  };
  return Slots::First{id, std::move(work)};
}

}  // namespace kforge::evolve::loop
