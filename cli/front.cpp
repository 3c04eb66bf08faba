// `kforge`, the front door: answers --version, --help, `help` and a missing or unknown command in
// milliseconds, and hands every other command to kforge-core (beside it) by exec. kforge-core links
// LibTorch, whose start-up alone takes a second or more; nothing here does.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "command_list.h"
#include "commands.h"
#include "json_output.h"

namespace {

using kforge::cli::kCommands;

void list_commands(std::ostream& os) {
  size_t width = 0;
  for (const auto& c : kCommands) width = std::max(width, c.name.size());
  for (const auto& c : kCommands)
    os << "  " << c.name << std::string(width - c.name.size() + 2, ' ') << c.description << "\n";
}

void print_help(std::ostream& os) {
  os << "kforge: evolves CUDA kernels faster than PyTorch, and verifies them honestly\n"
     << "Usage: kforge COMMAND [OPTIONS] [ARGS]\n\nCommands:\n";
  list_commands(os);
  os << "\n`kforge COMMAND --help` (or `kforge help COMMAND`) says more about one; "
        "`kforge --version` prints the version.\n";
}

// kforge-core in the folder of this executable.
std::string core_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "kforge-core";
  std::string self(buf, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "kforge-core";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << "kforge needs a command:\n";
    list_commands(std::cerr);
    std::cerr << "`kforge COMMAND --help` says more about one.\n";
    return kforge::cli::kExitUsage;
  }
  const std::string& first = args[0];
  if (first == "--version") {
    std::cout << "kforge " << KFORGE_VERSION << "\n";
    return kforge::cli::kExitOk;
  }
  if (first == "--help" || first == "-h" || (first == "help" && args.size() == 1)) {
    print_help(std::cout);
    return kforge::cli::kExitOk;
  }
  std::vector<std::string> names;
  for (const auto& c : kCommands) names.emplace_back(c.name);
  bool known = std::find(names.begin(), names.end(), first) != names.end();
  if (!known && first != "help" && first != "__reference" && first[0] != '-') {
    std::string message = "unknown command '" + first + "'";
    if (auto near = kforge::cli::nearest(first, names))
      message += "; did you mean '" + *near + "'?";
    std::cerr << "kforge: " << message << "\nThe commands of kforge are:\n";
    list_commands(std::cerr);
    if (kforge::cli::json_requested(argc, argv))
      kforge::cli::print_json_refusal("kforge", message, kforge::cli::kExitUsage);
    return kforge::cli::kExitUsage;
  }
  std::string core = core_path();
  std::vector<char*> core_argv(argv, argv + argc + 1);  // argv[0] stays "kforge" for messages
  ::execv(core.c_str(), core_argv.data());
  std::cerr << "kforge: cannot start " << core << ": " << std::strerror(errno)
            << " (kforge-core is built beside kforge; rebuild, or reinstall both)\n";
  return kforge::cli::kExitInternal;
}
