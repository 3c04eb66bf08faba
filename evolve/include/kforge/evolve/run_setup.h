// What `kforge evolve` was asked, made into a run: its config (a config file with the command's
// choices over it, or a resumed run's recorded config), its tasks, the GPU facts its prompts quote,
// and its LLM proposer. The command's options go in; the loop (run.h) takes what comes out.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"
#include "kforge/evolve/batch.h"
#include "kforge/evolve/prompt.h"
#include "kforge/evolve/proposer.h"
#include "kforge/evolve/run.h"

namespace kforge::evolve {

// The command's choices that shape a run's config; each unset one keeps the config file's value
// (or the default).
struct RunRequest {
  std::optional<int64_t> resume;  // continue this run: its recorded config, the rest ignored
                                  // but minutes and evaluations (its new budget totals)
  std::string config_file;        // a run config (TOML, docs/evolve.md)
  std::vector<std::string> tasks;
  std::optional<uint64_t> seed;
  std::string model, llm_config;  // one replaces the other
  bool offline = false;           // no LLM proposer, whatever the config file names
  std::optional<int> generations, lookahead;
  std::optional<int64_t> evaluations;
  std::optional<double> minutes, target_speedup;
  bool no_admit = false;
};

// The request's numbers keep the bounds of the config keys they override: an InputError naming
// the key ("generations", "budget.evaluations", ...) before any work.
void check_request_numbers(const RunRequest& r);
// The run's config: a resumed run's as recorded in the archive `archive` opens (UsageError when
// it has no such run), else the config file's with the request's choices over it (UsageError when
// it names no task; the archive is not opened).
RunConfig run_config_for(const RunRequest& r, const std::function<archive::Archive&()>& archive);
// The run's model or LLM config, checked without asking it anything: an InputError naming
// --model (an unknown provider, a malformed spec), the base URL's variable, or the LLM config
// file's field.
void check_llm_choice(const RunConfig& config);
// The tasks `config` names, loaded from the suites under `root`, each once (a suite and one of
// its tasks named together: once), in the order named.
std::vector<std::shared_ptr<const tasks::Task>> run_tasks(const RunConfig& config,
                                                          const std::filesystem::path& root);
// The GPU facts the prompts quote: those recorded in config.target (a resumed run quotes what it
// quoted, whichever machine of the kind resumes it), else `measured`, then recorded there.
PromptGpu recorded_target(RunConfig& config, PromptGpu measured);

// How a batch folder (--model batch:DIR) is answered.
struct BatchChoice {
  std::string model;             // the requests' PROVIDER:MODEL; "" OpenAI lines, "batch"
  std::optional<double> wait_s;  // per request before the run pauses; none: 24 h
};
// The run's LLM proposer: the LLM config's ensemble, a batch folder (`batch` is set to it), or one
// model over HTTP; null offline. `device`: the prompts' line about the target GPU.
std::unique_ptr<LlmProposer> make_llm_proposer(const RunConfig& config, const BatchChoice& choice,
                                               const std::string& device,
                                               std::shared_ptr<const BatchExchange>& batch);

}  // namespace kforge::evolve
