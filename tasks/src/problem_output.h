// What the problems' own code prints during a KernelBench import or a model's profile or check
// (print(), warnings, tracebacks; tasks/src/kernelbench_import.cpp). It reaches kforge on a pipe of
// its own, never kforge's terminal directly, and is shown a whole line at a time, each line
// labelled with the problem that printed it. So nothing a problem prints can break into kforge's
// own lines or pass for one (a forged "converted" line), and a problem that prints without end
// floods nothing: control characters are shown as '?', a line is cut at kShownLineBytes and a
// problem's output after kShownLines lines is counted, not shown.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "kforge/common/process.h"

namespace kforge::tasks {

class ProblemOutput {
 public:
  static constexpr size_t kShownLineBytes = 2000;
  static constexpr size_t kShownLines = 200;  // per problem
  // A line to show: who printed it ("kforge's importer" outside any problem) and the line.
  using Show = std::function<void(const std::string& who, const std::string& line)>;

  // Reads `read_end` (made non-blocking here); `idle` names whoever prints outside a problem.
  ProblemOutput(UniqueFd read_end, std::string idle, Show show);

  // The pipe's read end to wait on; -1 once every writer has closed it.
  int fd() const { return fd_.get(); }
  // Shows what has arrived, without waiting; at most a few MiB a call, so that a problem printing
  // without end does not keep its caller from its deadline.
  void read_available();
  // The output from here on is `who`'s (a problem that started).
  void begin(const std::string& who);
  // The current problem ended: its unfinished last line, then how many lines were not shown.
  // Later output is the idle writer's.
  void end();

 private:
  void take(const char* data, size_t n);
  void show_line();

  UniqueFd fd_;
  std::string idle_, who_;
  Show show_;
  std::string line_;        // the line under way, at most kShownLineBytes
  size_t cut_bytes_ = 0;    // bytes of the line under way past kShownLineBytes
  size_t lines_shown_ = 0;  // of who_'s
  size_t lines_hidden_ = 0;
};

}  // namespace kforge::tasks
