// Admission (docs/design.md, Verification 6; judge.h): a winner checked again on dims no
// candidate saw, in a fresh runner, then under compute-sanitizer.
#include "judge_parts.h"

namespace kforge::verify {

using nlohmann::json;

Verdict Judge::admit(const tasks::Task& unseen, const compile::CandidateReport& report) {
  auto t0 = Clock::now();
  Verdict v;
  if (!report.ok()) {
    v = verdict_from_report(report);
  } else {
    runner_.restart();  // a fresh runner: nothing a earlier run left behind can help
    VerifyOptions o = options_;
    o.time = false;
    v = guarded([&] {
      parts::Verification admission(o, runner_, *session_, unseen, report);
      Verdict w = parts::run_verification(admission);
      json record;
      if (w.correct())
        if (std::optional<Verdict> bad = parts::sanitize(admission, record)) w = *bad;
      w.evidence["sanitizers"] = record["sanitizers"];
      if (record.contains("sanitizer_path"))
        w.evidence["sanitizer_note"] = record["sanitizer_path"];
      return w;
    });
  }
  json dims = json::array();
  for (const tasks::Dims& d : unseen.all_dims()) dims.push_back(d);
  v.evidence["admission"] = {
      {"dims", dims}, {"admitted", v.correct()}, {"ms", parts::ms_since(t0)}};
  v.summary =
      "admission on " + std::to_string(dims.size()) + " unseen configuration(s): " + v.summary;
  return v;
}

std::optional<tasks::Task> unseen_task(const tasks::Task& task, uint64_t seed, int configurations,
                                       const std::function<bool(const tasks::Dims&)>& usable) {
  std::vector<tasks::Dims> dims =
      tasks::draw_unseen_dims(task, seed, configurations, int64_t{256} << 20, usable);
  if (dims.empty()) return std::nullopt;
  tasks::Task unseen = task;
  unseen.dims = dims.front();
  unseen.check_dims.assign(dims.begin() + 1, dims.end());
  unseen.unseen = true;
  return unseen;
}

Verdict admit_candidate(Judge& judge, const tasks::Task& task, const std::string& source,
                        const std::string& plan, const compile::Tunables& tunables,
                        const compile::DeviceFacts& facts, compile::Compiler& compiler,
                        uint64_t seed, int configurations) {
  std::optional<tasks::Task> unseen = unseen_task(task, seed, configurations);
  if (!unseen) {
    Verdict v;
    v.outcome = Outcome::HarnessError;
    v.summary = "admission: the task's constraints leave no dims configuration that was not shown";
    return v;
  }
  compile::CandidateReport report = compile::check_candidate(
      *unseen, compile::task_tensors(*unseen, tasks::shared_references().outputs(*unseen)), source,
      plan, tunables, facts, compiler);
  Verdict v = judge.admit(*unseen, report);
  if (!report.ok()) v.summary = "admission on unseen dims: " + v.summary;
  return v;
}

}  // namespace kforge::verify
