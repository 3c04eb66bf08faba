// Verdict plumbing that needs no GPU: outcome names (the archive's), compile-stage verdicts, the
// watchdog default, the timing's baselines as JSON and the reading of compute-sanitizer logs.
#include <gtest/gtest.h>

#include "kforge/common/files.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/judge.h"
#include "kforge/verify/shared_buffer.h"
#include "test_util.h"

using namespace kforge;
using namespace kforge::verify;

TEST(Verdict, OutcomeNamesAreTheArchiveSchemaList) {
  // The newest CHECK of evaluations.outcome (version 6 added does_not_fit).
  std::string schema = read_file((test::source_dir() / "archive/schema/v6.sql").string()).value();
  for (Outcome o : all_outcomes()) {
    EXPECT_NE(schema.find("'" + std::string(to_string(o)) + "'"), std::string::npos)
        << to_string(o);
    EXPECT_EQ(outcome_from_string(to_string(o)), o);
  }
  EXPECT_EQ(all_outcomes().size(), 14u);
  EXPECT_FALSE(outcome_from_string("fast"));
}

TEST(Verdict, StagesBeforeTheGpuMapToCompileAndPlanErrors) {
  compile::CandidateReport r;
  r.stage = compile::Stage::Plan;
  r.errors = {"launch[0].grid[0]: unknown name 'M'"};
  EXPECT_EQ(verdict_from_report(r).outcome, Outcome::PlanError);
  r.stage = compile::Stage::Limits;
  EXPECT_EQ(verdict_from_report(r).outcome, Outcome::PlanError);
  r.stage = compile::Stage::Compile;
  Verdict v = verdict_from_report(r);
  EXPECT_EQ(v.outcome, Outcome::CompileError);
  EXPECT_NE(v.summary.find("unknown name 'M'"), std::string::npos);
  EXPECT_EQ(v.evidence["stage"], "compile");
  r.stage = compile::Stage::Answer;
  EXPECT_EQ(verdict_from_report(r).outcome, Outcome::CompileError);
}

TEST(Verdict, WatchdogScalesWithEagerAndLaunchesUpToTheCeiling) {
  EXPECT_EQ(default_watchdog(1.0, 1).count(), 2000);   // floor: 50 ms
  EXPECT_EQ(default_watchdog(10.0, 1).count(), 2000);  // 500 ms
  EXPECT_EQ(default_watchdog(50.0, 2).count(), 5000);
  EXPECT_EQ(default_watchdog(5000.0, 1).count(), 60000);  // ceiling
}

// Logs as compute-sanitizer 2025 wrote them on the H200 (docs/gpu-runs/2026-12-02-verify.md).
TEST(Verdict, MemcheckLogsAreReadIntoOutOfBoundsOutcomes) {
  const std::string read_past = R"(========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at read_at+0x80 in candidate.cu:10
=========     by thread (0,0,0) in block (0,0,0)
=========     Access to 0x7ff72ec00000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7ff72ea00000 of size 2,097,152 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cuLaunchKernel [0x39fb94] in libcuda.so.1
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to "unspecified launch failure" on CUDA API call to cuCtxSynchronize.
)";
  EXPECT_EQ(classify_memcheck_log(read_past), Outcome::OutOfBoundsRead);
  std::string write_before = read_past;
  write_before.replace(write_before.find("read of"), 4, "write");
  write_before.replace(write_before.find("1 bytes after"), 13, "1,024 bytes before");
  EXPECT_EQ(classify_memcheck_log(write_before), Outcome::OutOfBoundsWrite);
  std::string wild = read_past;
  wild.replace(wild.find("1 bytes after"), 13, "140,737,488,355,328 bytes before");
  EXPECT_FALSE(classify_memcheck_log(wild))
      << "a wild pointer is a runtime error, not an out-of-bounds read";
  std::string misaligned = R"(========= Invalid __global__ read of size 16 bytes
=========     at k+0x40 in candidate.cu:3
=========     Address 0x7f0000000004 is misaligned
)";
  EXPECT_FALSE(classify_memcheck_log(misaligned));
  EXPECT_FALSE(classify_memcheck_log("========= ERROR SUMMARY: 0 errors\n"));
}

TEST(Verdict, SanitizerSummariesAreCounted) {
  EXPECT_EQ(sanitizer_errors("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"),
            0);
  EXPECT_EQ(sanitizer_errors("========= ERROR SUMMARY: 1 error\n"), 1);
  EXPECT_EQ(sanitizer_errors("========= ERROR SUMMARY: 1,204 errors\n"), 1204);
  // racecheck counts hazards; only those of error severity fail admission.
  EXPECT_EQ(
      sanitizer_errors("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"),
      0);
  EXPECT_EQ(
      sanitizer_errors("========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)\n"),
      1);
  EXPECT_FALSE(sanitizer_errors("========= COMPUTE-SANITIZER\n"));  // cut short: no verdict from it
}

TEST(Timing, SummaryIsMedianIqrAndMin) {
  TimeStats t = summarize({5, 1, 3, 2, 4});
  EXPECT_EQ(t.reps, 5);
  EXPECT_DOUBLE_EQ(t.median_ms, 3);
  EXPECT_DOUBLE_EQ(t.min_ms, 1);
  EXPECT_DOUBLE_EQ(t.iqr_ms, 2);  // quartiles 2 and 4
  EXPECT_DOUBLE_EQ(summarize({1, 2, 3, 4}).median_ms, 2.5);
  EXPECT_EQ(summarize({}).reps, 0);
}

TEST(Timing, RepetitionsReachTheMinimumTotalWithinBounds) {
  TimingOptions o;  // 100 ms, 10..200
  EXPECT_EQ(repetitions_for(1.0, o), 100);
  EXPECT_EQ(repetitions_for(0.001, o), 200);
  EXPECT_EQ(repetitions_for(50.0, o), 10);
  EXPECT_EQ(repetitions_for(0.3, o), 200);
  EXPECT_EQ(repetitions_for(0.7, o), 143);
  EXPECT_EQ(repetitions_for(0.0, o), 200);
}

TEST(Timing, RooflineFloorIsTheSlowerOfBytesAndFlopsTimesNineTenths) {
  MeasuredFacts f;
  f.read_gbps = 4000, f.write_gbps = 3500, f.copy_gbps = 3800;
  f.peak_tflops = {{"float32", 50.0}};
  // 4 GB at the best 4000 GB/s: 1 ms; x 0.9
  EXPECT_NEAR(*roofline_floor_ms(f, 4e9, std::nullopt, tasks::Dtype::Float32), 0.9, 1e-12);
  // 1e12 flops at 50 TFLOP/s: 20 ms beats the bytes' 1 ms
  EXPECT_NEAR(*roofline_floor_ms(f, 4e9, 1e12, tasks::Dtype::Float32), 18.0, 1e-9);
  // no peak known for float16: bytes only
  EXPECT_NEAR(*roofline_floor_ms(f, 4e9, 1e12, tasks::Dtype::Float16), 0.9, 1e-12);
  EXPECT_FALSE(roofline_floor_ms(f, std::nullopt, std::nullopt, tasks::Dtype::Float32));
  EXPECT_EQ(MeasuredFacts::from_json(f.to_json()).to_json(), f.to_json());
}

// Issue 39: 3xTF32 meets the precision rule, so float32 work may run at a third of the TF32 rate;
// a floor from SGEMM's peak flagged correct 3xTF32 convolutions `suspicious` (H100, session 21).
TEST(Timing, Float32FloorAllowsThreeTf32ProductsOnTheTensorCores) {
  MeasuredFacts f;
  f.read_gbps = f.write_gbps = f.copy_gbps = 4000;
  f.peak_tflops = {{"float32", 50.0}, {kTf32, 450.0}, {"float16", 700.0}};
  EXPECT_NEAR(*compute_peak_tflops(f, tasks::Dtype::Float32), 150.0, 1e-9);
  // 1.5e12 flops at 150 TFLOP/s: 10 ms, x 0.9
  EXPECT_NEAR(*roofline_floor_ms(f, 4e9, 1.5e12, tasks::Dtype::Float32), 9.0, 1e-9);
  // a task that allows TF32: the whole TF32 rate
  EXPECT_NEAR(*roofline_floor_ms(f, 4e9, 1.5e12, tasks::Dtype::Float32, true), 3.0, 1e-9);
  // other dtypes keep their own peak; a third of TF32 below SGEMM's leaves SGEMM's
  EXPECT_NEAR(*compute_peak_tflops(f, tasks::Dtype::Float16), 700.0, 1e-9);
  f.peak_tflops[kTf32] = 120.0;
  EXPECT_NEAR(*compute_peak_tflops(f, tasks::Dtype::Float32), 50.0, 1e-9);
  // A kernel 3x faster than SGEMM's floor is not below the float32 floor any more.
  f.peak_tflops[kTf32] = 450.0;
  TimingResult t;
  t.time.median_ms = 10.0;
  t.floor_ms = roofline_floor_ms(f, 4e9, 1.5e12, tasks::Dtype::Float32);
  assess_speed(t);
  EXPECT_FALSE(t.suspicious) << t.suspicion;
  t.time.median_ms = 8.0;
  assess_speed(t);
  EXPECT_TRUE(t.suspicious);
}

// The contract between the judge's canaries and the runner's guard gaps (docs/protocol.md,
// Buffers).
TEST(Buffers, TheTensorEndsAtItsAllocationAlignedWithSlackBefore) {
  const uint64_t gran = 2 << 20;
  for (uint64_t bytes :
       {uint64_t{0}, uint64_t{1}, uint64_t{12}, uint64_t{256}, uint64_t{4000},
        (uint64_t{2} << 20) - 256, uint64_t{2} << 20, uint64_t{67108864}, uint64_t{67108864} + 4}) {
    BufferSpec b = buffer_layout(bytes, gran);
    EXPECT_EQ(b.allocation_bytes % gran, 0u) << bytes;
    EXPECT_EQ(b.offset % 256, 0u) << bytes;
    EXPECT_GE(b.offset, 256u) << bytes;                        // canaries before the start
    uint64_t after = b.allocation_bytes - b.offset - b.bytes;  // canaries before the gap
    EXPECT_LT(after, 256u + (bytes == 0 ? 1 : 0)) << bytes;
    EXPECT_EQ((b.bytes + after) % 256, 0u) << bytes;  // the tensor's padded end is the gap
    EXPECT_EQ(b.bytes, bytes);
  }
  EXPECT_EQ(buffer_layout(67108864, gran).allocation_bytes,
            67108864u + gran);  // 64 MiB + room for slack
  EXPECT_EQ(buffer_layout(12, gran).offset, gran - 256);
}

// Issue 18: a large speedup is suspicious unless eager itself is far from the floor; faster than
// the floor is impossible.
TEST(Verdict, LargeSpeedupsAreExplainedOrAwaitReview) {
  auto timing = [](double ms, double eager_ms, std::optional<double> floor_ms) {
    TimingResult t;
    t.time.median_ms = ms;
    TimeStats eager;
    eager.median_ms = eager_ms;
    // A faster baseline of another kind changes nothing: the rule is about eager.
    TimeStats autotuned;
    autotuned.median_ms = ms / 2;
    t.baselines = {{BaselineKind::Eager, eager, "", 0},
                   {BaselineKind::CompiledMaxAutotune, autotuned, "", 0}};
    t.floor_ms = floor_ms;
    assess_speed(t);
    return t;
  };
  TimingResult plain = timing(1.0, 2.0, 0.5);
  EXPECT_FALSE(plain.suspicious);
  EXPECT_EQ(plain.suspicion, "");
  TimingResult below = timing(0.4, 2.0, 0.5);
  EXPECT_TRUE(below.suspicious);
  EXPECT_EQ(below.suspicion.rfind(kSuspicionBelowFloor, 0), 0u) << below.suspicion;
  // Eager at 5 % of its floor (one block per row, say): 15x is expected, and the reason is kept.
  TimingResult explained = timing(1.0, 15.0, 0.75);
  EXPECT_FALSE(explained.suspicious);
  EXPECT_NE(explained.suspicion.find(
                "explained: eager runs at 5% of the roofline floor, the kernel at 75%"),
            std::string::npos)
      << explained.suspicion;
  // Eager at 50 % of its floor: 15x cannot be honest without skipping work (or a wrong floor).
  TimingResult review = timing(1.0, 15.0, 7.5);
  EXPECT_TRUE(review.suspicious);  // 1 ms < 7.5 ms floor: impossible
  TimingResult unexplained = timing(1.0, 15.0, std::nullopt);
  EXPECT_TRUE(unexplained.suspicious);
  EXPECT_NE(unexplained.suspicion.find("awaiting review"), std::string::npos)
      << unexplained.suspicion;
  EXPECT_FALSE(timing(1.0, 15.0, 0.8).suspicious);  // eager at 5.3 % of its floor: explained
  EXPECT_TRUE(timing(1.0, 12.0, 2.0).suspicious);   // eager at 17 %: 12x awaits review
  // Without an eager time there is no speedup over eager to doubt.
  TimingResult no_eager = timing(1.0, 15.0, std::nullopt);
  no_eager.baselines.erase(no_eager.baselines.begin());
  assess_speed(no_eager);
  EXPECT_FALSE(no_eager.suspicious);
}

// Profile feedback (docs/evolve.md): what kforge keeps of an `ncu --csv --metrics` log. The file
// holds the values a real ncu 2025.3.1 run measured on an H200 (tests/data/ncu/README.md).
TEST(Profile, AnNcuLogGivesEachLaunchItsKeyMetricsAndTopStalls) {
  std::string log =
      read_file((test::source_dir() / "tests/data/ncu/vadd-h200.csv").string()).value();
  nlohmann::json p = parse_ncu_log(log);
  ASSERT_TRUE(p.contains("kernels")) << p.dump();
  ASSERT_EQ(p["kernels"].size(), 1u);
  const nlohmann::json& k = p["kernels"][0];
  EXPECT_EQ(k["name"], "vadd");
  EXPECT_NEAR(k["duration_ms"].get<double>(), 0.062848, 1e-9);  // "62,848" ns
  EXPECT_DOUBLE_EQ(k["dram_pct"].get<double>(), 62.56);
  EXPECT_DOUBLE_EQ(k["sm_pct"].get<double>(), 50.70);
  EXPECT_DOUBLE_EQ(k["l2_pct"].get<double>(), 77.33);
  EXPECT_DOUBLE_EQ(k["occupancy_pct"].get<double>(), 74.28);
  EXPECT_EQ(k["registers"], 16);
  ASSERT_EQ(k["stalls"].size(), 3u);
  EXPECT_EQ(k["stalls"][0][0], "long_scoreboard");
  EXPECT_DOUBLE_EQ(k["stalls"][0][1].get<double>(), 41.33);
  EXPECT_EQ(k["stalls"][1][0], "wait");
  EXPECT_EQ(k["stalls"][2][0], "short_scoreboard");
  // Every metric kforge asks for is read back from the log.
  for (const std::string& m : ncu_metrics())
    EXPECT_NE(log.find("\"" + m + "\""), std::string::npos) << m;

  // Two launches: in the order ncu numbered them, whatever the order of the rows.
  std::string second = log;
  for (size_t at = 0; (at = second.find("\"0\",\"527\"", at)) != std::string::npos; at += 9)
    second.replace(at, 9, "\"1\",\"527\"");
  std::string header = log.substr(0, log.find('\n', log.find("\"ID\"")) + 1);
  nlohmann::json two = parse_ncu_log(header + second.substr(second.find("\"1\",\"527\"")) +
                                     log.substr(log.find("\"0\",\"527\"")));
  ASSERT_EQ(two["kernels"].size(), 2u);

  // What the tool said, when it measured nothing.
  nlohmann::json refused = parse_ncu_log(
      "==PROF== Connected to process 7 (/x/kforge-runner)\n==ERROR== ERR_NVGPUCTRPERM - The user "
      "does not have "
      "permission to access NVIDIA GPU Performance Counters on the target device 0.\n");
  EXPECT_NE(refused.value("error", "").find("ERR_NVGPUCTRPERM"), std::string::npos)
      << refused.dump();
  EXPECT_EQ(parse_ncu_log("")["error"], "ncu profiled no kernel (its log has no metrics)");
}

namespace {

// A timing with every kind of baseline: eager, scripted and max-autotune timed (max-autotune's
// package built now), compiled absent with its reason.
TimingResult four_kinds() {
  TimingResult t;
  t.time = {0.7144, 0.0018, 0.7123, 140, true};
  t.baselines = {
      {BaselineKind::Eager, TimeStats{3.7517, 0.01, 3.74, 23, true}, "", 0},
      {BaselineKind::Scripted, TimeStats{3.7510, 0.002, 3.75, 39, false}, "", 0},
      {BaselineKind::Compiled, std::nullopt, "turned off (--no-compile)", 0},
      {BaselineKind::CompiledMaxAutotune, TimeStats{1.4288, 0.003, 1.42, 70, true}, "", 93.5}};
  return t;
}

// A GPU worker's answer (docs/scale.md): a verdict as JSON and back is the same verdict, and a
// malformed one is refused naming the field.
TEST(Verdict, JsonRoundTripForTheWorkersAnswers) {
  using namespace kforge::verify;
  Verdict correct;
  correct.outcome = Outcome::Correct;
  correct.flags = {kFlagClockSlowdown};
  correct.summary = "correct on 5 configuration(s)";
  correct.evidence = {{"seed", 7}, {"harness_version", 3}};
  TimingResult t = four_kinds();
  t.bytes = 3221225476.0, t.floor_ms = 0.6237, t.roofline_fraction = 0.87;
  t.math_mode = "ieee";
  t.device = {{"name", "NVIDIA H200"}};
  t.clocks = {{"max_sm_mhz", 1980}};
  correct.timing = t;
  Verdict wrong;
  wrong.outcome = Outcome::WrongResult;
  wrong.summary = "max abs error 3 > 1e-4";
  for (const Verdict& v : {correct, wrong}) {
    nlohmann::json j = to_json(v);
    Verdict back = verdict_from_json(nlohmann::json::parse(j.dump()));
    EXPECT_EQ(to_json(back), j);
    EXPECT_EQ(back.outcome, v.outcome);
    EXPECT_EQ(back.timing.has_value(), v.timing.has_value());
  }
  Verdict back = verdict_from_json(to_json(correct));
  EXPECT_DOUBLE_EQ(back.timing->time.median_ms, 0.7144);
  EXPECT_FALSE(back.timing->speedup(BaselineKind::Compiled));
  EXPECT_FALSE(back.timing->flops);
  auto refused = [](nlohmann::json j, const std::string& says) {
    try {
      verdict_from_json(j);
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const kforge::Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  nlohmann::json j = to_json(correct);
  nlohmann::json no_summary = j;
  no_summary.erase("summary");
  refused(no_summary, "verdict: no field \"summary\"");
  nlohmann::json bad_outcome = j;
  bad_outcome["outcome"] = "fast";
  refused(bad_outcome, "verdict.outcome: \"fast\" is not an outcome");
  nlohmann::json bad_reps = j;
  bad_reps["timing"]["time"]["reps"] = "many";
  refused(bad_reps, "time.reps: \"many\" is not of the expected type");
  nlohmann::json bad_baseline = j;
  bad_baseline["timing"]["baselines"][3]["median_ms"] = "fast";
  refused(bad_baseline,
          "verdict.timing.baselines[3].median_ms: \"fast\" is not of the expected type");
}

// The baselines as the worker wire and the evidence carry them: one entry per kind, a time's
// statistics or why there is none, and the speedups for a human; read back to the same list.
TEST(Verdict, TimingJsonCarriesEveryKindOfBaselineAndWhyOneIsAbsent) {
  TimingResult t = four_kinds();
  nlohmann::json j = t.to_json();
  ASSERT_EQ(j["baselines"].size(), 4u) << j.dump();
  EXPECT_EQ(j["baselines"][0], (nlohmann::json{{"kind", "eager"},
                                               {"median_ms", 3.7517},
                                               {"iqr_ms", 0.01},
                                               {"min_ms", 3.74},
                                               {"reps", 23},
                                               {"held", true}}));
  EXPECT_EQ(j["baselines"][2],
            (nlohmann::json{{"kind", "compiled"}, {"absent", "turned off (--no-compile)"}}));
  EXPECT_EQ(j["baselines"][3]["kind"], "compiled_max_autotune");
  EXPECT_EQ(j["baselines"][3]["build_s"], 93.5);
  EXPECT_FALSE(j["baselines"][0].contains("build_s")) << "only where a package was built now";
  EXPECT_DOUBLE_EQ(j["speedup"]["eager"].get<double>(), 3.7517 / 0.7144);
  EXPECT_DOUBLE_EQ(j["speedup"]["best"].get<double>(), 2.0);  // max-autotune's 1.4288 ms
  EXPECT_FALSE(j["speedup"].contains("compiled"));
  for (const char* old : {"eager", "scripted", "compiled", "speedup_eager", "speedup_scripted",
                          "speedup_compiled", "compiled_absent"})
    EXPECT_FALSE(j.contains(old)) << old;

  TimingResult back = timing_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.to_json(), j);
  ASSERT_EQ(back.baselines.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(back.baselines[k].kind, t.baselines[k].kind);
    EXPECT_EQ(back.baselines[k].stats.has_value(), t.baselines[k].stats.has_value());
    EXPECT_EQ(back.baselines[k].absent, t.baselines[k].absent);
    EXPECT_EQ(back.baselines[k].build_s, t.baselines[k].build_s);
  }
  EXPECT_FALSE(back.baselines[2].stats);
  EXPECT_EQ(find_baseline(back.baselines, BaselineKind::Compiled)->absent,
            "turned off (--no-compile)");
  EXPECT_EQ(find_baseline(back.baselines, BaselineKind::Scripted)->stats->reps, 39);
  EXPECT_FALSE(find_baseline(back.baselines, BaselineKind::Scripted)->stats->held);

  // The medians as the archive stores them, the absent kind with its reason.
  BaselineTimes m = medians(back.baselines);
  EXPECT_EQ(m.to_json(), (nlohmann::json{{"eager", 3.7517},
                                         {"scripted", 3.7510},
                                         {"compiled_max_autotune", 1.4288},
                                         {"absent", {{"compiled", "turned off (--no-compile)"}}}}));

  // A newer kforge's kind is skipped; the kinds come back in the list's order.
  nlohmann::json newer = j;
  newer["baselines"].push_back({{"kind", "tensorrt"}, {"absent", "not here"}});
  std::swap(newer["baselines"][0], newer["baselines"][3]);
  TimingResult read = timing_from_json(newer);
  ASSERT_EQ(read.baselines.size(), 4u);
  EXPECT_EQ(read.baselines[0].kind, BaselineKind::Eager);
  EXPECT_EQ(read.baselines[3].kind, BaselineKind::CompiledMaxAutotune);
}

TEST(Verdict, ABadBaselineIsRefusedNamingTheField) {
  nlohmann::json j = four_kinds().to_json();
  auto refused = [](const nlohmann::json& bad, const std::string& says) {
    try {
      timing_from_json(bad);
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const kforge::Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  nlohmann::json no_list = j;
  no_list.erase("baselines");
  refused(no_list, "timing: no field \"baselines\"");
  nlohmann::json not_a_list = j;
  not_a_list["baselines"] = {{"eager", 1.0}};
  refused(not_a_list, "timing.baselines: {\"eager\":1.0} is not a list of baselines");
  nlohmann::json no_kind = j;
  no_kind["baselines"][1].erase("kind");
  refused(no_kind, "timing.baselines[1]: no field \"kind\"");
  nlohmann::json bad_reps = j;
  bad_reps["baselines"][0]["reps"] = 2.5;
  refused(bad_reps, "timing.baselines[0].reps: 2.5 is not of the expected type");
  nlohmann::json neither = j;
  neither["baselines"][2].erase("absent");
  refused(neither, "timing.baselines[2]: no field \"absent\"");
  nlohmann::json bad_reason = j;
  bad_reason["baselines"][2]["absent"] = 7;
  refused(bad_reason, "timing.baselines[2].absent: 7 is not of the expected type");
  nlohmann::json bad_build = j;
  bad_build["baselines"][3]["build_s"] = "long";
  refused(bad_build, "timing.baselines[3].build_s: \"long\" is not of the expected type");
  nlohmann::json twice = j;
  twice["baselines"][1]["kind"] = "eager";
  refused(twice, "timing.baselines[1].kind: \"eager\" comes twice");
}

// "x best": the speedup over the fastest kind measured; an absent kind is never the best.
TEST(Verdict, TheBestSpeedupIsOverTheFastestKindMeasured) {
  TimingResult t = four_kinds();
  t.time.median_ms = 0.5;
  EXPECT_DOUBLE_EQ(*t.best_speedup(), 1.4288 / 0.5);  // max-autotune
  EXPECT_DOUBLE_EQ(*t.speedup(BaselineKind::Eager), 3.7517 / 0.5);
  EXPECT_FALSE(t.speedup(BaselineKind::Compiled));  // absent
  t.baselines[3].stats.reset();
  t.baselines[3].absent = "max-autotune turned off";
  EXPECT_DOUBLE_EQ(*t.best_speedup(), 3.7510 / 0.5);  // scripted, a hair faster than eager
  t.baselines[2] = {BaselineKind::Compiled, TimeStats{0.25, 0, 0.25, 10, true}, "", 0};
  EXPECT_DOUBLE_EQ(*t.best_speedup(), 0.5);  // torch.compile beats the kernel
  EXPECT_FALSE(TimingResult{}.best_speedup()) << "no baseline, no best";
}

}  // namespace
