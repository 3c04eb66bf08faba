#include "run_records.h"

#include <filesystem>

#include "kforge/common/files.h"
#include "kforge/compile/answer.h"
#include "kforge/verify/protocol.h"

namespace kforge::evolve {

using nlohmann::json;

namespace records {
namespace {

verify::Outcome outcome_of(const std::string& text) {
  return verify::outcome_from_string(text).value_or(verify::Outcome::HarnessError);
}

}  // namespace

std::optional<Screen> find_screen(archive::RunLog& log, int64_t candidate, int64_t device) {
  std::optional<archive::ScreenRecord> s = log.find_screen(
      archive::CandidateId{candidate}, archive::DeviceId{device}, verify::kHarnessVersion);
  if (!s) return std::nullopt;
  return Screen{outcome_of(s->outcome), s->median_ms, s->summary};
}

void add_screen(archive::RunLog& log, int64_t candidate, int64_t device, int64_t run,
                const Screen& r) {
  log.add_screen(archive::CandidateId{candidate}, archive::DeviceId{device}, archive::RunId{run},
                 verify::kHarnessVersion,
                 {std::string(verify::to_string(r.outcome)), r.median_ms, r.summary});
}

std::optional<Judgment> find_judgment(archive::RunLog& log, int64_t candidate, int64_t device) {
  std::optional<archive::JudgmentRecord> r = log.find_judgment(
      archive::CandidateId{candidate}, archive::DeviceId{device}, verify::kHarnessVersion);
  if (!r) return std::nullopt;
  Judgment j;
  j.outcome = outcome_of(r->outcome);
  j.time_ms = r->time_ms, j.roofline_fraction = r->roofline_fraction;
  j.baselines = r->baselines;
  j.admitted = r->admitted;
  j.flagged = r->flagged;
  return j;
}

Judgment judgment_of(const Evaluation& e) {
  Judgment j;
  j.outcome = e.verdict.outcome;
  j.summary = e.verdict.summary;
  j.flagged = !e.verdict.flags.empty();
  j.admitted = e.admitted();
  if (const auto& t = e.verdict.timing) {
    j.time_ms = t->time.median_ms, j.roofline_fraction = t->roofline_fraction;
    j.baselines = verify::medians(t->baselines);
  }
  return j;
}

}  // namespace records

std::vector<Proposal> starting_population(const std::shared_ptr<const tasks::Task>& task,
                                          archive::Archive& ar, size_t from_archive,
                                          std::optional<int64_t> run) {
  std::vector<Proposal> out;
  std::filesystem::path seed = task->file.parent_path() / "seeds" / (task->name + ".md");
  if (std::optional<std::string> text = read_file(seed.string())) {
    Proposal p;
    p.task = task;
    p.label = seed.string();
    try {
      compile::Answer a = compile::parse_answer(*text);
      p.source = a.source, p.plan = a.plan, p.first_line = a.source_first_line;
    } catch (const compile::AnswerError& e) {
      p.answer_error = e.what();
    }
    p.lineage.prompt_kind = archive::LineageKind::Seed;
    out.push_back(std::move(p));
  }
  // The archive's correct kernels of this task version, distinct code, fastest first.
  std::optional<archive::RunId> outside;
  if (run) outside = archive::RunId{*run};
  for (archive::StartingKernel& k :
       archive::RunLog(ar).starting_kernels(*task, from_archive, outside)) {
    Proposal p;
    p.task = task;
    p.source = std::move(k.source), p.plan = std::move(k.plan);
    if (!out.empty() && out.front().source == p.source) continue;  // the seed itself
    p.tunables = k.tunables.get<compile::Tunables>();
    p.lineage.parents = {k.id.value};
    p.lineage.prompt_kind = archive::LineageKind::Archive;
    p.lineage.model = "";
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kforge::evolve
