// GPUs in other processes (issue 23, docs/scale.md). `kforge evolve --gpus` (a worker per local
// GPU) and `--worker-command` (workers started by srun, ssh, kubectl exec) judge on a pool of GPU
// workers (worker_pool.h), each a `kforge gpu-worker` with a Judge on one GPU.
//
// Each Gpu call is one job: what to do (a GpuJobKind: "verify", "screen", "admit", "baselines",
// "profile"), the task as its file's text (the worker loads it as the parent did and checks its
// content hash) with the dims to run, and the candidate's code; the worker compiles the code again
// for its GPU (of the parent's kind: the same binary) and answers with the verdict as JSON
// (verify::to_json). A verdict names the GPU that gave it (Verdict::gpu_uuid); its timing holds the
// baselines that GPU timed beside the candidate. Only the parent writes the archive.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/compile/compiler.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/worker_pool.h"
#include "kforge/verify/device_facts.h"

namespace kforge::evolve {

struct RemoteGpuOptions {
  WorkerPoolOptions pool;
  // A job's time limit on a worker; one that overruns it is hung: taken out, its job given to
  // another. The judge's own limits (a kernel that hangs) end far sooner.
  std::chrono::milliseconds deadline{std::chrono::minutes(10)};
};

// What a GPU job asks of a worker: the Gpu call it stands for. The job's "kind" field spells it as
// to_string does ("verify", "screen", "admit", "baselines", "profile"); parents and workers of
// other builds read the same spellings.
enum class GpuJobKind { Verify, Screen, Admit, Baselines, Profile };
std::string_view to_string(GpuJobKind kind);
std::optional<GpuJobKind> gpu_job_kind_from_string(std::string_view name);  // none: not a kind
// "verify, screen, admit, baselines, profile": for messages that list them.
std::string gpu_job_kinds_text();

// A GPU's kind, "NVIDIA H200 (compute capability 9.0)": GPUs of one kind give comparable times.
std::string gpu_kind(const verify::DeviceInfo& gpu);

// A Gpu whose calls are jobs for a pool of GPU workers. The constructor starts the workers and
// checks what they report: a hello with a field missing or of the wrong type (hello_problem) takes
// that worker out; the rest must be of one GPU kind (name and compute capability: times of
// different kinds are not comparable) and harness version. It throws WorkerError when none starts
// or they disagree.
//
// An answer that is malformed for its job (answer_problem: a verdict with a field missing, say)
// takes its worker out, the reason naming the field, and the job goes to another. A job that
// `pool.max_attempts` workers failed on (each died, hung or broke the protocol on it) is the
// candidate's harness_error and the run goes on; when no worker is left a call throws WorkerError
// naming each worker and why it was taken out (the run ends "failed" and `kforge evolve --resume`
// continues it).
class RemoteGpu : public Gpu {
 public:
  explicit RemoteGpu(RemoteGpuOptions options);
  ~RemoteGpu() override;

  verify::Verdict verify(const tasks::Task& task, const Checked& c) override;
  verify::Verdict screen(const tasks::Task& task, const Checked& c) override;
  verify::Verdict admit(const tasks::Task& unseen, const Checked& c) override;
  std::optional<verify::Baselines> baselines(const tasks::Task& task) override;
  nlohmann::json profile(const tasks::Task& task, const Checked& c) override;
  std::string profiler() const override;
  verify::DeviceInfo device() const override;
  std::string driver() const override;
  std::vector<verify::DeviceInfo> devices() const override;
  int parallel() const override;

  // Each worker: alive or why it was taken out, and the jobs it answered.
  std::vector<WorkerState> workers() const;
  // What the first worker said of its GPU: for a parent without a GPU of its own, the facts it
  // checks candidates and draws tune spaces for, and those its prompts quote (its bandwidth
  // measured).
  compile::DeviceFacts facts() const;
  std::optional<verify::MeasuredFacts> measured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What the parent checks of a worker's hello and of its answer to a job of `kind`: "" when it is
// right, else the problem naming the field ("verdict: no field \"flags\"").
std::string hello_problem(const nlohmann::json& hello);
std::string answer_problem(GpuJobKind kind, const nlohmann::json& answer);

// The worker's reading of a line from its parent, {"op":"job","id":N,"job":{...}}. Throws
// InputError naming "the parent's job line" and the field (the worker then ends: it has no id to
// answer).
struct JobLine {
  int64_t id = 0;
  nlohmann::json job;
};
JobLine read_job_line(std::string_view line);

// A job, read and checked: its kind (a spelling that is no GpuJobKind is refused, naming the field
// "kind"); its task, loaded from the parent's copy of the file at the job's dims and check dims
// (the task's own dims, each an integer from 1, its constraints holding, every input's size
// positive); the candidate's code, plan and tunables. Throws InputError naming "the parent's job"
// and the field (the worker answers with it).
struct GpuJob {
  GpuJobKind kind = GpuJobKind::Verify;
  std::shared_ptr<const tasks::Task> task;
  std::string source, plan;  // the candidate's (not for baselines)
  compile::Tunables tunables;
};
GpuJob read_gpu_job(const nlohmann::json& job);

struct GpuWorkerOptions {
  std::string address;  // HOST:PORT of the parent's pool
  int worker = 0;
  std::string token;           // the pool's ($KFORGE_WORKER_TOKEN)
  compile::DeviceFacts facts;  // of this worker's GPU, for its compiles
  std::optional<verify::MeasuredFacts>
      measured;  // its bandwidth and FLOP rates, for the parent's prompts
  compile::CompilerOptions compiler;
};

// The worker's side: connects to the parent, says hello with gpu.device() and answers jobs with
// `gpu` until the parent closes the connection (returns then). A job that is wrong (read_gpu_job)
// is answered with {"error": why}. An exception from the GPU (it failed) ends the worker: the
// parent gives the job to another. Throws kforge::Error when it cannot connect, InputError on a
// line that is not a job (read_job_line) or is longer than 16 MiB.
void serve_gpu_jobs(const GpuWorkerOptions& options, Gpu& gpu);

}  // namespace kforge::evolve
