// `kforge archive stats | tasks | top | results | review | show | source | lineage | diff | search
// | runs | export | import | migrate`: each subcommand in its own function (archive_cmd.h).
#include "archive_cmd.h"

#include "command_list.h"
#include "commands.h"
#include "kforge/archive/location.h"
#include "table.h"

namespace kforge::cli {

archive::Archive open_existing(const ArchiveOptions& a) {
  return archive::Archive::open_read_only(archive::database_path(a.db).string());
}

CLI::App* add_archive_subcommand(CLI::App* archive, const char* name, const char* help) {
  CLI::App* s = archive->add_subcommand(name, help);
  s->fallthrough();
  return s;
}

void add_archive_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ArchiveOptions>();
  auto* cmd = app.add_subcommand("archive", command_description("archive"));
  cmd->require_subcommand(1);
  cmd->add_option("--db", a->db,
                  "Archive file (default: $KFORGE_DB, else $XDG_DATA_HOME/kforge/archive.db)");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  add_wide_flag(cmd);
  add_archive_stats(cmd, a, exit_code);
  add_archive_tasks(cmd, a, exit_code);
  add_archive_top(cmd, a, exit_code);
  add_archive_results(cmd, a, exit_code);
  add_archive_review(cmd, a, exit_code);
  add_archive_show(cmd, a, exit_code);
  add_archive_source(cmd, a, exit_code);
  add_archive_lineage(cmd, a, exit_code);
  add_archive_diff(cmd, a, exit_code);
  add_archive_search(cmd, a, exit_code);
  add_archive_runs(cmd, a, exit_code);
  add_archive_export(cmd, a, exit_code);
  add_archive_import(cmd, a, exit_code);
  add_archive_migrate(cmd, a, exit_code);
}

}  // namespace kforge::cli
