// A one-line status on a terminal ("[3/28] level1/relu: judging"), rewritten in place on stderr
// and cleared before the command prints its own lines. Only on a terminal, so logs and pipes stay
// clean; KFORGE_PROGRESS=always or never overrides the check (always: for a test, or a log that
// wants it).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "kforge/common/strings.h"

namespace kforge::cli {

class Progress {
 public:
  Progress() {
    const char* mode = std::getenv("KFORGE_PROGRESS");
    std::string m = mode ? mode : "";
    on_ = m == "always" || (m != "never" && ::isatty(STDERR_FILENO) == 1);
  }
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void show(const std::string& text) {
    if (!on_) return;
    std::string line = printable(text);
    if (line.size() > kWidth) line = line.substr(0, kWidth - 3) + "...";
    std::cerr << "\r\033[K" << line << std::flush;  // carriage return, erase the line
    shown_ = true;
  }
  bool on() const { return on_; }
  void clear() {
    if (!on_ || !shown_) return;
    std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  static constexpr size_t kWidth = 78;  // fits the narrowest usual terminal
  bool on_ = false, shown_ = false;
};

}  // namespace kforge::cli
