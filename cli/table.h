// Plain-text tables for terminal output. Cells may hold candidate, LLM or archive text: each is
// made printable (kforge::printable) and kept on one line.
// Width: a table printed to standard output fits the width when there is one, that is COLUMNS
// (when set to a number) or else the terminal's width; the widest columns are cut with "...".
// A pipe or file without COLUMNS gets whole rows, and so does `--wide` (add_wide_flag).
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kforge/common/strings.h"

namespace kforge::cli {

// `v` with `digits` digits after the point, for table cells and summary lines.
inline std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// Set by --wide: tables print whole cells whatever the width.
inline bool& wide_tables() {
  static bool wide = false;
  return wide;
}

inline void add_wide_flag(CLI::App* cmd) {
  cmd->add_flag("--wide", wide_tables(),
                "Print tables whole (else they are cut to the terminal's width or COLUMNS)");
}

// The width tables on standard output must fit: COLUMNS if it is a positive number, else the
// terminal's; none for a pipe or a file, or with --wide.
inline std::optional<size_t> output_width() {
  if (wide_tables()) return std::nullopt;
  if (const char* env = std::getenv("COLUMNS"); env && *env) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (*end == '\0' && n > 0) return static_cast<size_t>(n);
  }
  winsize ws{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return std::nullopt;
}

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) {
    for (std::string& cell : row) {
      std::string safe;
      for (char c : printable(cell))
        safe += c == '\n' ? std::string("\\n") : c == '\t' ? std::string(" ") : std::string(1, c);
      cell = std::move(safe);
    }
    rows_.push_back(std::move(row));
  }
  // To standard output: fitted to output_width(). Elsewhere (or with max_width none): whole.
  void print(std::ostream& os = std::cout) const {
    print(os, &os == &std::cout ? output_width() : std::nullopt);
  }
  void print(std::ostream& os, std::optional<size_t> max_width) const {
    std::vector<size_t> width;
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) {
        if (width.size() <= i) width.push_back(0);
        width[i] = std::max(width[i], columns(r[i]));
      }
    if (max_width) fit(width, *max_width);
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        std::string cell = cut(r[i], width[i]);
        line += cell;
        if (i + 1 < r.size()) line += std::string(width[i] - columns(cell) + 2, ' ');
      }
      os << line << "\n";
    }
  }

 private:
  static constexpr size_t kMinColumn = 6;  // three characters and "..."
  static constexpr size_t kGap = 2;

  // Display columns of printable UTF-8 text: one per code point (continuation bytes add none).
  static size_t columns(const std::string& s) {
    return static_cast<size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  }
  // The text in at most `width` columns: whole, or its start and "...".
  static std::string cut(const std::string& s, size_t width) {
    if (columns(s) <= width) return s;
    if (width <= 3) return std::string(width, '.');
    size_t keep = width - 3, i = 0;
    for (size_t seen = 0; i < s.size(); ++i)
      if ((s[i] & 0xC0) != 0x80 && seen++ == keep) break;
    return s.substr(0, i) + "...";
  }
  // Narrows the widest columns, one column at a time, until a line fits `max_width` or every
  // column is down to kMinColumn (or its own width, if less); then lines stay wider.
  static void fit(std::vector<size_t>& width, size_t max_width) {
    if (width.empty()) return;
    size_t total = (width.size() - 1) * kGap;
    for (size_t w : width) total += w;
    while (total > max_width) {
      auto widest = std::max_element(width.begin(), width.end());
      if (*widest <= kMinColumn) break;
      --*widest;
      --total;
    }
  }

  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kforge::cli
