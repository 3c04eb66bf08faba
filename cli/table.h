// Plain-text tables for terminal output. Cells may hold candidate, LLM or archive text: each is
// made printable (kforge::printable) and kept on one line.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include "kforge/common/strings.h"

namespace kforge::cli {

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
  void print(std::ostream& os = std::cout) const {
    std::vector<size_t> width;
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) {
        if (width.size() <= i) width.push_back(0);
        width[i] = std::max(width[i], r[i].size());
      }
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
      }
      os << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kforge::cli
