// `--json` asks for a command's result as JSON on stdout, its progress on stderr; a command refused
// (bad arguments, a missing file, no GPU, a kforge bug) then says so as JSON too, as well as on
// stderr:
//   {"error": {"command": "kforge evolve", "message": "...", "exit_code": 2, "kind": "usage"}}
#pragma once

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kforge::cli {

// `--json` among the arguments (before a `--`, after which arguments are not kforge's).
inline bool json_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") return false;
    if (a == "--json") return true;
  }
  return false;
}

// The exit code's kind (README.md, "Exit codes").
inline const char* exit_kind(int code) {
  switch (code) {
    case 1:
      return "findings";
    case 2:
      return "usage";
    case 3:
      return "no_gpu";
    case 4:
      return "internal";
    case 75:
      return "waiting";
    default:
      return "other";
  }
}

inline void print_json_refusal(const std::string& command, const std::string& message, int code) {
  nlohmann::json j = {{"error",
                       {{"command", command},
                        {"message", message},
                        {"exit_code", code},
                        {"kind", exit_kind(code)}}}};
  std::cout << j.dump(2) << std::endl;
}

// A command whose text goes to std::cout from many places, with --json: while this lives, std::cout
// writes to stderr, and json_out() is the real standard output, for the one JSON result.
class StdoutToStderr {
 public:
  explicit StdoutToStderr(bool on) : saved_(on ? std::cout.rdbuf(std::cerr.rdbuf()) : nullptr) {}
  ~StdoutToStderr() {
    if (saved_) std::cout.rdbuf(saved_);
  }
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;
  void print(const nlohmann::json& result) const {
    std::ostream(saved_ ? saved_ : std::cout.rdbuf()) << result.dump(2) << std::endl;
  }

 private:
  std::streambuf* saved_;
};

}  // namespace kforge::cli
