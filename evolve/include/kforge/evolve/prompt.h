// Prompt templates (prompts/*.md, loaded at run time so users edit them without rebuilding) and
// the context that fills them. A template naming an unknown placeholder, or a missing template,
// is an error when the templates load — never a half-filled prompt.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "kforge/archive/archive.h"
#include "kforge/tasks/reference.h"

namespace kforge::evolve {

// Ideas asks for optimisation ideas in words; Idea for one idea's implementation ({{idea}}).
enum class PromptKind { Translate, Optimize, Crossover, RepairCompile, RepairWrong, Ideas, Idea };
// translate, optimize, crossover, repair_compile, repair_wrong, ideas, idea
std::string_view prompt_kind_name(PromptKind k);
std::optional<PromptKind> parse_prompt_kind(std::string_view name);

// Every placeholder a template may use ({{name}}).
const std::set<std::string>& known_placeholders();

class PromptTemplates {
 public:
  // Loads <dir>/<kind>.md for every kind; throws InputError naming the file, line and placeholder.
  static PromptTemplates load(const std::string& dir);
  std::set<std::string> placeholders(PromptKind kind) const;
  // Throws kforge::Error naming any placeholder the template uses that `values` lacks.
  std::string render(PromptKind kind, const std::map<std::string, std::string>& values) const;

 private:
  std::map<PromptKind, std::string> text_;
  std::map<PromptKind, std::string> file_;
};

// $KFORGE_PROMPTS, else ./prompts, else the source tree's prompts/.
std::string default_prompts_dir();
// docs/answer-format.md beside the prompts folder: the one answer specification.
std::string load_answer_format(const std::string& prompts_dir);

struct PromptInputs {
  const tasks::Task* task = nullptr;
  const tasks::Reference* reference = nullptr;
  archive::Archive* archive = nullptr;  // for parents and retrieval; may be null
  std::optional<archive::CandidateId> parent, second_parent;
  std::string device;                   // a line describing the target GPU
  std::string answer_format;
  size_t retrieved = 3;
  std::optional<int64_t> run;           // retrieval reads only what earlier runs made (resume asks the same)
};

// The values of every known placeholder (those without data say so in words).
std::map<std::string, std::string> prompt_context(const PromptInputs& in);

}  // namespace kforge::evolve
