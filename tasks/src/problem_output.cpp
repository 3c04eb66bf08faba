#include "problem_output.h"

namespace kforge::tasks {

void ProblemOutput::begin(const std::string& who) {
  end();
  who_ = who;
}

void ProblemOutput::end() {
  if (!line_.empty() || cut_bytes_ > 0) show_line();
  if (lines_hidden_ > 0)
    show_(who_, "(" + std::to_string(lines_hidden_) + " more line(s) not shown)");
  if (dropped_ > 0)
    show_(who_, "(" + std::to_string(dropped_) + " more byte(s) printed, not kept)");
  lines_shown_ = lines_hidden_ = 0;
  dropped_ = 0;
}

void ProblemOutput::take(const std::string& text) {
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      show_line();
    } else if (line_.size() >= kShownLineBytes) {
      ++cut_bytes_;
    } else {  // a terminal's escape sequences and carriage returns stay the problem's
      line_ += (c < 0x20 && c != '\t') || c == 0x7f ? '?' : ch;
    }
  }
}

void ProblemOutput::show_line() {
  if (lines_shown_ < kShownLines) {
    ++lines_shown_;
    show_(who_,
          cut_bytes_ > 0 ? line_ + " ... (" + std::to_string(cut_bytes_) + " bytes cut)" : line_);
  } else {
    ++lines_hidden_;
  }
  line_.clear();
  cut_bytes_ = 0;
}

}  // namespace kforge::tasks
