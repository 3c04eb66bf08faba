// An LLM answer (markdown) split into its CUDA source and its JSON launch plan
// (docs/answer-format.md). Errors are written to be sent back to the LLM as they are.
#pragma once

#include <string>

#include "kforge/common/error.h"

namespace kforge::compile {

class AnswerError : public Error {
 public:
  using Error::Error;
};

struct Answer {
  std::string source;
  int source_first_line = 1;  // the answer line holding the CUDA block's first line
  std::string plan;
  int plan_first_line = 1;
};

Answer parse_answer(const std::string& markdown);

// The task a corpus answer names in an HTML comment, `<!-- task: suite/name -->` (its first
// line by convention); "" when there is none.
std::string task_named_in(const std::string& markdown);

}  // namespace kforge::compile
