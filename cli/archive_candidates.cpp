// `kforge archive review | show | source | lineage | diff`: one candidate, or two.
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "archive_cmd.h"
#include "baseline_columns.h"
#include "commands.h"
#include "kforge/archive/location.h"
#include "kforge/common/strings.h"
#include "table.h"

namespace kforge::cli {
namespace {

using nlohmann::json;

std::string ms(double v) {
  return fixed(v, 3);
}

// "vs eager 1.50x, vs scripted 1.40x, vs compile - (not measured: why), ..., vs best 1.20x": an
// evaluation's speedups over each kind of baseline and over the best, with why a kind has none
// where its judge said.
std::string versus(const json& e) {
  BaselineTimes b = BaselineTimes::from_json(e.value("baselines", json()));
  std::optional<double> time =
      e["time_ms"].is_number() ? std::optional<double>(e["time_ms"].get<double>()) : std::nullopt;
  std::vector<std::string> cells = speedup_cells(b, time, "x"), parts;
  for (size_t i = 0; i < baseline_kinds().size(); ++i) {
    std::string why = b.absent(baseline_kinds()[i].kind);
    parts.push_back("vs " + std::string(baseline_kinds()[i].label) + " " + cells[i] +
                    (cells[i] == "-" && !why.empty() ? " (not measured: " + why + ")" : ""));
  }
  return join(parts, ", ") + ", vs " + std::string(kBestBaselineLabel) + " " + cells.back();
}

json require_candidate(archive::Archive& ar, int64_t id) {
  json c = ar.show(archive::CandidateId{id});
  if (c.is_null())
    throw archive::ArchiveMissing("no candidate " + std::to_string(id) + " in " + ar.path());
  return c;
}

struct ReviewOptions {
  int64_t id = 0;
  bool accept = false, reject = false;
  std::string note;
};

int review(const ArchiveOptions& a, const ReviewOptions& o) {
  if (!o.accept && !o.reject) throw UsageError("kforge archive review: give --accept or --reject");
  archive::Archive ar =
      archive::Archive::open(archive::database_path(a.db).string(), /*create=*/false);
  int64_t e = ar.review(archive::CandidateId{o.id}, o.accept, o.note);
  std::cout << "candidate " << o.id << ": evaluation " << e
            << (o.accept ? " accepted" : " rejected") << "\n";
  return kExitOk;
}

std::string candidate_text(const json& c) {
  std::ostringstream out;
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
        << " time " << (e["time_ms"].is_null() ? "-" : ms(e["time_ms"].get<double>())) << " ms, "
        << versus(e) << ", harness v" << e["harness_version"]
        << (e["import"].is_null() ? ""
            : e["import"]["trust"] == "trusted"
                ? " (trusted import)"
                : " (claimed by " + e["import"]["from"].dump() + ", unverified)")
        << "\n";
  if (!c["imported"].empty()) out << "  imported   " << c["imported"].dump() << "\n";
  if (!c["import"].is_null())
    out << "  from       " << c["import"]["from"].dump() << " ("
        << (c["import"]["trust"] == "trusted" ? "trusted import" : "unverified claims") << ")\n";
  return out.str();
}

int show(const ArchiveOptions& a, int64_t id) {
  auto ar = open_existing(a);
  json c = require_candidate(ar, id);
  if (a.json)
    std::cout << c.dump(2) << "\n";
  else  // archive text may come from anywhere: printed through printable()
    std::cout << printable(candidate_text(c));
  return kExitOk;
}

int source(const ArchiveOptions& a, int64_t id) {
  auto ar = open_existing(a);
  json c = require_candidate(ar, id);
  if (a.json)
    std::cout
        << json({{"source", c["source"]}, {"plan", c["plan"]}, {"tunables", c["tunables"]}}).dump(2)
        << "\n";
  else
    std::cout << (::isatty(STDOUT_FILENO) ? printable(c["source"].get<std::string>())
                                          : c["source"].get<std::string>());
  return kExitOk;
}

int lineage(const ArchiveOptions& a, int64_t id) {
  auto ar = open_existing(a);
  require_candidate(ar, id);
  json j = json::array();
  for (auto ancestor : ar.lineage(archive::CandidateId{id})) {
    json c = ar.show(ancestor);
    j.push_back({{"id", c["id"]},
                 {"generation", c["generation"]},
                 {"prompt_kind", c["prompt_kind"]},
                 {"parents", c["parents"]},
                 {"outcome", c["evaluations"].empty() ? json("unevaluated")
                                                      : c["evaluations"].back()["outcome"]}});
  }
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  Table t({"ID", "GENERATION", "KIND", "OUTCOME", "PARENTS"});
  for (const auto& r : j)
    t.add({r["id"].dump(), r["generation"].dump(), r["prompt_kind"], r["outcome"],
           r["parents"].dump()});
  t.print();
  return kExitOk;
}

int diff(const ArchiveOptions& a, int64_t first, int64_t second) {
  auto ar = open_existing(a);
  json x = require_candidate(ar, first), y = require_candidate(ar, second);
  std::string d =
      diff_lines(x["source"].get<std::string>() + "\n// plan\n" + x["plan"].dump(2) + "\n",
                 y["source"].get<std::string>() + "\n// plan\n" + y["plan"].dump(2) + "\n");
  if (a.json)
    std::cout << json({{"a", first}, {"b", second}, {"diff", d}}).dump(2) << "\n";
  else
    std::cout << "--- candidate " << first << "\n+++ candidate " << second << "\n"
              << (::isatty(STDOUT_FILENO) ? printable(d) : d);
  return kExitOk;
}

}  // namespace

void add_archive_review(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto o = std::make_shared<ReviewOptions>();
  auto* cmd = add_archive_subcommand(
      archive, "review", "Accept or reject a candidate whose timing was flagged suspicious");
  cmd->add_option("id", o->id, "The candidate")->required();
  auto* accept_flag = cmd->add_flag("--accept", o->accept,
                                    "The speedup is real: the flag goes, the kernel may win");
  auto* reject_flag = cmd->add_flag("--reject", o->reject,
                                    "It is not: the evaluation stays flagged, marked rejected");
  accept_flag->excludes(reject_flag);
  cmd->add_option("--note", o->note, "Why (kept with the decision)");
  cmd->callback([&exit_code, a, o] { exit_code = review(*a, *o); });
}

void add_archive_show(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto id = std::make_shared<int64_t>(0);
  auto* cmd = add_archive_subcommand(
      archive, "show", "Everything about one candidate: lineage, compile report, evaluations");
  cmd->add_option("id", *id)->required();
  cmd->callback([&exit_code, a, id] { exit_code = show(*a, *id); });
}

void add_archive_source(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto id = std::make_shared<int64_t>(0);
  auto* cmd = add_archive_subcommand(archive, "source",
                                     "Print a candidate's CUDA source (and plan with --json)");
  cmd->add_option("id", *id)->required();
  cmd->callback([&exit_code, a, id] { exit_code = source(*a, *id); });
}

void add_archive_lineage(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto id = std::make_shared<int64_t>(0);
  auto* cmd =
      add_archive_subcommand(archive, "lineage", "A candidate and its ancestors, nearest first");
  cmd->add_option("id", *id)->required();
  cmd->callback([&exit_code, a, id] { exit_code = lineage(*a, *id); });
}

void add_archive_diff(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto ids = std::make_shared<std::pair<int64_t, int64_t>>(0, 0);
  auto* cmd =
      add_archive_subcommand(archive, "diff", "Line diff of two candidates' sources and plans");
  cmd->add_option("a", ids->first)->required();
  cmd->add_option("b", ids->second)->required();
  cmd->callback([&exit_code, a, ids] { exit_code = diff(*a, ids->first, ids->second); });
}

}  // namespace kforge::cli
