#include "kforge/verify/outcome.h"

namespace kforge::verify {

const std::vector<Outcome>& all_outcomes() {
  static const std::vector<Outcome> all = {
      Outcome::CompileError,     Outcome::PlanError,       Outcome::LaunchError,      Outcome::RuntimeError,
      Outcome::Timeout,          Outcome::WrongResult,     Outcome::InputModified,    Outcome::OutOfBoundsWrite,
      Outcome::OutOfBoundsRead,  Outcome::IncompleteOutput, Outcome::Nondeterministic, Outcome::HarnessError,
      Outcome::Correct};
  return all;
}

std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::CompileError: return "compile_error";
    case Outcome::PlanError: return "plan_error";
    case Outcome::LaunchError: return "launch_error";
    case Outcome::RuntimeError: return "runtime_error";
    case Outcome::Timeout: return "timeout";
    case Outcome::WrongResult: return "wrong_result";
    case Outcome::InputModified: return "input_modified";
    case Outcome::OutOfBoundsWrite: return "out_of_bounds_write";
    case Outcome::OutOfBoundsRead: return "out_of_bounds_read";
    case Outcome::IncompleteOutput: return "incomplete_output";
    case Outcome::Nondeterministic: return "nondeterministic";
    case Outcome::HarnessError: return "harness_error";
    case Outcome::Correct: return "correct";
  }
  return "?";
}

std::optional<Outcome> outcome_from_string(std::string_view s) {
  for (Outcome o : all_outcomes())
    if (to_string(o) == s) return o;
  return std::nullopt;
}

}  // namespace kforge::verify
