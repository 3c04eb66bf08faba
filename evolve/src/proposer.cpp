#include "kforge/evolve/proposer.h"

#include "kforge/compile/answer.h"

namespace kforge::evolve {

LlmProposer::LlmProposer(std::shared_ptr<const ChatModel> client, const std::string& prompts_dir, std::string device,
                         double temperature)
    : client_(std::move(client)),
      model_(client_->model()),
      templates_(PromptTemplates::load(prompts_dir)),
      answer_format_(load_answer_format(prompts_dir)),
      device_(std::move(device)),
      temperature_(temperature) {}

std::function<Proposal()> LlmProposer::prepare(PromptKind kind, const std::shared_ptr<const tasks::Task>& task,
                                               archive::Archive& archive, std::optional<int64_t> parent,
                                               Lineage lineage, int sample) {
  const tasks::Reference* reference;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& r = references_[task->content_hash];
    if (!r) r = std::make_unique<tasks::Reference>(tasks::Reference::compile(*task));
    reference = r.get();
  }
  PromptInputs in;
  in.task = task.get();
  in.reference = reference;
  in.archive = &archive;
  if (parent) in.parent = archive::CandidateId{*parent};
  in.run = lineage.run;
  in.generation = lineage.generation;
  in.device = device_;
  in.gpu = gpu_;
  in.device_id = device_id_;
  in.answer_format = answer_format_;
  ChatRequest request;
  request.system = "You are an expert CUDA engineer. Answer in the format the prompt gives.";
  request.user = render_prompt(templates_, kind, in);
  request.temperature = temperature_;
  lineage.prompt_kind = std::string(prompt_kind_name(kind));
  lineage.model = model_;
  return [this, request, task, lineage, sample, kind]() {
    Proposal p;
    p.task = task;
    p.lineage = lineage;
    p.label = std::string(prompt_kind_name(kind)) + "-answer.md";
    ChatResponse r;
    try {
      r = client_->chat(request, sample);
      {
        std::lock_guard<std::mutex> lock(spent_mutex_);
        ++spent_.calls;
        spent_.tokens_in += r.tokens_in, spent_.tokens_out += r.tokens_out, spent_.cached += r.cached;
      }
      compile::Answer a = compile::parse_answer(r.text);
      p.source = a.source, p.plan = a.plan, p.first_line = a.source_first_line;
    } catch (const LlmError& e) {
      std::lock_guard<std::mutex> lock(spent_mutex_);
      ++spent_.failed_calls;
      p.answer_error = std::string("no answer from the model: ") + e.what();
    } catch (const compile::AnswerError& e) {
      p.source = r.text;  // what the model said instead, kept as the candidate's evidence
      p.answer_error = e.what();
    }
    return p;
  };
}

LlmSpent LlmProposer::spent() const {
  std::lock_guard<std::mutex> lock(spent_mutex_);
  return spent_;
}

}  // namespace kforge::evolve
