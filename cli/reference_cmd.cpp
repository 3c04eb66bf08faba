// The hidden `kforge __reference` mode: the child process tasks::ReferenceChild starts to run a
// task's reference under limits (tasks/reference_child.h). kforge runs it, people do not.
#include "commands.h"
#include "kforge/tasks/reference_child.h"

namespace kforge::cli {

void add_reference_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(tasks::kReferenceMode, "");
  cmd->group("");  // hidden
  cmd->callback([&exit_code] {
    exit_code = kExitOk;
    tasks::serve_reference_requests();  // exits the process
  });
}

}  // namespace kforge::cli
