// What the problems' own code prints during a KernelBench import or a model's profile or check
// (print(), warnings, tracebacks; tasks/src/kernelbench_import.cpp). Each problem's process prints
// into a pipe of its own, which kforge's helper sends on kforge's channel in order with the
// problem's start and result, never to kforge's terminal directly. kforge shows it a whole line at
// a time, labelled with the problem, before the problem's outcome. So nothing a problem prints can
// break into kforge's own lines, pass for one (a forged "converted" line) or be shown under
// another problem's name, and a problem that prints without end floods nothing: control
// characters are shown as '?', a line is cut at kShownLineBytes and a problem's output after
// kShownLines lines is counted, not shown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace kforge::tasks {

class ProblemOutput {
 public:
  static constexpr size_t kShownLineBytes = 2000;
  static constexpr size_t kShownLines = 200;  // per problem
  // A line to show: the problem that printed it and the line.
  using Show = std::function<void(const std::string& who, const std::string& line)>;

  explicit ProblemOutput(Show show) : show_(std::move(show)) {}

  // The output from here on is `who`'s (a problem that started).
  void begin(const std::string& who);
  // What the problem printed next, as the helper sent it (lines may span calls).
  void take(const std::string& text);
  // The helper did not send `bytes` more bytes the problem printed (past its own cap).
  void dropped(int64_t bytes) { dropped_ += bytes; }
  // The problem ended: its unfinished last line, then how much was not shown.
  void end();

 private:
  void show_line();

  Show show_;
  std::string who_;
  std::string line_;        // the line under way, at most kShownLineBytes
  size_t cut_bytes_ = 0;    // bytes of the line under way past kShownLineBytes
  size_t lines_shown_ = 0;  // of who_'s
  size_t lines_hidden_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace kforge::tasks
