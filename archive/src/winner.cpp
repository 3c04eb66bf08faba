#include "kforge/archive/winner.h"

namespace kforge::archive {

bool is_winner(const Judged& e, bool admission_required) {
  return e.correct && e.timed && !e.flagged && e.verified && !e.claimed &&
         (e.admitted || !admission_required);
}

std::string correct_condition() {
  return "e.outcome = 'correct' AND e.time_ms IS NOT NULL AND c.verified = 1 AND e.import_trust IS "
         "NOT 'claimed'";
}

std::string winner_condition(bool admitted) {
  return correct_condition() + (admitted ? " AND e.admitted = 1" : "") + " AND e.flags = '[]'";
}

std::string field_condition() {
  return correct_condition() +
         " AND e.flags NOT LIKE '%\"suspicious\"%' AND e.flags NOT LIKE '%\"clock_slowdown\"%'";
}

}  // namespace kforge::archive
