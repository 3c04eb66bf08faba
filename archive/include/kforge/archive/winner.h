// The winner rule: which evaluations are winners, and which winner is a task's best. Every "best"
// in kforge (the loop, `kforge report`, the web view, the exporter, `kforge archive`) asks it here.
#pragma once

#include <string>

namespace kforge::archive {

// What the rule reads of one evaluation: a judgment in memory or a row of the archive.
struct Judged {
  bool correct = false;   // outcome correct
  bool timed = false;     // has a time
  bool flagged = false;   // carries any flag (suspicious, rejected, ...)
  bool admitted = false;  // passed admission (unseen dims)
  bool verified = true;   // its candidate was made or verified by kforge, not imported text
  bool claimed = false;   // an imported evaluation kept as an unverified claim
};

// A winner: correct, timed, unflagged, verified, not a claim, and admitted unless
// `admission_required` is false (`kforge export --include-unadmitted`, `kforge evolve --no-admit`).
// A task's best is its fastest winner; on equal times, the one judged first.
bool is_winner(const Judged& e, bool admission_required = true);

// What every rule below starts from, as SQL over an evaluation `e` joined to its candidate `c`
// (archive/ only): correct, timed, verified, not a claim; flags and admission not asked.
std::string correct_condition();

// The winner rule as SQL over `e` and `c`: correct_condition, unflagged, admitted if asked.
std::string winner_condition(bool admitted = true);

// The field's metrics (archive/field_metrics.h) ask less than the winner rule, as KernelBench
// does: a correct, timed, verified verdict that is not a claim counts, admitted or not, and so does
// a `bitwise_unstable` one (KernelBench asks no bitwise-stable results: atomics are fine). A
// verdict whose timing kforge does not trust counts neither as correct nor as fast: `suspicious`
// (faster than the roofline floor allows, how skipped work looks) until `kforge archive review
// --accept` clears the flag, and `clock_slowdown`. SQL over `e` and `c`, like winner_condition.
std::string field_condition();

}  // namespace kforge::archive
