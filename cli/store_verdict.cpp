#include "store_verdict.h"

#include "kforge/archive/archive.h"
#include "kforge/archive/location.h"
#include "kforge/common/identity.h"
#include "kforge/common/json_limits.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/compile/plan.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/protocol.h"

namespace kforge::cli {

nlohmann::json admission_json(const verify::Verdict& a) {
  return {{"admitted", a.correct()}, {"outcome", verify::to_string(a.outcome)}, {"summary", a.summary},
          {"evidence", a.evidence}};
}

// The candidate, its compile report and its evaluation, in one archive transaction.
// (The evolution loop will own this conversion; `kforge verify` is its first user.)
void store_verdict(const std::string& db, const tasks::Task& task, const std::string& source, const std::string& plan,
                   const compile::CandidateReport& r, const verify::Verdict& v, const std::optional<verify::Verdict>& admission,
                   const std::string& prompt_kind) {
  archive::Archive ar = archive::Archive::open(archive::database_path(db).string(), /*create=*/true);
  verify::DeviceInfo gpu = verify::list_devices().at(0);
  archive::NewCandidate c;
  c.task = ar.upsert_task(task);
  c.source = source;
  try {
    c.plan = parse_json_bounded(plan, "plan", compile::kMaxPlanDepth, compile::kMaxPlanBytes);
  } catch (const InputError&) {
    c.plan = {{"unparsed", plan}};
  }
  c.tunables = r.tunables;
  // A candidate that failed before it had an identity gets the same hash of what is stored, so an
  // import of an export can recompute it (archive import never believes a stated identity).
  c.identity = r.identity.empty() ? candidate_identity(source, c.plan, r.tunables) : r.identity;
  c.prompt_kind = prompt_kind;
  c.model = "human";
  archive::CompileRecord comp;
  comp.ok = r.module.ok;
  comp.stage = compile::stage_name(r.stage);
  comp.errors = r.errors;
  comp.log = r.module.log;
  for (const auto& k : r.kernels)
    comp.resources[k.name] = {{"registers", k.resources.registers}, {"static_shared_bytes", k.resources.static_shared_bytes},
                              {"spill_store_bytes", k.resources.spill_store_bytes}};
  comp.compile_ms = r.module.compile_ms;
  comp.arch = compile::arch_for(gpu.cc_major, gpu.cc_minor);
  archive::EvaluationRecord e;
  e.device = ar.upsert_device(gpu.uuid, gpu.name, comp.arch, gpu.sm_count, static_cast<int64_t>(gpu.memory_bytes),
                              std::to_string(verify::driver_version()));
  e.outcome = verify::to_string(v.outcome);
  e.flags = v.flags;
  e.evidence = v.evidence;
  if (admission) e.evidence["admission"] = admission_json(*admission);
  e.admitted = admission && admission->correct();
  e.dims = task.dims;
  e.harness_version = verify::kHarnessVersion;
  e.toolchain = v.evidence.value("toolchain", nlohmann::json::object());
  if (v.timing) {
    const verify::TimingResult& t = *v.timing;
    e.time_ms = t.time.median_ms, e.time_iqr_ms = t.time.iqr_ms, e.time_min_ms = t.time.min_ms;
    e.eager_ms = t.eager.median_ms, e.scripted_ms = t.scripted.median_ms;
    e.speedup_eager = t.speedup_eager, e.speedup_scripted = t.speedup_scripted;
    e.roofline_fraction = t.roofline_fraction;
    ar.store_baseline(c.task, task.dims, *e.device, t.math_mode, t.eager.median_ms, t.scripted.median_ms);
  }
  ar.add_candidate(c, comp, {e});
}

}  // namespace kforge::cli
