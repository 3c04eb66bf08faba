#include "subcommands.h"

#include <algorithm>
#include <iostream>

#include "command_list.h"
#include "commands.h"
#include "json_output.h"
#include "kforge/common/strings.h"

namespace kforge::cli {
namespace {

// The subcommands a user may name (hidden ones, like the reference child's, have no description).
std::vector<std::string> visible_subcommands(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub :
       app.get_subcommands([](const CLI::App* s) { return !s->get_description().empty(); }))
    names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> names_of(const CLI::App& app) {
  return visible_subcommands(app);
}

std::string listing(const CLI::App& app) {
  std::string out;
  size_t width = 0;
  for (const std::string& n : visible_subcommands(app)) width = std::max(width, n.size());
  for (const std::string& n : visible_subcommands(app))
    out += "  " + n + std::string(width - n.size() + 2, ' ') +
           const_cast<CLI::App&>(app).get_subcommand(n)->get_description() + "\n";
  return out;
}

}  // namespace

std::string command_path(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; a; a = a->get_parent())
    path = a->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

const CLI::App& parsed_command(const CLI::App& app) {
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  return *at;
}

std::optional<int> guide_subcommands(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const CLI::App* at = &app;
  size_t i = 0;
  bool help = false;
  if (!args.empty() && args[0] == "help") help = true, ++i;
  // Walk down while the next word names a subcommand; options are left to CLI11.
  while (i < args.size() && !visible_subcommands(*at).empty() && !args[i].empty() &&
         args[i][0] != '-') {
    std::vector<std::string> names = visible_subcommands(*at);
    if (std::find(names.begin(), names.end(), args[i]) == names.end()) {
      if (at == &app && args[i] == "__reference")
        return std::nullopt;  // the hidden reference child
      std::string message = "unknown command '" + printable(args[i]) + "'";
      if (auto near = nearest(args[i], names)) message += "; did you mean '" + *near + "'?";
      std::cerr << command_path(*at) << ": " << message << "\nThe commands of " << command_path(*at)
                << " are:\n"
                << listing(*at);
      if (json_requested(argc, argv)) print_json_refusal(command_path(*at), message, kExitUsage);
      return kExitUsage;
    }
    at = const_cast<CLI::App*>(at)->get_subcommand(args[i]);
    ++i;
  }
  if (help) {  // "Usage: kforge archive top", not "Usage: top"
    std::cout << at->help(at->get_parent() ? command_path(*at->get_parent()) : "");
    return kExitOk;
  }
  if (!visible_subcommands(*at).empty() && i == args.size()) {
    std::cerr << command_path(*at) << " needs a command:\n"
              << listing(*at) << "`" << command_path(*at)
              << " COMMAND --help` says more about one.\n";
    if (json_requested(argc, argv))
      print_json_refusal(command_path(*at), "needs a command: " + join(names_of(*at), ", "),
                         kExitUsage);
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace kforge::cli
