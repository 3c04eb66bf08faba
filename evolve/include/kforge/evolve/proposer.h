// The LLM proposer (docs/evolve.md, "The LLM proposer"): a child's prompt rendered from a template
// and the archive (the task, the parent's code, numbers, resources and failure evidence, similar
// tasks' kernels), sent through an LlmClient, and the answer turned into a Proposal. The prompt is
// rendered on the loop's thread (it reads the archive); the request runs on a thread of its own, so
// the GPU goes on measuring while the model answers. Calls and tokens are counted for the budgets.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kforge/archive/archive.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/llm.h"
#include "kforge/evolve/prompt.h"
#include "kforge/tasks/reference.h"

namespace kforge::evolve {

struct LlmSpent {
  int64_t calls = 0, failed_calls = 0, tokens_in = 0, tokens_out = 0, cached = 0;
};

class LlmProposer {
 public:
  // `device` is the prompt's line about the target GPU.
  LlmProposer(std::shared_ptr<const ChatModel> client, const std::string& prompts_dir, std::string device,
              double temperature = 1.0);

  // One child of `kind` (its parent: none for translate, the failed child for a repair). Renders
  // the prompt now; the returned job sends it and parses the answer (call it on any thread). A
  // failed call or an answer without code becomes a Proposal with answer_error: recorded, never
  // thrown. `sample` tells repeated asks of one prompt apart (the response cache's key), so a
  // resumed run that asks the same things again is answered from the cache.
  std::function<Proposal()> prepare(PromptKind kind, const std::shared_ptr<const tasks::Task>& task,
                                    archive::Archive& archive, std::optional<int64_t> parent, Lineage lineage,
                                    int sample);

  // The target GPU's facts and archive id for the prompts (docs/evolve.md); without them a prompt
  // has the device line alone and no measured baselines.
  void set_target(PromptGpu gpu, std::optional<int64_t> device_id) {
    gpu_ = std::move(gpu);
    device_id_ = device_id;
  }

  LlmSpent spent() const;
  // The run is stopping: requests still waiting (a batch exchange) give up.
  void cancel() const { client_->cancel(); }
  const std::string& model() const { return model_; }

 private:
  std::shared_ptr<const ChatModel> client_;
  std::string model_;
  PromptTemplates templates_;
  std::string answer_format_, device_;
  std::optional<PromptGpu> gpu_;
  std::optional<int64_t> device_id_;
  double temperature_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<tasks::Reference>> references_;  // by task content hash
  mutable std::mutex spent_mutex_;
  LlmSpent spent_;
};

}  // namespace kforge::evolve
