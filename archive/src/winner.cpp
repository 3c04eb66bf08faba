#include "kforge/archive/winner.h"

namespace kforge::archive {

bool is_winner(const Judged& e, bool admission_required) {
  return e.correct && e.timed && !e.flagged && e.verified && !e.claimed &&
         (e.admitted || !admission_required);
}

std::string winner_condition(bool admitted) {
  return std::string("e.outcome = 'correct'") + (admitted ? " AND e.admitted = 1" : "") +
         " AND e.flags = '[]' AND c.verified = 1 AND e.time_ms IS NOT NULL AND e.import_trust IS "
         "NOT 'claimed'";
}

std::string field_condition() {
  return "e.outcome = 'correct' AND c.verified = 1 AND e.time_ms IS NOT NULL AND e.import_trust "
         "IS NOT 'claimed' AND e.flags NOT LIKE '%\"suspicious\"%' AND e.flags NOT LIKE "
         "'%\"clock_slowdown\"%'";
}

}  // namespace kforge::archive
