// `kforge archive`'s subcommands, one small function each (cli/archive_*.cpp): options in, one
// library call, printing out. add_archive_command (archive_cmd.cpp) registers them in order.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "kforge/archive/archive.h"

namespace kforge::cli {

// `kforge archive`'s own options, which every subcommand reads.
struct ArchiveOptions {
  std::string db;     // --db: the archive file ("" the default one)
  bool json = false;  // --json: machine-readable output
};
using SharedArchiveOptions = std::shared_ptr<const ArchiveOptions>;

// Read commands open the file read-only: they never create, migrate or change it.
archive::Archive open_existing(const ArchiveOptions& a);
// A subcommand of `archive` that takes the parent's options after its own (--db, --json).
CLI::App* add_archive_subcommand(CLI::App* archive, const char* name, const char* help);

// Listings (archive_lists.cpp).
void add_archive_stats(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_tasks(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_top(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_results(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_search(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_runs(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
// One candidate or two (archive_candidates.cpp).
void add_archive_review(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_show(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_source(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_lineage(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_diff(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
// The file as a whole (archive_files.cpp).
void add_archive_export(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_import(CLI::App* archive, SharedArchiveOptions a, int& exit_code);
void add_archive_migrate(CLI::App* archive, SharedArchiveOptions a, int& exit_code);

}  // namespace kforge::cli
