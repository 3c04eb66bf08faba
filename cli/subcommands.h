// Before CLI11 parses: a missing, unknown or misspelt subcommand is answered here, with the valid
// ones and the nearest match, and `kforge help [COMMAND...]` prints that command's help.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>

namespace kforge::cli {

// The exit code when the arguments end at a command that needs a subcommand, name an unknown one,
// or ask for help; std::nullopt when CLI11 should parse them. Messages go to stderr (help: stdout).
std::optional<int> guide_subcommands(const CLI::App& app, int argc, char** argv);

// "kforge archive top": the command's words from the program down.
std::string command_path(const CLI::App& app);
// The deepest subcommand the arguments selected (during or after parsing), else `app`.
const CLI::App& parsed_command(const CLI::App& app);

}  // namespace kforge::cli
