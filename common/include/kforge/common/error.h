// Errors shared by every pipeline stage.
//
// Candidate failures are data (outcomes with evidence), never exceptions. Exceptions are for bad
// user input (`UsageError`: a wrong argument; `InputError`, a malformed file, names the file, line,
// field and problem; the CLI exits 2) and for harness bugs or a machine failing under kforge
// (`kforge::Error`: a file that cannot be written, a process that cannot start; exit 4).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

namespace kforge {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A wrong argument or a bad input found while using it (no such task, a reference that fails).
class UsageError : public Error {
 public:
  using Error::Error;
};

// A problem in something the user wrote: "<file>:<line>: <field>: <problem>".
class InputError : public UsageError {
 public:
  InputError(std::string file, std::optional<int> line, std::string field, std::string problem)
      : UsageError(format(file, line, field, problem)),
        file_(std::move(file)),
        line_(line),
        field_(std::move(field)),
        problem_(std::move(problem)) {}

  const std::string& file() const { return file_; }
  std::optional<int> line() const { return line_; }
  const std::string& field() const { return field_; }
  const std::string& problem() const { return problem_; }

 private:
  static std::string format(const std::string& file, std::optional<int> line,
                            const std::string& field, const std::string& problem) {
    std::string s = file;
    if (line) s += ":" + std::to_string(*line);
    s += ": ";
    if (!field.empty()) s += field + ": ";
    return s + problem;
  }
  std::string file_;
  std::optional<int> line_;
  std::string field_;
  std::string problem_;
};

}  // namespace kforge
