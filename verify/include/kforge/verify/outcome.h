// Verdicts: the outcome of verifying one candidate, its flags and the evidence behind them
// (DESIGN.md, Verification). Candidate failures are data; only harness bugs throw.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kforge::verify {

enum class Outcome {
  CompileError,
  PlanError,
  LaunchError,
  RuntimeError,
  Timeout,
  WrongResult,
  InputModified,
  OutOfBoundsWrite,
  OutOfBoundsRead,
  IncompleteOutput,
  Nondeterministic,
  HarnessError,
  Correct,
};

// The archive's spelling: "compile_error", ..., "correct".
std::string_view to_string(Outcome o);
std::optional<Outcome> outcome_from_string(std::string_view s);
const std::vector<Outcome>& all_outcomes();

inline constexpr const char* kFlagBitwiseUnstable = "bitwise_unstable";
inline constexpr const char* kFlagSuspicious = "suspicious";

struct Verdict {
  Outcome outcome = Outcome::HarnessError;
  std::vector<std::string> flags;
  std::string summary;                                   // one line for humans
  nlohmann::json evidence = nlohmann::json::object();    // what the archive stores
  bool correct() const { return outcome == Outcome::Correct; }
};

}  // namespace kforge::verify
