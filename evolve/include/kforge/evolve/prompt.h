// Prompt templates (prompts/*.md, loaded at run time so users edit them without rebuilding) and
// the context that fills them. A template naming an unknown placeholder, or a missing template,
// is an error when the templates load — never a half-filled prompt.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "kforge/archive/archive.h"
#include "kforge/archive/lineage.h"
#include "kforge/compile/plan.h"
#include "kforge/tasks/reference.h"
#include "kforge/verify/device_facts.h"

namespace kforge::evolve {

// Ideas asks for optimisation ideas in words; Idea for one idea's implementation ({{idea}}).
enum class PromptKind { Translate, Optimize, Crossover, RepairCompile, RepairWrong, Ideas, Idea };
// translate, optimize, crossover, repair_compile, repair_wrong, ideas, idea
std::string_view prompt_kind_name(PromptKind k);
std::optional<PromptKind> parse_prompt_kind(std::string_view name);
// How an answer to a prompt of `kind` was made, as its candidate is stored: the kind of the same
// spelling, Ideas' kernels as Idea (each is one idea's implementation).
archive::LineageKind lineage_kind(PromptKind kind);

// Every placeholder a template may use ({{name}}).
const std::set<std::string>& known_placeholders();
// Those whose values are the same in every prompt about one task on one GPU (the answer format,
// the target, the task, how it is judged): the only ones context.md may use.
const std::set<std::string>& context_placeholders();

class PromptTemplates {
 public:
  // Loads <dir>/<kind>.md for every kind, and <dir>/context.md where there is one (without it each
  // kind's template is the whole prompt); throws InputError naming the file, line and placeholder.
  static PromptTemplates load(const std::string& dir);
  std::set<std::string> placeholders(PromptKind kind) const;
  // Throws kforge::Error naming any placeholder the template uses that `values` lacks.
  std::string render(PromptKind kind, const std::map<std::string, std::string>& values) const;
  // Whether the folder has context.md; its placeholders (none without one); it filled ("" without).
  bool has_context() const { return context_.has_value(); }
  std::set<std::string> placeholders_in_context() const;
  std::string render_context(const std::map<std::string, std::string>& values) const;

 private:
  struct Template {
    std::string text, file;
  };
  std::map<PromptKind, Template> kinds_;
  std::optional<Template> context_;
};

// $KFORGE_PROMPTS, else ./prompts, else the source tree's prompts/.
std::string default_prompts_dir();
// docs/answer-format.md beside the prompts folder: the one answer specification, less the parts
// between <!-- not-in-prompt --> and <!-- /not-in-prompt --> (what only kforge needs).
std::string load_answer_format(const std::string& prompts_dir);

// The target GPU's facts for {{gpu_facts}}: what plans may assume (`plan.measured`: SMs and shared
// memory read from the driver, else the usual GPU of `plan.arch`) and, where the GPU was measured,
// its bandwidth and matmul peaks. What neither holds is quoted from the arch's specification.
struct PromptGpu {
  std::string name;  // "NVIDIA H200"; "" when no GPU was read
  compile::DeviceFacts plan;
  std::optional<int64_t> l2_bytes;                // from the driver
  std::optional<double> spec_gbps;                // memory clock x bus width, from the driver
  std::optional<verify::MeasuredFacts> measured;  // stream bandwidth and matmul peaks
};

struct PromptInputs {
  const tasks::Task* task = nullptr;
  const tasks::Reference* reference = nullptr;
  archive::Archive* archive = nullptr;  // for parents and retrieval; may be null
  std::optional<archive::CandidateId> parent, second_parent;
  std::string device;            // a line describing the target GPU
  std::optional<PromptGpu> gpu;  // its facts ({{gpu_facts}}); none: the line alone
  std::optional<int64_t>
      device_id;  // the target GPU's archive id: measured baselines are read for it
  std::string answer_format;
  size_t retrieved = 3;
  std::optional<int64_t> run;  // retrieval reads only what earlier runs made (resume asks the same)
  // The child's generation in `run`: failures of this run's candidates of earlier generations are
  // quoted (none of this run's without it), so a resumed run renders the same prompt.
  std::optional<int> generation;
  // render_prompt's budget (tokens estimated as characters / 4): retrieved kernels, the lowest
  // ranked first, then failures are left out (the prompt says how many) until the prompt fits.
  size_t max_tokens = 12000;
  // Values for placeholders the archive does not fill (an ideas prompt's idea_count, idea).
  std::map<std::string, std::string> extra;
};

// The values of every known placeholder (those without data say so in words), everything
// retrieved included (no budget: it depends on the template).
std::map<std::string, std::string> prompt_context(const PromptInputs& in);
// A prompt in two parts: `context`, the same for every prompt about one task on one GPU (the
// answer format, the target, the task and how it is judged: prompts/context.md), and `body`, this
// prompt's own part (its kind's template). The context goes first so a provider's prompt cache
// serves it again; it is "" when the prompts folder has no context.md.
struct PromptParts {
  std::string context, body;
  std::string joined() const { return context.empty() ? body : context + "\n\n" + body; }
};
// The prompt of `kind` for `in`, both parts within in.max_tokens together.
PromptParts render_prompt_parts(const PromptTemplates& templates, PromptKind kind,
                                const PromptInputs& in);
// The same, joined as the model reads it.
std::string render_prompt(const PromptTemplates& templates, PromptKind kind,
                          const PromptInputs& in);

}  // namespace kforge::evolve
