// `kforge archive stats | tasks | top | show | source | lineage | diff | search | runs | export |
// import`.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "command_list.h"
#include "commands.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/location.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/task.h"
#include "table.h"

namespace kforge::cli {
namespace {

using nlohmann::json;

struct ArchiveArgs {
  std::string db, task, suite, query, file, kind;
  int64_t id = 0, other = 0;
  size_t limit = 20;
  bool json = false, trust = false, winners = false;
};

// Read commands open the file read-only: they never create, migrate or change it.
archive::Archive open_existing(const ArchiveArgs& a) {
  return archive::Archive::open_read_only(archive::database_path(a.db).string());
}

// "Geometric mean over the 58 of 61 tasks with a kernel: 1.42x eager, 1.40x scripted, 1.05x compile
// (over 57); median roofline 61%."
std::string results_summary(const json& rows) {
  double log_eager = 0, log_scripted = 0, log_compiled = 0;
  size_t with = 0, scripted = 0, compiled = 0;
  std::vector<double> roofline;
  for (const auto& r : rows) {
    if (!r["speedup_eager"].is_number()) continue;
    ++with, log_eager += std::log(r["speedup_eager"].get<double>());
    if (r["speedup_scripted"].is_number() && r["speedup_scripted"].get<double>() > 0)
      ++scripted, log_scripted += std::log(r["speedup_scripted"].get<double>());
    if (r["speedup_compiled"].is_number() && r["speedup_compiled"].get<double>() > 0)
      ++compiled, log_compiled += std::log(r["speedup_compiled"].get<double>());
    if (r["roofline_fraction"].is_number())
      roofline.push_back(r["roofline_fraction"].get<double>());
  }
  if (with == 0) return "No task has a kernel here yet.\n";
  std::string out =
      "Geometric mean over the " + std::to_string(with) + " of " + std::to_string(rows.size()) +
      " tasks with a kernel: " + fixed(std::exp(log_eager / static_cast<double>(with)), 2) +
      "x eager";
  if (scripted > 0)
    out += ", " + fixed(std::exp(log_scripted / static_cast<double>(scripted)), 2) + "x scripted";
  if (compiled > 0)  // torch.compile's time may be missing where eager's is not: say over how many
    out += ", " + fixed(std::exp(log_compiled / static_cast<double>(compiled)), 2) + "x compile" +
           (compiled < with ? " (over " + std::to_string(compiled) + ")" : "");
  if (!roofline.empty()) {
    std::sort(roofline.begin(), roofline.end());
    out += "; median roofline fraction " + fixed(100 * roofline[roofline.size() / 2], 0) + "%";
  }
  return out + ".\n";
}

std::string ms(const std::optional<double>& v) {
  if (!v) return "-";
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << *v;
  return os.str();
}

std::string speedup(const std::optional<double>& v) {
  if (!v) return "-";
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << *v << "x";
  return os.str();
}

int print_summaries(const std::vector<archive::KernelSummary>& ks, bool as_json,
                    const std::string& empty) {
  if (as_json) {
    json j = json::array();
    for (const auto& k : ks) j.push_back(archive::to_json(k));
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  if (ks.empty()) {
    std::cout << empty << "\n";
    return kExitOk;
  }
  Table t({"ID", "TASK", "OUTCOME", "BEST MS", "VS EAGER", "MODEL", "KIND", "VERIFIED"});
  for (const auto& k : ks)
    t.add({std::to_string(k.id.value), k.task, k.outcome, ms(k.time_ms), speedup(k.speedup_eager),
           k.model.empty() ? "-" : k.model, k.prompt_kind.empty() ? "-" : k.prompt_kind,
           k.verified ? "yes" : "no (imported)"});
  t.print();
  return kExitOk;
}

// Why a list of winners is empty, and where the seeds' times are instead.
std::string no_winners(const std::string& suite) {
  return "no winners yet: no candidate of these tasks has been admitted as a winner (correct, "
         "admitted by `kforge verify --admit` or `kforge corpus --admit`, unflagged, measured by "
         "kforge).\n"
         "Seeds are stored as kind seed: `kforge archive results " +
         (suite.empty() ? std::string("SUITE") : suite) +
         " --kind seed` shows each task's fastest correct seed.";
}

// A suite named on the command line must exist: in the tasks folder, or in the archive (imports
// make suites of their own). Otherwise a usage error naming it and the suites there are.
void require_suite(archive::Archive& ar, const std::string& option, const std::string& suite) {
  std::set<std::string> known;
  std::filesystem::path root = tasks::default_tasks_root();
  std::error_code ec;
  for (const auto& dir : std::filesystem::directory_iterator(root, ec)) {
    if (!dir.is_directory(ec)) continue;
    for (const auto& f : std::filesystem::directory_iterator(dir.path(), ec))
      if (f.path().extension() == ".toml") {
        known.insert(dir.path().filename().string());
        break;
      }
  }
  for (const auto& t : ar.tasks_overview()) {
    std::string id = t["task"].get<std::string>();
    known.insert(id.substr(0, id.find('/')));
  }
  if (known.count(suite)) return;
  throw InputError(
      option, std::nullopt, "",
      "no suite '" + suite + "' in the tasks folder (" + root.string() + ") or in " +
          ar.db().path() + "; suites: " +
          (known.empty() ? "none"
                         : join(std::vector<std::string>(known.begin(), known.end()), ", ")));
}

// " (torch.compile not measured: why)" where a timed evaluation's judge said why it has no
// torch.compile time; "" otherwise.
std::string compiled_absent(const json& e) {
  if (!e["speedup_compiled"].is_null() || !e["evidence"].is_object()) return "";
  const json timing = e["evidence"].value("timing", json());
  if (!timing.is_object() || !timing.value("compiled_absent", json()).is_string()) return "";
  std::string why = timing["compiled_absent"].get<std::string>();
  return why.empty() ? "" : " (torch.compile not measured: " + why + ")";
}

json require_candidate(archive::Archive& ar, int64_t id) {
  json c = ar.show(archive::CandidateId{id});
  if (c.is_null())
    throw archive::ArchiveError("no candidate " + std::to_string(id) + " in " + ar.db().path());
  return c;
}

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

}  // namespace

void add_archive_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ArchiveArgs>();
  auto* cmd = app.add_subcommand("archive", command_description("archive"));
  cmd->require_subcommand(1);
  cmd->add_option("--db", a->db,
                  "Archive file (default: $KFORGE_DB, else $XDG_DATA_HOME/kforge/archive.db)");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  add_wide_flag(cmd);
  auto sub = [&](const char* name, const char* help) {
    auto* s = cmd->add_subcommand(name, help);
    s->fallthrough();
    return s;
  };

  sub("stats", "Counts: tasks, candidates, evaluations, winners, LLM calls and cost")
      ->callback([&exit_code, a] {
        auto ar = open_existing(*a);
        archive::Stats s = ar.stats();
        nlohmann::ordered_json j = {{"database", ar.db().path()},
                                    {"schema_version", ar.schema_version()},
                                    {"tasks", s.tasks},
                                    {"candidates", s.candidates},
                                    {"imported", s.imported},
                                    {"compiles", s.compiles},
                                    {"evaluations", s.evaluations},
                                    {"correct_evaluations", s.correct},
                                    {"claimed_evaluations", s.claimed},
                                    {"winners", s.winners},
                                    {"runs", s.runs},
                                    {"llm_calls", s.llm_calls},
                                    {"llm_cost_usd", s.llm_cost_usd}};
        if (a->json)
          std::cout << j.dump(2) << "\n";
        else
          for (auto it = j.begin(); it != j.end(); ++it)
            std::cout << std::left << std::setw(22) << it.key() << it.value().dump() << "\n";
        exit_code = kExitOk;
      });
  sub("tasks", "Tasks in the archive with candidate counts and best times")
      ->callback([&exit_code, a] {
        auto ar = open_existing(*a);
        json j = ar.tasks_overview();
        if (a->json) {
          std::cout << j.dump(2) << "\n";
        } else if (j.empty()) {
          std::cout << "no tasks in " << ar.db().path()
                    << " yet: `kforge verify`, `kforge corpus` and `kforge archive import` "
                    << "store candidates with their tasks\n";
        } else {
          Table t({"TASK", "VERSION", "CANDIDATES", "CORRECT", "BEST MS"});
          std::set<std::string> suites;
          bool any_winner = false;
          for (const auto& r : j) {
            t.add({r["task"], r["version"].get<std::string>().substr(0, 12),
                   std::to_string(r["candidates"].get<int64_t>()),
                   std::to_string(r["correct_evaluations"].get<int64_t>()),
                   r["best_ms"].is_null() ? "-" : ms(r["best_ms"].get<double>())});
            std::string id = r["task"].get<std::string>();
            suites.insert(id.substr(0, id.find('/')));
            any_winner = any_winner || !r["best_ms"].is_null();
          }
          t.print();
          if (!any_winner)  // BEST MS is a winner's time
            std::cout << "\n" << no_winners(suites.size() == 1 ? *suites.begin() : "") << "\n";
        }
        exit_code = kExitOk;
      });
  auto* top = sub("top", "Winners (correct, admitted, unflagged), best speedup first");
  top->add_option("--task", a->task, "suite/name or name");
  top->add_option("--suite", a->suite, "suite");
  top->add_option("--limit", a->limit, "rows")->capture_default_str();
  top->callback([&exit_code, a] {
    auto ar = open_existing(*a);
    if (!a->suite.empty()) require_suite(ar, "--suite", a->suite);
    std::string suite = a->suite.empty() && a->task.find('/') != std::string::npos
                            ? a->task.substr(0, a->task.find('/'))
                            : a->suite;
    exit_code = print_summaries(ar.top(!a->task.empty() ? a->task : a->suite, a->limit), a->json,
                                no_winners(suite));
  });
  auto* results =
      sub("results",
          "Per task of a suite: the fastest correct kernel (of one kind, e.g. seed) with eager, "
          "scripted and torch.compile times, speedups and roofline fraction, as a markdown table "
          "(docs/results.md)");
  results->add_option("suite", a->suite, "suite")->required();
  results->add_option("--kind", a->kind,
                      "only candidates made as this kind (seed, optimize, manual, ...)");
  results->add_flag("--winners", a->winners,
                    "only winners: correct, admitted and unflagged (what kforge evolve keeps)");
  results->callback([&exit_code, a] {
    auto ar = open_existing(*a);
    require_suite(ar, "suite", a->suite);
    json rows = ar.results(a->suite, a->kind, a->winners);
    if (a->json) {
      std::cout << rows.dump(2) << "\n";
      exit_code = kExitOk;
      return;
    }
    auto num = [](const json& v, int digits, double scale = 1, const char* unit = "") {
      if (v.is_null()) return std::string("-");
      std::ostringstream os;
      os << std::fixed << std::setprecision(digits) << v.get<double>() * scale << unit;
      return os.str();
    };
    std::set<std::string> devices, harness;
    std::vector<std::string> absent;  // "task: why torch.compile's time is missing"
    std::cout << "| task | eager ms | scripted ms | compile ms | "
              << (a->kind.empty() ? "best" : a->kind)
              << " ms | x eager | x scripted | x compile | roofline | tunables |\n"
              << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const auto& r : rows) {
      std::string tuned;
      if (r["tunables"].is_object())
        for (const auto& [k, v] : r["tunables"].items())
          tuned += (tuned.empty() ? "" : " ") + k + "=" + v.dump();
      std::cout << "| " << r["task"].get<std::string>() << " | " << num(r["eager_ms"], 4) << " | "
                << num(r["scripted_ms"], 4) << " | " << num(r["compiled_ms"], 4) << " | "
                << num(r["time_ms"], 4) << " | " << num(r["speedup_eager"], 2) << " | "
                << num(r["speedup_scripted"], 2) << " | " << num(r["speedup_compiled"], 2) << " | "
                << num(r["roofline_fraction"], 0, 100, "%") << " | " << tuned << " |\n";
      if (r["compiled_absent"].is_string())
        absent.push_back(r["task"].get<std::string>() + ": " +
                         r["compiled_absent"].get<std::string>());
      if (!r["device"].is_null()) devices.insert(r["device"].get<std::string>());
      if (!r["harness_version"].is_null())
        harness.insert(std::to_string(r["harness_version"].get<int64_t>()));
    }
    std::cout
        << "\n"
        << results_summary(rows) << "\nDevice: "
        << (devices.empty() ? "-"
                            : join(std::vector<std::string>(devices.begin(), devices.end()), ", "))
        << "; harness version "
        << (harness.empty() ? "-"
                            : join(std::vector<std::string>(harness.begin(), harness.end()), ", "))
        << "; roofline = floor / time; compile = torch.compile (TorchInductor, ahead of time).\n";
    if (!absent.empty()) {
      std::cout << "\nNo torch.compile time (x compile \"-\"):\n";
      for (const auto& line : absent) std::cout << "- " << printable(line) << "\n";
    }
    exit_code = kExitOk;
  });
  auto* review = sub("review", "Accept or reject a candidate whose timing was flagged suspicious");
  auto note = std::make_shared<std::string>();
  review->add_option("id", a->id, "The candidate")->required();
  auto accept = std::make_shared<bool>(false), reject = std::make_shared<bool>(false);
  auto* accept_flag = review->add_flag("--accept", *accept,
                                       "The speedup is real: the flag goes, the kernel may win");
  auto* reject_flag = review->add_flag("--reject", *reject,
                                       "It is not: the evaluation stays flagged, marked rejected");
  accept_flag->excludes(reject_flag);
  review->add_option("--note", *note, "Why (kept with the decision)");
  review->callback([&exit_code, a, accept, reject, note] {
    if (!*accept && !*reject) throw UsageError("kforge archive review: give --accept or --reject");
    archive::Archive ar =
        archive::Archive::open(archive::database_path(a->db).string(), /*create=*/false);
    int64_t e = ar.review(archive::CandidateId{a->id}, *accept, *note);
    std::cout << "candidate " << a->id << ": evaluation " << e
              << (*accept ? " accepted" : " rejected") << "\n";
    exit_code = kExitOk;
  });

  auto* show = sub("show", "Everything about one candidate: lineage, compile report, evaluations");
  show->add_option("id", a->id)->required();
  show->callback([&exit_code, a] {
    auto ar = open_existing(*a);
    json c = require_candidate(ar, a->id);
    if (a->json) {
      std::cout << c.dump(2) << "\n";
    } else {
      std::ostringstream out;  // archive text may come from anywhere: printed through printable()
      out << "candidate " << c["id"] << " of " << c["task"].get<std::string>() << " ("
          << c["origin"].get<std::string>() << (c["verified"].get<bool>() ? "" : ", unverified")
          << ")\n  identity   " << c["identity"].get<std::string>() << "\n  generation "
          << c["generation"] << ", island " << c["island"] << ", "
          << c["prompt_kind"].get<std::string>() << " by "
          << (c["model"].get<std::string>().empty() ? "-" : c["model"].get<std::string>())
          << "\n  parents    " << c["parents"].dump() << "\n  tunables   " << c["tunables"].dump()
          << "\n  created    " << c["created_at"].get<std::string>() << "\n";
      for (const auto& cr : c["compiles"])
        out << "  compile    "
            << (cr["ok"].get<bool>() ? "ok" : "failed at " + cr["stage"].get<std::string>()) << " "
            << cr["resources"].dump() << "\n";
      for (const auto& e : c["evaluations"])
        out << "  evaluation " << e["outcome"].get<std::string>() << " " << e["flags"].dump()
            << " time " << (e["time_ms"].is_null() ? "-" : ms(e["time_ms"].get<double>()))
            << " ms, vs eager "
            << (e["speedup_eager"].is_null() ? "-" : speedup(e["speedup_eager"].get<double>()))
            << ", vs compile "
            << (e["speedup_compiled"].is_null() ? "-"
                                                : speedup(e["speedup_compiled"].get<double>()))
            << compiled_absent(e) << ", harness v" << e["harness_version"]
            << (e["import"].is_null() ? ""
                : e["import"]["trust"] == "trusted"
                    ? " (trusted import)"
                    : " (claimed by " + e["import"]["from"].dump() + ", unverified)")
            << "\n";
      if (!c["imported"].empty()) out << "  imported   " << c["imported"].dump() << "\n";
      if (!c["import"].is_null())
        out << "  from       " << c["import"]["from"].dump() << " ("
            << (c["import"]["trust"] == "trusted" ? "trusted import" : "unverified claims")
            << ")\n";
      std::cout << printable(out.str());
    }
    exit_code = kExitOk;
  });
  auto* source = sub("source", "Print a candidate's CUDA source (and plan with --json)");
  source->add_option("id", a->id)->required();
  source->callback([&exit_code, a] {
    auto ar = open_existing(*a);
    json c = require_candidate(ar, a->id);
    if (a->json)
      std::cout << json({{"source", c["source"]}, {"plan", c["plan"]}, {"tunables", c["tunables"]}})
                       .dump(2)
                << "\n";
    else
      std::cout << (::isatty(STDOUT_FILENO) ? printable(c["source"].get<std::string>())
                                            : c["source"].get<std::string>());
    exit_code = kExitOk;
  });
  auto* lineage = sub("lineage", "A candidate and its ancestors, nearest first");
  lineage->add_option("id", a->id)->required();
  lineage->callback([&exit_code, a] {
    auto ar = open_existing(*a);
    require_candidate(ar, a->id);
    json j = json::array();
    for (auto id : ar.lineage(archive::CandidateId{a->id})) {
      json c = ar.show(id);
      j.push_back({{"id", c["id"]},
                   {"generation", c["generation"]},
                   {"prompt_kind", c["prompt_kind"]},
                   {"parents", c["parents"]},
                   {"outcome", c["evaluations"].empty() ? json("unevaluated")
                                                        : c["evaluations"].back()["outcome"]}});
    }
    if (a->json) {
      std::cout << j.dump(2) << "\n";
    } else {
      Table t({"ID", "GENERATION", "KIND", "OUTCOME", "PARENTS"});
      for (const auto& r : j)
        t.add({r["id"].dump(), r["generation"].dump(), r["prompt_kind"], r["outcome"],
               r["parents"].dump()});
      t.print();
    }
    exit_code = kExitOk;
  });
  auto* diff = sub("diff", "Line diff of two candidates' sources and plans");
  diff->add_option("a", a->id)->required();
  diff->add_option("b", a->other)->required();
  diff->callback([&exit_code, a] {
    auto ar = open_existing(*a);
    json x = require_candidate(ar, a->id), y = require_candidate(ar, a->other);
    std::string d =
        diff_lines(x["source"].get<std::string>() + "\n// plan\n" + x["plan"].dump(2) + "\n",
                   y["source"].get<std::string>() + "\n// plan\n" + y["plan"].dump(2) + "\n");
    if (a->json)
      std::cout << json({{"a", a->id}, {"b", a->other}, {"diff", d}}).dump(2) << "\n";
    else
      std::cout << "--- candidate " << a->id << "\n+++ candidate " << a->other << "\n"
                << (::isatty(STDOUT_FILENO) ? printable(d) : d);
    exit_code = kExitOk;
  });
  auto* search = sub("search", "Full-text search over kernel sources and their tasks");
  search->add_option("query", a->query)->required();
  search->add_option("--limit", a->limit, "rows")->capture_default_str();
  search->callback([&exit_code, a] {
    auto ar = open_existing(*a);
    exit_code = print_summaries(ar.search(a->query, a->limit), a->json, "no kernel matches");
  });
  sub("runs", "Evolution runs with their status and budgets")->callback([&exit_code, a] {
    auto ar = open_existing(*a);
    json j = ar.runs();
    if (a->json) {
      std::cout << j.dump(2) << "\n";
    } else {
      Table t({"RUN", "STATUS", "STARTED", "FINISHED", "CANDIDATES", "BUDGETS USED"});
      for (const auto& r : j)
        t.add({r["id"].dump(), r["status"], r["started_at"],
               r["finished_at"].is_null() ? "-" : r["finished_at"].get<std::string>(),
               r["candidates"].dump(), r["budgets_used"].dump()});
      t.print();
    }
    exit_code = kExitOk;
  });
  auto* exp = sub("export", "Write every candidate as JSONL (to FILE, or standard output)");
  exp->add_option("file", a->file);
  exp->callback([&exit_code, a] {
    auto ar = open_existing(*a);
    if (a->file.empty()) {
      ar.export_jsonl(std::cout, "standard output");
    } else {
      std::ofstream out(a->file);
      if (!out) throw UsageError("cannot write " + a->file + ": " + std::strerror(errno));
      size_t n = ar.export_jsonl(out, a->file);  // checks every write and the final flush
      errno = 0;
      out.close();
      if (out.fail())
        throw UsageError("cannot write the export to " + a->file +
                         (errno ? std::string(": ") + std::strerror(errno) : "") +
                         "; the export is incomplete");
      std::cerr << "kforge: exported " << n << " candidate(s) to " << a->file << "\n";
    }
    exit_code = kExitOk;
  });
  auto* imp =
      sub("import",
          "Read JSONL: kforge's export (its evaluations become unverified claims unless --trust), "
          "or AI CUDA Engineer rows (unverified retrieval text)");
  imp->add_option("file", a->file)->required();
  imp->add_flag("--trust", a->trust,
                "The file is your own export: keep its evaluations as verified (winners possible); "
                "recorded on every row");
  imp->callback([&exit_code, a] {
    if (std::filesystem::is_directory(a->file))
      throw InputError(a->file, std::nullopt, "", "is a folder, not a JSONL file");
    std::ifstream in(a->file, std::ios::binary);
    if (!in)
      throw InputError(a->file, std::nullopt, "",
                       std::string("cannot read the file: ") + std::strerror(errno));
    std::string path = archive::database_path(a->db).string();
    bool existed = ::access(path.c_str(), F_OK) == 0;
    archive::ImportReport r;
    try {
      auto ar = archive::Archive::open(path, /*create=*/true);
      r = ar.import_jsonl(in, a->file, {a->trust});  // plain or gzipped JSONL (by its first bytes)
      if (r.lines == 0)
        throw InputError(a->file, std::nullopt, "", "holds no JSONL line; nothing was imported");
    } catch (...) {
      if (!existed) remove_if_empty(path);  // an archive this import created, and nothing went in
      throw;
    }
    std::cout << "imported " << r.lines << " line(s) from " << a->file << " into " << path << ": "
              << r.new_candidates << " new candidate(s), " << r.known_candidates
              << " already there; " << r.compiles << " compile report(s) and " << r.evaluations
              << " evaluation(s) added, " << r.duplicates << " already there\n";
    if (r.claimed)
      std::cout << r.claimed
                << " evaluation(s) are unverified claims: never winners until kforge measures them "
                << "(--trust for your own exports)\n";
    if (r.trusted)
      std::cout << r.trusted
                << " evaluation(s) trusted as measured (--trust; recorded on each row)\n";
    exit_code = kExitOk;
  });
  sub("migrate",
      "Upgrade an archive written by an older kforge to this kforge's schema (read commands never "
      "do)")
      ->callback([&exit_code, a] {
        std::string path = archive::database_path(a->db).string();
        if (::access(path.c_str(), F_OK) != 0)
          throw archive::ArchiveError(path + ": no archive here yet");
        auto ar = archive::Archive::open(path, /*create=*/false);
        std::cout << path << ": schema version " << ar.schema_version() << "\n";
        exit_code = kExitOk;
      });
}

}  // namespace kforge::cli
