// The LLM proposer (docs/evolve.md, "The LLM proposer"): a child's prompt rendered from a template
// and the archive (the task, the parents' code, numbers, resources and failure evidence, similar
// tasks' kernels), sent to a model of the ensemble, and the answer turned into proposals. The
// prompt is rendered on the loop's thread (it reads the archive); the requests run on a thread of
// their own, so the GPU goes on measuring while the model answers. Calls, tokens and dollars are
// counted per run and per task for the budgets.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"
#include "kforge/evolve/config.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/llm.h"
#include "kforge/evolve/prompt.h"
#include "kforge/tasks/reference.h"

namespace kforge::evolve {

// What answers cost: every answer the run used, the response cache's too (a resumed run counts
// what the uninterrupted one did, so budgets stop both at the same place); `cached` says how many
// of them this process did not pay for.
// A failed call counts its replies' reported usage too (a reply cut at the token limit is paid
// for). tokens_in counts every input token; tokens_cache_read and tokens_cache_write are the part
// of them the provider's prompt cache served and stored (priced apart).
struct LlmSpent {
  int64_t calls = 0, failed_calls = 0, tokens_in = 0, tokens_out = 0, cached = 0;
  int64_t tokens_cache_read = 0, tokens_cache_write = 0;
  double cost_usd = 0;
  int64_t tokens() const {
    return tokens_in > INT64_MAX - tokens_out ? INT64_MAX : tokens_in + tokens_out;
  }
  void add(const LlmSpent& o);  // saturating: no sum wraps
};

// The run's LLM budgets as the proposer checks them before it asks (0: no limit). The loop checks
// the same numbers between answers (RunConfig's llm_calls, llm_tokens, ...).
struct LlmBudget {
  int64_t calls = 0, tokens = 0, task_tokens = 0;
  double dollars = 0, task_dollars = 0;
};

// One model of the ensemble and what answers it.
struct Voice {
  ModelConfig config;  // spec (recorded with each candidate), weight, temperatures, prices
  std::shared_ptr<const ChatModel> client;
};

// A child to ask for. `parent`: none for translate, the failed child for a repair, the parent to
// optimize or implement ideas for; `second_parent` for crossover. `sample` tells repeated asks of
// one prompt apart (the response cache's key, and the ensemble's draw), so a resumed run that asks
// the same things again is answered from the cache.
struct Ask {
  PromptKind kind = PromptKind::Optimize;
  std::optional<int64_t> parent, second_parent;
  Lineage lineage;
  // The prompt's memory horizon: this run's rows of generations before it (all of them committed
  // when the prompt is rendered); none: the lineage's generation.
  std::optional<int> horizon;
  int sample = 0;
};

class LlmProposer {
 public:
  // `device`: the prompt's line about the target GPU (set_target adds its numbers).
  LlmProposer(std::vector<Voice> voices, const std::string& prompts_dir, std::string device);
  // One model at temperature 1, no prices.
  LlmProposer(std::shared_ptr<const ChatModel> client, const std::string& prompts_dir,
              std::string device);

  // Renders the prompt now; the returned job sends it and parses the answer (call it on any
  // thread). A failed call or an answer without code becomes a Proposal with answer_error:
  // recorded, never thrown; an answer that has not come yet (a batch folder) one with
  // `unanswered`. Ideas asks for `ideas` ideas in words and then for each one's implementation:
  // one proposal per idea.
  std::function<std::vector<Proposal>()> prepare(const Ask& ask,
                                                 const std::shared_ptr<const tasks::Task>& task,
                                                 archive::Archive& archive);

  // The target GPU's facts and archive id for the prompts (docs/evolve.md); without them a prompt
  // has the device line alone and no measured baselines.
  void set_target(PromptGpu gpu, std::optional<int64_t> device_id) {
    gpu_ = std::move(gpu);
    device_id_ = device_id;
  }

  LlmSpent spent() const;
  LlmSpent spent(const std::string& task) const;  // by task id
  // The run is stopping: requests still waiting (a batch exchange) give up.
  void cancel() const;
  // Whether `model` (a lineage's) is one of the ensemble's.
  bool proposes_as(const std::string& model) const;
  std::string models() const;  // "openai:a x2, anthropic:b x1" or the one spec
  int ideas = 3;               // per ideas child
  int concurrency = 4;  // requests the endpoints take at once (the loop keeps that many in flight)
  // Set before the first prepare(). A request is not sent once the run's budget is spent (its
  // proposal is `unanswered`; the loop stops on the same budget); a request takes its call from
  // the budget before it waits for the endpoint, so requests asked at once never send more calls
  // than the budget holds (tokens and dollars are known only once answered: requests in flight when
  // they run out still count). A reply cut at the token limit
  // with no answer (LlmError CutOff) or another paid failure is asked again at most once, and not
  // when the run's or the task's budget is spent.
  LlmBudget budget;
  // Whether the run's budget (`task` empty) or also the task's is spent.
  bool budget_spent(const std::string& task = "") const;

 private:
  std::vector<Proposal> answer(const Voice& v, const ChatRequest& request, const Proposal& blank,
                               int sample, bool expect_code);
  // Takes one call of the run's budget for a request about to be sent (false: the budget, with the
  // calls already taken, is spent, for the run or for `task` when given); give_back_call() when it
  // has been answered or failed, with what it spent (counted in the same hold) or none.
  bool take_call(const std::string& task = "");
  void give_back_call(const std::string& task, const LlmSpent* spent);
  std::vector<Voice> voices_;
  PromptTemplates templates_;
  std::string answer_format_, device_;
  std::optional<PromptGpu> gpu_;
  std::optional<int64_t> device_id_;
  mutable std::mutex spent_mutex_;
  LlmSpent spent_;
  int64_t calls_taken_ = 0;  // requests sent and not yet counted
  std::map<std::string, LlmSpent> by_task_;
};

// The ideas in a model's answer to the ideas prompt: its numbered items ("1. ...", "2) ..."), each
// with the lines that continue it; at most `max`, each cut at kMaxIdeaBytes. Plain code, linear in
// the text (no std::regex: a long line overflowed its recursion).
inline constexpr size_t kMaxIdeaBytes = 16 * 1024;
std::vector<std::string> parse_ideas(const std::string& text, size_t max);

}  // namespace kforge::evolve
