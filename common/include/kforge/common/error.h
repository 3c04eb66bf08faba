// Errors shared by every pipeline stage.
//
// Candidate failures are data (outcomes with evidence), never exceptions. Exceptions are for bad
// user input (a malformed task file: `InputError`, which names the file, line, field and problem)
// and for harness bugs or missing resources (`kforge::Error`).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

namespace kforge {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A problem in something the user wrote: "<file>:<line>: <field>: <problem>".
class InputError : public Error {
 public:
  InputError(std::string file, std::optional<int> line, std::string field, std::string problem)
      : Error(format(file, line, field, problem)),
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
