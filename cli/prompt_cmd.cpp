// `kforge prompt render KIND --task T [--parent ID] [--second-parent ID]`: the prompt kforge would
// send, as the model reads it (the cached context, a blank line, the request); where the context
// ends is said on stderr.
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "candidate_input.h"
#include "command_list.h"
#include "commands.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/location.h"
#include "kforge/evolve/prompt.h"
#include "kforge/verify/driver.h"

namespace kforge::cli {
namespace {

constexpr const char* kKinds =
    "translate, optimize, crossover, repair_compile, repair_wrong, ideas or idea";

struct PromptArgs {
  std::string kind, task, db, prompts_dir, tasks_dir, idea;
  int64_t parent = 0, second_parent = 0, idea_count = 3;
};

// Prints `p` as the model reads it; on stderr, which lines are the context a provider caches.
void print_prompt(const evolve::PromptParts& p, const std::string& task) {
  std::string whole = p.joined();
  std::cout << whole << std::flush;
  if (p.context.empty()) return;
  auto lines = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n') + 1; };
  std::cerr << "kforge prompt render: lines 1-" << lines(p.context)
            << " are the context, the same in every prompt about " << task
            << " on this GPU (a provider caches it); the request starts at line "
            << lines(p.context) + 2 << "\n";
}

}  // namespace

void add_prompt_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<PromptArgs>();
  auto* prompt = app.add_subcommand("prompt", command_description("prompt"));
  prompt->require_subcommand(1);
  auto* render = prompt->add_subcommand("render", "Print the prompt kforge would send");
  render->add_option("kind", a->kind, kKinds)->required();
  render->add_option("--task", a->task, "Task file, suite/name or name")->required();
  render->add_option("--parent", a->parent,
                     "Archive id of the parent candidate (optimize, crossover, repairs)");
  render->add_option("--second-parent", a->second_parent,
                     "Archive id of the second parent (crossover)");
  render->add_option("--idea", a->idea, "The idea to implement (idea)");
  render->add_option("--idea-count", a->idea_count, "How many ideas to ask for (ideas; default 3)");
  render->add_option("--db", a->db, "Archive file (for parents and retrieved kernels)");
  render->add_option("--prompts", a->prompts_dir,
                     "Templates folder (default: $KFORGE_PROMPTS, ./prompts, the source tree's)");
  render->add_option("--tasks-dir", a->tasks_dir, "Folder holding the suites");
  render->callback([&exit_code, a] {
    auto kind = evolve::parse_prompt_kind(a->kind);
    if (!kind) throw InputError("kind", std::nullopt, "", "'" + a->kind + "' is not " + kKinds);
    std::string dir = a->prompts_dir.empty() ? evolve::default_prompts_dir() : a->prompts_dir;
    evolve::PromptTemplates templates =
        evolve::PromptTemplates::load(dir);  // every template checked at start
    tasks::Task task = load_one_task(a->task, a->tasks_dir);
    tasks::Reference ref = tasks::Reference::compile(task);
    std::optional<archive::Archive> ar;
    std::string db = archive::database_path(a->db).string();
    if (::access(db.c_str(), F_OK) == 0)
      ar.emplace(archive::Archive::open(db, false));
    else if (a->parent || a->second_parent)
      throw archive::ArchiveMissing(db + ": no archive here, so no parent candidate can be read");
    evolve::PromptInputs in;
    in.task = &task;
    in.reference = &ref;
    in.archive = ar ? &*ar : nullptr;
    if (a->parent) in.parent = archive::CandidateId{a->parent};
    if (a->second_parent) in.second_parent = archive::CandidateId{a->second_parent};
    in.device = device_line();
    in.gpu = prompt_gpu();
    if (ar && verify::Driver::get()
                  .available()) {  // this GPU's measured baselines, when the archive knows it
      if (std::optional<archive::DeviceId> d = ar->find_device(verify::list_devices().at(0).uuid))
        in.device_id = d->value;
    }
    in.answer_format = evolve::load_answer_format(dir);
    in.extra["idea_count"] = std::to_string(a->idea_count);
    if (!a->idea.empty()) in.extra["idea"] = a->idea;
    print_prompt(evolve::render_prompt_parts(templates, *kind, in), task.id());
    exit_code = kExitOk;
  });
}

}  // namespace kforge::cli
