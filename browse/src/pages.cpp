#include "pages.h"

#include <map>
#include <set>
#include <sstream>

#include "html.h"
#include "kforge/archive/sqlite.h"
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

std::string task_link(const std::string& task) {
  return "<a href=\"/task?id=" + url_encode(task) + "\">" + escape(task) + "</a>";
}

std::string candidate_link(int64_t id) {
  return "<a href=\"/candidate/" + std::to_string(id) + "\">#" + std::to_string(id) + "</a>";
}

// A candidate's outcome: its newest verdict, else its screen's, else a failed compile, else "not
// judged".
const char* kOutcomeSql =
    "COALESCE((SELECT outcome FROM evaluations WHERE candidate_id = c.id ORDER BY id DESC LIMIT "
    "1), "
    "(SELECT 'screened: ' || outcome FROM screens WHERE candidate_id = c.id ORDER BY id DESC LIMIT "
    "1), "
    "(SELECT 'compile_error' FROM compiles WHERE candidate_id = c.id AND ok = 0 ORDER BY id DESC "
    "LIMIT 1), 'not judged')";

std::string outcome_class(const std::string& outcome) {
  return outcome == "correct" || outcome == "screened: correct" ? "correct"
         : outcome == "not judged"                              ? ""
                                                                : "bad";
}

// Lineage drawn as nested lists: `up` walks parents (ancestry), else children (descendants). A
// candidate met twice (crossover) is listed once; at most `budget` entries.
std::string lineage(archive::Archive& ar, int64_t id, bool up, int& budget,
                    std::set<int64_t>& seen) {
  const std::string other_end = up ? "parent_id" : "candidate_id",
                    this_end = up ? "candidate_id" : "parent_id";
  archive::Statement q = ar.db().prepare("SELECT c.id, c.generation, " + std::string(kOutcomeSql) +
                                         ", (SELECT speedup_eager FROM evaluations WHERE "
                                         "candidate_id = c.id ORDER BY id DESC LIMIT 1) "
                                         "FROM candidate_parents p JOIN candidates c ON c.id = p." +
                                         other_end + " WHERE p." + this_end + " = ? ORDER BY c.id");
  q.bind(1, id);
  std::string items;
  std::vector<std::pair<int64_t, std::string>> next;
  while (q.step()) {
    int64_t other = q.integer(0);
    std::string label = candidate_link(other) + " generation " + std::to_string(q.integer(1)) +
                        ", <span class=\"" + outcome_class(q.text(2)) + "\">" + escape(q.text(2)) +
                        "</span>" + (q.is_null(3) ? "" : ", " + ratio(q.real(3)) + " eager");
    next.push_back({other, label});
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
  // Each run's best correct, unflagged kernel per task (x eager), best first.
  std::map<int64_t, json> best;
  archive::Statement b = ar.db().prepare(
      "SELECT c.run_id, t.suite || '/' || t.name, max(e.speedup_eager), c.id FROM evaluations e "
      "JOIN candidates c ON c.id = e.candidate_id JOIN tasks t ON t.id = c.task_id "
      "WHERE c.run_id IS NOT NULL AND e.speedup_eager IS NOT NULL AND " +
      archive::winner_condition(false) + " GROUP BY c.run_id, t.id ORDER BY c.run_id, 3 DESC");
  while (b.step())
    best[b.integer(0)].push_back(
        {{"task", b.text(1)}, {"speedup_eager", b.real(2)}, {"candidate", b.integer(3)}});
  std::string rows, live;
  for (json& r : runs) {
    json tasks_best =
        best.count(r["id"].get<int64_t>()) ? best[r["id"].get<int64_t>()] : json::array();
    r["best"] = tasks_best;
    std::string shown;
    for (size_t i = 0; i < tasks_best.size() && i < 5; ++i)
      shown += (i ? ", " : "") + task_link(str(tasks_best[i], "task")) + " " +
               ratio(num(tasks_best[i], "speedup_eager"));
    if (tasks_best.size() > 5) shown += ", ... (" + std::to_string(tasks_best.size()) + " tasks)";
    rows += "<tr><td class=\"n\">" + str(r, "id") + "</td><td>" + escape(str(r, "status")) +
            "</td><td>" + escape(str(r, "started_at")) + "</td><td>" +
            escape(str(r, "finished_at")) + "</td><td class=\"n\">" + str(r, "candidates") +
            "</td><td class=\"n\">" + str(r, "llm_calls") + "</td><td>" +
            escape(str(r, "budgets_used")) + "</td><td>" + (shown.empty() ? "-" : shown) +
            "</td></tr>\n";
    if (str(r, "status") != "running") continue;
    // A run in progress: its newest candidates, and the page reloads itself.
    archive::Statement q = ar.db().prepare(
        "SELECT c.id, t.suite || '/' || t.name, c.generation, " + std::string(kOutcomeSql) +
        ", c.created_at FROM candidates c JOIN tasks t ON t.id = c.task_id "
        "WHERE c.run_id = ? ORDER BY c.id DESC LIMIT 10");
    q.bind(1, r["id"].get<int64_t>());
    std::string recent;
    json newest = json::array();
    while (q.step()) {
      newest.push_back({{"id", q.integer(0)},
                        {"task", q.text(1)},
                        {"generation", q.integer(2)},
                        {"outcome", q.text(3)},
                        {"created_at", q.text(4)}});
      recent += "<tr><td>" + candidate_link(q.integer(0)) + "</td><td>" + task_link(q.text(1)) +
                "</td><td class=\"n\">" + std::to_string(q.integer(2)) + "</td>" +
                outcome_cell(q.text(3)) + "<td>" + escape(q.text(4)) + "</td></tr>\n";
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
                      "<th>candidates</th><th>LLM calls</th><th>budget used</th><th>best (x "
                      "eager)</th></tr>\n" +
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
  if (!tag.empty()) {
    archive::Statement q = ar.db().prepare(
        "SELECT DISTINCT t.suite || '/' || t.name FROM tasks t, json_each(t.tags) j WHERE "
        "json_valid(t.tags) AND j.value = ?");
    q.bind(1, tag);
    while (q.step()) tagged.insert(q.text(0));
  }
  std::vector<std::string> suites;
  for (archive::Statement q = ar.db().prepare("SELECT DISTINCT suite FROM tasks ORDER BY suite");
       q.step();)
    if (suite.empty() || q.text(0) == suite) suites.push_back(q.text(0));
  json rows = json::array();
  std::string table;
  for (const std::string& s : suites)
    for (json r : ar.results(s, "", true)) {
      if (r["time_ms"].is_null() || (!device.empty() && str(r, "device") != device) ||
          (!tag.empty() && !tagged.count(str(r, "task"))))
        continue;
      r["suite"] = s;
      table += "<tr><td>" + task_link(str(r, "task")) + "</td><td class=\"n\">" +
               millis(num(r, "time_ms")) + "</td><td class=\"n\">" +
               ratio(num(r, "speedup_eager")) + "</td><td class=\"n\">" +
               ratio(num(r, "speedup_compiled")) + "</td><td class=\"n\">" +
               ratio(num(r, "speedup_scripted")) + "</td><td class=\"n\">" +
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
           : "<table class=\"leaderboard\"><tr><th>task</th><th>time</th><th>x eager</th>"
             "<th>x torch.compile</th><th>x TorchScript</th><th>roofline</th><th>device</th>"
             "<th>harness</th></tr>\n" +
                 table + "</table>");
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

View task_page(archive::Archive& ar, const std::string& id) {
  size_t slash = id.find('/');
  if (slash == std::string::npos) return not_found("no task " + id + " (ask for suite/name)");
  archive::Statement q = ar.db().prepare(
      "SELECT c.id, c.generation, c.island, c.model, c.prompt_kind, " + std::string(kOutcomeSql) +
      ", e.time_ms, e.speedup_eager "
      "FROM candidates c JOIN tasks t ON t.id = c.task_id "
      "LEFT JOIN evaluations e ON e.id = (SELECT max(id) FROM evaluations WHERE candidate_id = "
      "c.id) "
      "WHERE t.suite = ? AND t.name = ? ORDER BY c.id");
  q.bind(1, id.substr(0, slash)).bind(2, id.substr(slash + 1));
  json candidates = json::array();
  std::map<std::string, int> outcomes;
  std::map<int64_t, std::map<int64_t, double>> best;  // island -> generation -> best speedup so far
  std::map<int64_t, std::vector<std::pair<double, double>>> times;
  std::string rows;
  while (q.step()) {
    json c = {{"id", q.integer(0)},
              {"generation", q.integer(1)},
              {"island", q.integer(2)},
              {"model", q.text(3)},
              {"prompt_kind", q.text(4)},
              {"outcome", q.text(5)},
              {"time_ms", q.is_null(6) ? json(nullptr) : json(q.real(6))},
              {"speedup_eager", q.is_null(7) ? json(nullptr) : json(q.real(7))}};
    outcomes[c["outcome"]]++;
    if (c["outcome"] == "correct" && c["speedup_eager"].is_number()) {
      double& b = best[q.integer(2)][q.integer(1)];
      b = std::max(b, q.real(7));
      if (!q.is_null(6)) times[q.integer(2)].push_back({double(q.integer(1)), q.real(6)});
    }
    rows += "<tr><td>" + candidate_link(q.integer(0)) + "</td><td class=\"n\">" +
            std::to_string(q.integer(1)) + "</td><td class=\"n\">" + std::to_string(q.integer(2)) +
            "</td>" + outcome_cell(c["outcome"]) + "<td class=\"n\">" + millis(num(c, "time_ms")) +
            "</td><td class=\"n\">" + ratio(num(c, "speedup_eager")) + "</td><td>" +
            escape(q.text(3)) + "</td></tr>\n";
    candidates.push_back(c);
  }
  if (candidates.empty()) return not_found("no candidates for task " + id);
  std::vector<Series> best_series, time_series;
  for (const auto& [island, per_generation] : best) {
    Series s{"island " + std::to_string(island), {}};
    double so_far = 0;
    for (const auto& [generation, speedup] : per_generation)
      s.points.push_back({double(generation), so_far = std::max(so_far, speedup)});
    best_series.push_back(s);
  }
  for (const auto& [island, points] : times)
    time_series.push_back({"island " + std::to_string(island), points, false});
  std::string breakdown;
  for (const auto& [outcome, n] : outcomes)
    breakdown +=
        "<tr>" + outcome_cell(outcome) + "<td class=\"n\">" + std::to_string(n) + "</td></tr>";
  std::string body =
      svg_plot("Best speedup over eager by generation", "generation", "x eager", best_series) +
      " " + svg_plot("Time of correct candidates", "generation", "ms", time_series) +
      "\n<h2>Outcomes</h2><table>" + breakdown +
      "</table>\n<h2>Candidates</h2>\n"
      "<table><tr><th>candidate</th><th>generation</th><th>island</th><th>outcome</th><th>time</th>"
      "<th>x eager</th><th>model</th></tr>\n" +
      rows + "</table>";
  json counts = outcomes;
  return {{{"task", id}, {"candidates", candidates}, {"outcomes", counts}}, page(id, body)};
}

View candidate_page(archive::Archive& ar, int64_t id) {
  json c = ar.show({id});
  if (c.is_null()) return not_found("no candidate " + std::to_string(id));
  json children = json::array();
  archive::Statement q = ar.db().prepare(
      "SELECT candidate_id FROM candidate_parents WHERE parent_id = ? ORDER BY candidate_id");
  q.bind(1, id);
  while (q.step()) children.push_back(q.integer(0));
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
        "</td><td class=\"n\">" + ratio(num(e, "speedup_eager")) + "</td><td>" +
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
      "\n<h2>Verdicts</h2>\n<table><tr><th>outcome</th><th>time</th>"
      "<th>x eager</th><th>at</th><th></th></tr>\n" +
      verdicts + "</table>";
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
