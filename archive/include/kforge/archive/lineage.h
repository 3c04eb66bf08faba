// How a candidate came to be, as the candidates table stores it: `prompt_kind` (how it was made)
// and `origin` (kforge's own judgment or an imported claim). Each value has one spelling, the one
// to_string gives and the columns, JSONL lines and export manifests hold; code compares the enums,
// never the text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kforge::archive {

// How a candidate was made (the `prompt_kind` column):
//   manual          given by hand (`kforge corpus`'s default)
//   seed            a task's seed kernel (tasks/SUITE/seeds/NAME.md)
//   archive         a correct kernel of the task version from the archive, judged again
//   tune            a tune point of a parent's kernel, proposed by the offline tuner
//   import          a line of an AI CUDA Engineer file (`kforge archive import`)
//   translate, optimize, crossover, repair_compile, repair_wrong, idea
//                   an LLM's answer to that prompt (evolve's PromptKind; "ideas" asks for ideas in
//                   words, and each idea's kernel is an "idea")
enum class LineageKind {
  Manual,
  Seed,
  Archive,
  Tune,
  Import,
  Translate,
  Optimize,
  Crossover,
  RepairCompile,
  RepairWrong,
  Idea
};
// Every kind, in the order above.
const std::vector<LineageKind>& lineage_kinds();
std::string_view to_string(LineageKind kind);  // the stored spelling: "manual", "repair_wrong"
std::optional<LineageKind> lineage_kind_from_string(std::string_view name);  // none: not a kind
// "manual, seed, archive, ...": for messages and help that list them.
std::string lineage_kinds_text();

// Where a candidate's judgment comes from (the `origin` column): kforge's own, or an imported
// claim.
enum class Origin { Kforge, Imported };
std::string_view to_string(Origin origin);                        // "kforge", "imported"
std::optional<Origin> origin_from_string(std::string_view name);  // none: not an origin

}  // namespace kforge::archive
