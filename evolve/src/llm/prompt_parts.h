// The parts of a prompt's context, which prompt.cpp assembles: the task in words and the GPU's
// facts (prompt_task.cpp), and what the archive remembers: measurements, parents, similar tasks'
// kernels and this task's failures (prompt_memory.cpp).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/evolve/prompt.h"

namespace kforge::evolve::prompt_parts {

// ---- The task and the GPU (prompt_task.cpp) ----

// The task's dims in the order they first appear in its inputs' shapes (inputs in order, each shape
// left to right), then in the inputs' init bounds, then the rest by name. An output's shape is
// the reference's, a function of the inputs' shapes, so it names no dim of its own.
std::vector<std::string> ordered_dims(const tasks::Task& t);
// "M=2048, K=8192, N=4096" in `order`; names `d` holds that `order` lacks follow by name.
std::string format_dims(const tasks::Dims& d, const std::vector<std::string>& order);
// {{task_tensors}}: each input's dtype, shape, shape expressions and values; each output's.
std::string task_tensors(const tasks::Task& t, const tasks::Reference& ref);
// {{judging}}: the acceptance rule with this task's tolerances, math mode, compile flags, timing.
std::string judging(const tasks::Task& t, const tasks::Reference& ref);
// {{gpu_facts}}: a short list, each fact saying whether it was measured, read from the driver or
// is the arch's specification.
std::string gpu_facts(const PromptGpu& g);
// The roofline floor on `g` (the judge's formula) when its bandwidth and peaks were measured.
std::optional<double> roofline_floor_ms(const tasks::Task& t, const tasks::Reference& ref,
                                        const PromptGpu& g);
std::string format_ms(double ms);

// ---- The archive (prompt_memory.cpp) ----

// {{eager_time}} and {{roofline_floor}} from what was measured: the baselines table for the target
// GPU (in.device_id), else the newest judged candidate of this task version from earlier runs (the
// floor too, unless `floor_known`). Leaves `v` as it is where nothing was measured. Returns whether
// the baselines table gave eager's time.
bool fill_measured(const PromptInputs& in, bool floor_known, std::map<std::string, std::string>& v);
// The parent's (`prefix` "parent_" or "second_parent_") placeholders; its own measurement of eager
// and of the roofline floor replaces the task's where the baselines table had none.
void fill_parent(const PromptInputs& in, const std::string& prefix,
                 std::optional<archive::CandidateId> id, bool baselines_measured,
                 std::map<std::string, std::string>& v);
// Similar tasks' kernels, one markdown block each, the best ranked first.
std::vector<std::string> retrieved_kernels(const PromptInputs& in);
// Up to `k` notable distinct failures of this task version, one markdown line each, the most
// notable first: each outcome's newest first (a wrong result with where and expected vs got, a
// compile error's first line, a timeout, an out-of-bounds access), then others. Earlier runs' rows
// made before in.run started, and in.run's own candidates of generations before in.generation.
std::vector<std::string> notable_failures(const PromptInputs& in, size_t k);

}  // namespace kforge::evolve::prompt_parts
