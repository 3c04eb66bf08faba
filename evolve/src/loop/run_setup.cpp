#include "kforge/evolve/run_setup.h"

#include <chrono>
#include <map>
#include <set>

#include "kforge/archive/run_log.h"
#include "kforge/common/error.h"
#include "kforge/evolve/config.h"
#include "kforge/evolve/llm.h"

namespace kforge::evolve {
namespace {

using nlohmann::json;

// The request's numbers over the config's.
void apply_numbers(const RunRequest& r, RunConfig& c) {
  if (r.generations) c.generations = *r.generations;
  if (r.lookahead) c.lookahead = *r.lookahead;
  if (r.evaluations) c.evaluations = *r.evaluations;
  if (r.minutes) c.minutes = *r.minutes;
  if (r.target_speedup) c.target_speedup = *r.target_speedup;
}

}  // namespace

void check_request_numbers(const RunRequest& r) {
  RunConfig c;
  apply_numbers(r, c);
  (void)RunConfig::from_json(c.to_json());  // the config's one rule for its bounds
}

RunConfig run_config_for(const RunRequest& r, const std::function<archive::Archive&()>& archive) {
  if (r.resume) {
    std::optional<json> recorded = archive::RunLog(archive()).config(archive::RunId{*r.resume});
    if (!recorded)
      throw UsageError("--resume: no run " + std::to_string(*r.resume) + " in the archive");
    // A resumed run keeps its config (choices would change what it replays), but for its two
    // run-wide budgets: given again, they are the run's new totals (what it spent counts).
    RunConfig c = RunConfig::from_json(*recorded);
    if (r.minutes) c.minutes = *r.minutes;
    if (r.evaluations) c.evaluations = *r.evaluations;
    return c;
  }
  RunConfig c;
  if (!r.config_file.empty()) c = load_run_config(r.config_file);
  if (!r.tasks.empty()) c.tasks = r.tasks;
  if (r.seed) c.seed = *r.seed;
  if (!r.model.empty()) c.model = r.model, c.llm_config.clear();
  if (!r.llm_config.empty()) c.llm_config = r.llm_config, c.model.clear();
  if (r.offline) c.model.clear(), c.llm_config.clear();
  apply_numbers(r, c);
  if (r.no_admit) c.admit = false;
  if (c.tasks.empty())
    throw UsageError("kforge evolve: which tasks? Name suites or tasks, or `tasks` in --config");
  return c;
}

void check_llm_choice(const RunConfig& config) {
  if (!config.llm_config.empty()) {
    (void)load_llm_config(config.llm_config);  // InputError naming the file and field
    return;
  }
  if (config.model.empty() || config.model.rfind("batch:", 0) == 0) return;
  (void)endpoint_from_spec(config.model);  // InputError naming --model or the base URL's variable
}

std::vector<std::shared_ptr<const tasks::Task>> run_tasks(const RunConfig& config,
                                                          const std::filesystem::path& root) {
  std::vector<std::shared_ptr<const tasks::Task>> out;
  std::set<std::string> named;  // a task named twice (a suite and one of its tasks) runs once
  for (const std::string& spec : config.tasks)
    for (const auto& f : tasks::resolve_tasks(spec, root)) {
      auto t = std::make_shared<const tasks::Task>(tasks::load_task(f));
      if (named.insert(t->id()).second) out.push_back(t);
    }
  return out;
}

// Measured at the run's start and recorded in its config, read back from it on resume (another
// machine of the kind measures a little differently; the prompts, and the answers cached under
// them, must not change).
PromptGpu recorded_target(RunConfig& config, PromptGpu g) {
  json& t = config.target;
  if (t.is_object()) {
    g.name = t.value("name", g.name);
    g.l2_bytes = t.contains("l2_bytes") ? std::optional<int64_t>(t["l2_bytes"].get<int64_t>())
                                        : std::nullopt;
    g.spec_gbps = t.contains("spec_gbps") ? std::optional<double>(t["spec_gbps"].get<double>())
                                          : std::nullopt;
    if (t.contains("measured"))
      g.measured = verify::MeasuredFacts::from_json(t["measured"]);
    else
      g.measured.reset();
    return g;
  }
  t = {{"name", g.name}};
  if (g.l2_bytes) t["l2_bytes"] = *g.l2_bytes;
  if (g.spec_gbps) t["spec_gbps"] = *g.spec_gbps;
  if (g.measured) t["measured"] = g.measured->to_json();
  return g;
}

std::unique_ptr<LlmProposer> make_llm_proposer(const RunConfig& config, const BatchChoice& choice,
                                               const std::string& device,
                                               std::shared_ptr<const BatchExchange>& batch) {
  std::vector<Voice> voices;
  auto cache = std::make_shared<ResponseCache>("");
  int concurrency = 4;  // the loop keeps this many requests in flight
  if (!config.llm_config.empty()) {
    LlmConfig cfg = load_llm_config(config.llm_config);
    // One concurrency limit per provider, and one tokens-per-minute limit per provider that sets
    // one: shared by its models' clients.
    std::map<std::string, std::shared_ptr<ConcurrencyLimit>> limits;
    std::map<std::string, std::shared_ptr<TokenRate>> rates;
    for (const ModelConfig& m : cfg.models) {
      std::string provider = m.provider();
      auto p = cfg.providers.find(provider);
      auto& limit = limits[provider];
      if (!limit)
        limit = std::make_shared<ConcurrencyLimit>(
            p == cfg.providers.end() ? 4 : p->second.concurrency);
      auto& rate = rates[provider];
      if (!rate && p != cfg.providers.end() && p->second.tokens_per_minute > 0)
        rate = std::make_shared<TokenRate>(p->second.tokens_per_minute);
      voices.push_back({m, std::make_shared<const LlmClient>(cfg.endpoint(m), cfg.policy(m),
                                                             nullptr, limit, cache, rate)});
    }
    concurrency = 0;
    for (const auto& [provider, limit] : limits) {
      auto p = cfg.providers.find(provider);
      concurrency += p == cfg.providers.end() ? 4 : p->second.concurrency;
    }
  } else if (config.model.rfind("batch:", 0) == 0) {
    auto wait = choice.wait_s
                    ? std::chrono::milliseconds(static_cast<int64_t>(1000 * *choice.wait_s))
                    : std::chrono::hours(24);
    std::string dir = config.model.substr(6);
    // Without a batch model: OpenAI Batch API lines whose body's model is "batch" (as before).
    if (choice.model.empty())
      batch = std::make_shared<const BatchExchange>(dir, "batch", wait);
    else
      batch = std::make_shared<const BatchExchange>(dir, endpoint_from_spec(choice.model), wait);
    voices.push_back({model_config(choice.model.empty() ? "batch" : choice.model), batch});
    concurrency = 64;  // a batch folder takes every request the loop has ready
  } else if (!config.model.empty()) {
    auto client =
        std::make_shared<const LlmClient>(endpoint_from_spec(config.model), RetryPolicy{}, nullptr,
                                          std::make_shared<ConcurrencyLimit>(4), cache);
    voices.push_back({model_config(client->model()), client});
  }
  if (voices.empty()) return nullptr;
  auto proposer = std::make_unique<LlmProposer>(std::move(voices), default_prompts_dir(), device);
  proposer->concurrency = concurrency;
  return proposer;
}

}  // namespace kforge::evolve
