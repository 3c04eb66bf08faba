// `kforge archive export | import | migrate`: the archive file as a whole.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "archive_cmd.h"
#include "commands.h"
#include "kforge/archive/location.h"
#include "kforge/common/error.h"

namespace kforge::cli {
namespace {

// A failed import into an archive it created leaves no empty archive behind: the file (and its WAL
// and journal files) go when no candidate is in it. An archive that existed before is never
// touched.
void remove_if_empty(const std::string& path) {
  try {
    if (archive::Archive::open_read_only(path).stats().candidates != 0) return;
  } catch (const Error&) {
    std::error_code ec;  // not readable as an archive: removed only when the creation left it empty
    if (std::filesystem::file_size(path, ec) != 0 || ec) return;
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

int export_jsonl(const ArchiveOptions& a, const std::string& file) {
  auto ar = open_existing(a);
  if (file.empty()) {
    ar.export_jsonl(std::cout, "standard output");
    return kExitOk;
  }
  std::ofstream out(file);
  if (!out) throw UsageError("cannot write " + file + ": " + std::strerror(errno));
  size_t n = ar.export_jsonl(out, file);  // checks every write and the final flush
  errno = 0;
  out.close();
  if (out.fail())
    throw UsageError("cannot write the export to " + file +
                     (errno ? std::string(": ") + std::strerror(errno) : "") +
                     "; the export is incomplete");
  std::cerr << "kforge archive export: exported " << n << " candidate(s) to " << file << "\n";
  return kExitOk;
}

int import_jsonl(const ArchiveOptions& a, const std::string& file, bool trust) {
  if (std::filesystem::is_directory(file))
    throw InputError(file, std::nullopt, "", "is a folder, not a JSONL file");
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw InputError(file, std::nullopt, "",
                     std::string("cannot read the file: ") + std::strerror(errno));
  std::string path = archive::database_path(a.db).string();
  bool existed = ::access(path.c_str(), F_OK) == 0;
  archive::ImportReport r;
  try {
    auto ar = archive::Archive::open(path, /*create=*/true);
    r = ar.import_jsonl(in, file, {trust});  // plain or gzipped JSONL (by its first bytes)
    if (r.lines == 0)
      throw InputError(file, std::nullopt, "", "holds no JSONL line; nothing was imported");
  } catch (...) {
    if (!existed) remove_if_empty(path);  // an archive this import created, and nothing went in
    throw;
  }
  std::cout << "imported " << r.lines << " line(s) from " << file << " into " << path << ": "
            << r.new_candidates << " new candidate(s), " << r.known_candidates << " already there; "
            << r.compiles << " compile report(s) and " << r.evaluations << " evaluation(s) added, "
            << r.duplicates << " already there\n";
  if (r.claimed)
    std::cout << r.claimed
              << " evaluation(s) are unverified claims: never winners until kforge measures them "
              << "(--trust for your own exports)\n";
  if (r.trusted)
    std::cout << r.trusted
              << " evaluation(s) trusted as measured (--trust; recorded on each row)\n";
  return kExitOk;
}

int migrate(const ArchiveOptions& a) {
  std::string path = archive::database_path(a.db).string();
  if (::access(path.c_str(), F_OK) != 0)
    throw archive::ArchiveMissing(path + ": no archive here yet");
  auto ar = archive::Archive::open(path, /*create=*/false);
  std::cout << path << ": schema version " << ar.schema_version() << "\n";
  return kExitOk;
}

}  // namespace

void add_archive_export(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto file = std::make_shared<std::string>();
  auto* cmd = add_archive_subcommand(
      archive, "export", "Write every candidate as JSONL (to FILE, or standard output)");
  cmd->add_option("file", *file);
  cmd->callback([&exit_code, a, file] { exit_code = export_jsonl(*a, *file); });
}

void add_archive_import(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto file = std::make_shared<std::string>();
  auto trust = std::make_shared<bool>(false);
  auto* cmd = add_archive_subcommand(
      archive, "import",
      "Read JSONL: kforge's export (its evaluations become unverified claims unless --trust), "
      "or AI CUDA Engineer rows (unverified retrieval text)");
  cmd->add_option("file", *file)->required();
  cmd->add_flag("--trust", *trust,
                "The file is your own export: keep its evaluations as verified (winners possible); "
                "recorded on every row");
  cmd->callback([&exit_code, a, file, trust] { exit_code = import_jsonl(*a, *file, *trust); });
}

void add_archive_migrate(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  add_archive_subcommand(archive, "migrate",
                         "Upgrade an archive written by an older kforge to this kforge's schema "
                         "(read commands never do)")
      ->callback([&exit_code, a] { exit_code = migrate(*a); });
}

}  // namespace kforge::cli
