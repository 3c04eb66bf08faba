#include "pages.h"

#include <map>
#include <set>
#include <sstream>

#include "html.h"
#include "kforge/archive/web_view.h"
#include "kforge/common/baseline.h"
#include "kforge/common/strings.h"

namespace kforge::browse {
namespace {

using nlohmann::json;

std::optional<double> num(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? std::optional<double>(j[key].get<double>())
                                               : std::nullopt;
}

std::string str(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// The baselines of a JSON row (the archive's "baselines": BaselineTimes::to_json).
BaselineTimes baselines_of(const json& j) {
  return BaselineTimes::from_json(j.value("baselines", json()));
}

// A kernel's baselines and speedups, for the pages' JSON.
void add_baselines(json& j, const BaselineTimes& b, const std::optional<double>& time_ms) {
  j["baselines"] = b.to_json();
  j["speedup"] = b.speedups_json(time_ms);
}

// "<th>x eager</th>...<th>x best</th>": a column per kind of baseline_kinds(), then the best's.
std::string speedup_headings() {
  std::string out;
  for (const BaselineKindInfo& info : baseline_kinds())
    out += "<th>x " + escape(std::string(info.label)) + "</th>";
  return out + "<th>x " + std::string(kBestBaselineLabel) + "</th>";
}

std::string speedup_cells(const BaselineTimes& b, const std::optional<double>& time_ms) {
  std::string out;
  for (const BaselineKindInfo& info : baseline_kinds())
    out += "<td class=\"n\">" + ratio(b.speedup(info.kind, time_ms)) + "</td>";
  return out + "<td class=\"n\">" + ratio(b.best_speedup(time_ms)) + "</td>";
}

// "1.50x eager, 1.20x best" (each where known): where one line holds the speedups.
std::string short_speedups(const BaselineTimes& b, const std::optional<double>& time_ms) {
  std::string out;
  if (std::optional<double> x = b.speedup(BaselineKind::Eager, time_ms))
    out = ratio(x) + " " + std::string(baseline_info(BaselineKind::Eager).label);
  if (std::optional<double> x = b.best_speedup(time_ms))
    out += (out.empty() ? "" : ", ") + ratio(x) + " " + std::string(kBestBaselineLabel);
  return out;
}

std::string task_link(const std::string& task) {
  return "<a href=\"/task?id=" + url_encode(task) + "\">" + escape(task) + "</a>";
}

std::string candidate_link(int64_t id) {
  return "<a href=\"/candidate/" + std::to_string(id) + "\">#" + std::to_string(id) + "</a>";
}

std::string outcome_class(const std::string& outcome) {
  return outcome == "correct" || outcome == "screened: correct" ? "correct"
         : outcome == "not judged"                              ? ""
                                                                : "bad";
}

// Lineage drawn as nested lists: `up` walks parents (ancestry), else children (descendants). A
// candidate met twice (crossover) is listed once; at most `budget` entries.
std::string lineage(archive::Archive& ar, int64_t id, bool up, int& budget,
                    std::set<int64_t>& seen) {
  std::string items;
  std::vector<std::pair<int64_t, std::string>> next;
  for (const archive::CandidateLine& l : archive::relatives(ar, {id}, up)) {
    std::string x = short_speedups(l.baselines, l.time_ms);
    std::string label = candidate_link(l.id.value) + " generation " + std::to_string(l.generation) +
                        ", <span class=\"" + outcome_class(l.outcome) + "\">" + escape(l.outcome) +
                        "</span>" + (x.empty() ? "" : ", " + x);
    next.push_back({l.id.value, label});
  }
  for (const auto& [other, label] : next) {
    if (budget <= 0) {
      items += "<li>...</li>";
      break;
    }
    --budget;
    if (!seen.insert(other).second) {
      items += "<li>" + label + " (listed above)</li>";
      continue;
    }
    items += "<li>" + label + lineage(ar, other, up, budget, seen) + "</li>";
  }
  return items.empty() ? "" : "<ul class=\"tree\">" + items + "</ul>";
}

std::string outcome_cell(const std::string& outcome) {
  return "<td class=\"" + outcome_class(outcome) + "\">" + escape(outcome) + "</td>";
}

View not_found(const std::string& what) {
  return {{{"error", what}}, page("Not found", "<p>" + escape(what) + "</p>"), 404};
}

}  // namespace

View overview(archive::Archive& ar) {
  json runs = ar.runs();
  // Each run's best kernel per task (the winner rule), the largest speedup over the best baseline
  // first (archive::run_bests' order).
  std::map<int64_t, json> best;
  std::map<int64_t, std::vector<std::string>> best_text;
  for (const auto& [run, kernels] : archive::run_bests(ar))
    for (const archive::RunBestKernel& k : kernels) {
      json j = {{"task", k.task},
                {"candidate", k.candidate.value},
                {"time_ms", k.time_ms ? json(*k.time_ms) : json()}};
      add_baselines(j, k.baselines, k.time_ms);
      best[run].push_back(j);
      std::string x = short_speedups(k.baselines, k.time_ms);
      best_text[run].push_back(task_link(k.task) + " " + (x.empty() ? "-" : x));
    }
  std::string rows, live;
  for (json& r : runs) {
    json tasks_best =
        best.count(r["id"].get<int64_t>()) ? best[r["id"].get<int64_t>()] : json::array();
    r["best"] = tasks_best;
    std::string shown;
    const std::vector<std::string>& texts = best_text[r["id"].get<int64_t>()];
    for (size_t i = 0; i < texts.size() && i < 5; ++i) shown += (i ? "; " : "") + texts[i];
    if (tasks_best.size() > 5) shown += "; ... (" + std::to_string(tasks_best.size()) + " tasks)";
    rows += "<tr><td class=\"n\">" + str(r, "id") + "</td><td>" + escape(str(r, "status")) +
            "</td><td>" + escape(str(r, "started_at")) + "</td><td>" +
            escape(str(r, "finished_at")) + "</td><td class=\"n\">" + str(r, "candidates") +
            "</td><td class=\"n\">" + str(r, "llm_calls") + "</td><td>" +
            escape(str(r, "budgets_used")) + "</td><td>" + (shown.empty() ? "-" : shown) +
            "</td></tr>\n";
    if (str(r, "status") != "running") continue;
    // A run in progress: its newest candidates, and the page reloads itself.
    std::string recent;
    json newest = json::array();
    for (const archive::CandidateLine& l :
         archive::newest_candidates(ar, {r["id"].get<int64_t>()}, 10)) {
      newest.push_back({{"id", l.id.value},
                        {"task", l.task},
                        {"generation", l.generation},
                        {"outcome", l.outcome},
                        {"created_at", l.created_at}});
      recent += "<tr><td>" + candidate_link(l.id.value) + "</td><td>" + task_link(l.task) +
                "</td><td class=\"n\">" + std::to_string(l.generation) + "</td>" +
                outcome_cell(l.outcome) + "<td>" + escape(l.created_at) + "</td></tr>\n";
    }
    r["newest"] = newest;
    live += "<h2>Run " + str(r, "id") + " in progress</h2>\n<p>" + str(r, "candidates") +
            " candidates so far, since " + escape(str(r, "started_at")) +
            " (this page reloads every 10 s).</p>\n" +
            (recent.empty() ? std::string("<p>No candidates yet.</p>")
                            : "<table><tr><th>candidate</th><th>task</th><th>generation</"
                              "th><th>outcome</th><th>at</th></tr>\n" +
                                  recent + "</table>\n");
  }
  archive::Stats s = ar.stats();
  std::string body =
      "<p>" + std::to_string(s.tasks) + " tasks, " + std::to_string(s.candidates) +
      " candidates, " + std::to_string(s.evaluations) + " evaluations.</p>\n" + live +
      "<h2>Runs</h2>\n" +
      (runs.empty() ? "<p>No runs yet (kforge evolve starts one).</p>"
                    : "<table><tr><th>run</th><th>status</th><th>started</th><th>finished</th>"
                      "<th>candidates</th><th>LLM calls</th><th>budget used</th><th>best (x eager, "
                      "x best)</th></tr>\n" +
                          rows + "</table>");
  return {{{"runs", runs},
           {"tasks", s.tasks},
           {"candidates", s.candidates},
           {"evaluations", s.evaluations}},
          page("kforge archive", body, live.empty() ? 0 : 10)};
}

View leaderboard(archive::Archive& ar, const std::string& suite, const std::string& device,
                 const std::string& tag) {
  std::set<std::string> tagged;  // tasks carrying `tag`
  if (!tag.empty()) tagged = archive::tasks_tagged(ar, tag);
  std::vector<std::string> suites;
  for (const std::string& s : archive::suites(ar))
    if (suite.empty() || s == suite) suites.push_back(s);
  json rows = json::array();
  std::string table;
  for (const std::string& s : suites)
    for (json r : ar.results(s, "", true)) {
      if (r["time_ms"].is_null() || (!device.empty() && str(r, "device") != device) ||
          (!tag.empty() && !tagged.count(str(r, "task"))))
        continue;
      r["suite"] = s;
      table += "<tr><td>" + task_link(str(r, "task")) + "</td><td class=\"n\">" +
               millis(num(r, "time_ms")) + "</td>" +
               speedup_cells(baselines_of(r), num(r, "time_ms")) + "<td class=\"n\">" +
               (num(r, "roofline_fraction")
                    ? std::to_string(int(*num(r, "roofline_fraction") * 100 + 0.5)) + " %"
                    : "-") +
               "</td><td>" + escape(str(r, "device")) + "</td><td class=\"n\">" +
               str(r, "harness_version") + "</td></tr>\n";
      rows.push_back(r);
    }
  std::string filter = "<form><label>suite <input name=\"suite\" value=\"" + escape(suite) +
                       "\"></label> <label>device <input name=\"device\" value=\"" +
                       escape(device) + "\"></label> <label>tag <input name=\"tag\" value=\"" +
                       escape(tag) + "\"></label> <button>filter</button></form>\n";
  std::string body =
      filter +
      (rows.empty()
           ? std::string("<p>No winners yet.</p>")
           : "<table class=\"leaderboard\"><tr><th>task</th><th>time</th>" + speedup_headings() +
                 "<th>roofline</th><th>device</th><th>harness</th></tr>\n" + table + "</table>");
  return {{{"winners", rows}}, page("Leaderboard", body)};
}

View task_list(archive::Archive& ar) {
  json tasks = ar.tasks_overview();
  std::string rows;
  for (const json& t : tasks)
    rows += "<tr><td>" + task_link(str(t, "task")) + "</td><td>" + escape(str(t, "summary")) +
            "</td><td class=\"n\">" + str(t, "candidates") + "</td><td class=\"n\">" +
            str(t, "correct_evaluations") + "</td><td class=\"n\">" + millis(num(t, "best_ms")) +
            "</td></tr>\n";
  return {{{"tasks", tasks}},
          page("Tasks",
               "<table><tr><th>task</th><th>summary</th><th>candidates</th><th>correct</"
               "th><th>best</th></tr>\n" +
                   rows + "</table>")};
}

// The task itself above its candidates: summary and tags, the timed dims, each baseline's time (or
// why it has none) on the device of the newest evaluation, and the reference.
std::string task_header(const archive::TaskInfo& info) {
  std::string tags;
  for (const std::string& t : info.tags) tags += (tags.empty() ? "" : ", ") + escape(t);
  std::string out = "<p>" + escape(info.summary) +
                    (tags.empty() ? "" : " <span class=\"c\">(" + tags + ")</span>") + "</p>\n";
  if (!info.dims.empty()) {
    out += "<p>Timed at " + escape(info.dims) +
           (info.device.empty() ? "" : " on " + escape(info.device)) +
           ".</p>\n<table><tr><th>baseline</th><th>time</th></tr>";
    for (const BaselineKindInfo& kind : baseline_kinds()) {
      const BaselineMs* b = info.baselines.find(kind.kind);
      if (!b) continue;
      out += "<tr><td>" + escape(std::string(kind.label)) + "</td><td class=\"n\">" +
             (b->ms ? millis(b->ms) : escape(b->absent.empty() ? "-" : "none: " + b->absent)) +
             "</td></tr>";
    }
    out += "</table>\n";
  }
  return out + "<h2>Reference</h2>\n<pre>" + escape(info.reference) + "</pre>\n";
}

View task_page(archive::Archive& ar, const std::string& id) {
  size_t slash = id.find('/');
  if (slash == std::string::npos) return not_found("no task " + id + " (ask for suite/name)");
  const std::string suite = id.substr(0, slash), name = id.substr(slash + 1);
  json candidates = json::array();
  std::map<std::string, int> outcomes;
  std::map<int64_t, std::vector<std::pair<double, double>>> times;
  std::string rows;
  for (const archive::CandidateLine& l : archive::task_candidates(ar, suite, name)) {
    json c = {{"id", l.id.value},
              {"generation", l.generation},
              {"island", l.island},
              {"model", l.model},
              {"prompt_kind", l.prompt_kind},
              {"outcome", l.outcome},
              {"time_ms", l.time_ms ? json(*l.time_ms) : json(nullptr)}};
    add_baselines(c, l.baselines, l.time_ms);
    outcomes[l.outcome]++;
    if (l.outcome == "correct" && l.time_ms)
      times[l.island].push_back({double(l.generation), *l.time_ms});
    rows += "<tr><td>" + candidate_link(l.id.value) + "</td><td class=\"n\">" +
            std::to_string(l.generation) + "</td><td class=\"n\">" + std::to_string(l.island) +
            "</td>" + outcome_cell(l.outcome) + "<td class=\"n\">" + millis(l.time_ms) + "</td>" +
            speedup_cells(l.baselines, l.time_ms) + "<td>" + escape(l.model) + "</td></tr>\n";
    candidates.push_back(c);
  }
  if (candidates.empty()) return not_found("no candidates for task " + id);
  // The task's best so far (the winner rule) after each generation, per island.
  std::vector<Series> best_series, time_series;
  for (const auto& [island, curve] : archive::task_best_by_generation(ar, suite, name)) {
    Series s{"island " + std::to_string(island), {}};
    for (const archive::GenerationBest& p : curve)
      if (std::optional<double> x = p.baselines.best_speedup(p.time_ms))
        s.points.push_back({double(p.generation), *x});
    if (!s.points.empty()) best_series.push_back(s);
  }
  for (const auto& [island, points] : times)
    time_series.push_back({"island " + std::to_string(island), points, false});
  std::string breakdown;
  for (const auto& [outcome, n] : outcomes)
    breakdown +=
        "<tr>" + outcome_cell(outcome) + "<td class=\"n\">" + std::to_string(n) + "</td></tr>";
  std::string body;
  json task = {{"id", id}};
  if (std::optional<archive::TaskInfo> info = archive::task_info(ar, suite, name)) {
    body = task_header(*info);
    task["summary"] = info->summary;
    task["tags"] = info->tags;
    task["reference"] = info->reference;
    task["version"] = info->version;
    task["dims"] = json::parse(info->dims.empty() ? "null" : info->dims, nullptr, false);
    task["device"] = info->device;
    task["baselines"] = info->baselines.to_json();
  }
  body += svg_plot("Best kernel's speedup over the best baseline by generation", "generation",
                   "x best", best_series) +
          " " + svg_plot("Time of correct candidates", "generation", "ms", time_series) +
          "\n<h2>Outcomes</h2><table>" + breakdown +
          "</table>\n<h2>Candidates</h2>\n"
          "<table><tr><th>candidate</th><th>generation</th><th>island</th><th>outcome</"
          "th><th>time</th>" +
          speedup_headings() + "<th>model</th></tr>\n" + rows + "</table>";
  json counts = outcomes;
  return {{{"task", id}, {"info", task}, {"candidates", candidates}, {"outcomes", counts}},
          page(id, body)};
}

View candidate_page(archive::Archive& ar, int64_t id) {
  json c = ar.show({id});
  if (c.is_null()) return not_found("no candidate " + std::to_string(id));
  json children = json::array();
  for (const archive::CandidateLine& l : archive::relatives(ar, {id}, false))
    children.push_back(l.id.value);
  c["children"] = children;
  auto links = [](const json& ids) {
    std::string out;
    for (const json& i : ids) out += candidate_link(i.get<int64_t>()) + " ";
    return out.empty() ? std::string("none") : out;
  };
  std::string verdicts;
  for (const json& e : c.value("evaluations", json::array()))
    verdicts +=
        "<tr>" + outcome_cell(str(e, "outcome")) + "<td class=\"n\">" + millis(num(e, "time_ms")) +
        "</td>" + speedup_cells(baselines_of(e), num(e, "time_ms")) + "<td>" +
        escape(str(e, "created_at")) + "</td><td><details><summary>evidence</summary><pre>" +
        escape(e.value("evidence", json()).dump(2, ' ', false, json::error_handler_t::replace)) +
        "</pre></details></td></tr>\n";
  // The source and plan against each parent's: what the search changed.
  auto with_plan = [](const json& k) {
    return k.value("source", "") + "\n// plan\n" +
           k.value("plan", json()).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  };
  std::string diffs;
  for (const json& p : c.value("parents", json::array())) {
    json parent = ar.show({p.get<int64_t>()});
    if (parent.is_null()) continue;
    std::string lines;
    std::istringstream in(diff_lines(with_plan(parent), with_plan(c)));
    for (std::string l; std::getline(in, l);)
      lines += l.rfind("+ ", 0) == 0   ? "<ins>" + escape(l) + "</ins>\n"
               : l.rfind("- ", 0) == 0 ? "<del>" + escape(l) + "</del>\n"
                                       : escape(l) + "\n";
    diffs += "<details><summary>against its parent " + candidate_link(p.get<int64_t>()) +
             "</summary><pre class=\"diff\">" + lines + "</pre></details>\n";
  }
  std::string resources;
  for (const json& k : c.value("compiles", json::array()))
    resources +=
        "<pre>" +
        escape(k.value("resources", json()).dump(2, ' ', false, json::error_handler_t::replace)) +
        "</pre>";
  int budget = 200;
  std::set<int64_t> seen = {id};
  std::string ancestry = lineage(ar, id, true, budget, seen);
  budget = 200, seen = {id};
  std::string descendants = lineage(ar, id, false, budget, seen);
  std::string body =
      "<p>task " + task_link(str(c, "task")) + ", generation " + str(c, "generation") +
      ", island " + str(c, "island") + ", " + escape(str(c, "prompt_kind")) + " by " +
      escape(str(c, "model")) +
      "</p>\n"
      "<p>parents: " +
      links(c.value("parents", json::array())) + "<br>children: " + links(children) + "</p>\n" +
      (ancestry.empty() && descendants.empty()
           ? std::string()
           : "<h2>Lineage</h2>\n<div class=\"lineage\"><p>ancestors of <span class=\"here\">#" +
                 std::to_string(id) + "</span></p>" +
                 (ancestry.empty() ? "<p>none (a first kernel)</p>" : ancestry) +
                 "<p>descendants</p>" + (descendants.empty() ? "<p>none yet</p>" : descendants) +
                 "</div>\n") +
      (diffs.empty() ? std::string() : "<h2>Changes</h2>\n" + diffs) +
      "<h2>Source</h2>\n<pre class=\"source\"><code>" + highlight_cuda(str(c, "source")) +
      "</code></pre>\n"
      "<h2>Launch plan</h2><pre>" +
      escape(c.value("plan", json()).dump(2, ' ', false, json::error_handler_t::replace)) +
      "</pre>\n<h2>Tunables</h2><pre>" +
      escape(c.value("tunables", json()).dump(2, ' ', false, json::error_handler_t::replace)) +
      "</pre>\n<h2>Resources</h2>" + resources +
      "\n<h2>Verdicts</h2>\n<table><tr><th>outcome</th><th>time</th>" + speedup_headings() +
      "<th>at</th><th></th></tr>\n" + verdicts + "</table>";
  return {c, page("Candidate #" + std::to_string(id), body)};
}

View search_page(archive::Archive& ar, const std::string& query) {
  json hits = json::array(), tasks = json::array();
  std::string rows, task_rows;
  if (!query.empty()) tasks = ar.search_tasks(query, 50);
  for (const json& t : tasks)
    task_rows += "<tr><td>" + task_link(str(t, "task")) + "</td><td>" + escape(str(t, "summary")) +
                 "</td></tr>\n";
  if (!query.empty())
    for (const archive::KernelSummary& k : ar.search(query, 50)) {
      hits.push_back(archive::to_json(k));
      rows += "<tr><td>" + candidate_link(k.id.value) + "</td><td>" + task_link(k.task) + "</td>" +
              outcome_cell(k.outcome) + "<td class=\"n\">" + millis(k.time_ms) + "</td></tr>\n";
    }
  std::string body =
      "<form><input name=\"q\" value=\"" + escape(query) + "\"> <button>search</button></form>\n" +
      (task_rows.empty() ? std::string()
                         : "<h2>Tasks</h2><table>" + task_rows + "</table>\n<h2>Kernels</h2>\n") +
      (rows.empty()
           ? std::string("<p>No kernels match.</p>")
           : "<table><tr><th>candidate</th><th>task</th><th>outcome</th><th>time</th></tr>\n" +
                 rows + "</table>");
  return {{{"query", query}, {"tasks", tasks}, {"kernels", hits}}, page("Search", body)};
}

}  // namespace kforge::browse
