// What the archive remembers, for the prompts (prompt_parts.h): measurements, parents, similar
// tasks' kernels and this task's failures. Everything read here is limited to what a resumed run
// reads again: earlier runs' rows, and this run's rows of generations before the child's.
#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "kforge/archive/prompt_memory.h"
#include "kforge/common/strings.h"
#include "prompt_parts.h"

namespace kforge::evolve::prompt_parts {
namespace {

using nlohmann::json;

std::string trim_lines(const std::string& text, size_t max_lines) {
  std::istringstream in(text);
  std::string out, line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (++n > max_lines)
      return out + "// ... (" + std::to_string(max_lines) + " of more lines shown)\n";
    out += line + "\n";
  }
  return out;
}

std::string two_decimals(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// An evaluation's baselines (the archive's "baselines": BaselineTimes::to_json).
BaselineTimes baselines_of(const json& e) {
  return BaselineTimes::from_json(e.value("baselines", json()));
}

std::optional<double> time_of(const json& e) {
  return e.value("time_ms", json()).is_number() ? std::optional<double>(e["time_ms"].get<double>())
                                                : std::nullopt;
}

// "; 1.50x eager, 1.40x scripted, 1.20x compile, 1.20x the best baseline (compile)": the speedup
// over each kind measured and over the best; "" without any.
std::string speedup_words(const BaselineTimes& b, std::optional<double> time_ms) {
  std::vector<std::string> parts;
  for (const BaselineKindInfo& info : baseline_kinds())
    if (std::optional<double> x = b.speedup(info.kind, time_ms))
      parts.push_back(two_decimals(*x) + "x " + std::string(info.label));
  std::optional<BaselineMs> best = b.best();
  if (std::optional<double> x = b.best_speedup(time_ms))
    parts.push_back(two_decimals(*x) + "x the best baseline (" +
                    std::string(baseline_info(best->kind).label) + ")");
  return parts.empty() ? "" : "; " + join(parts, ", ");
}

std::string numbers_of(const json& c) {
  if (c["evaluations"].empty()) return "Not evaluated yet.";
  const json& e = c["evaluations"].back();
  std::string s = "Outcome: " + e["outcome"].get<std::string>();
  if (!e["flags"].empty()) s += " (flags: " + e["flags"].dump() + ")";
  if (!e["time_ms"].is_null()) s += "; time " + std::to_string(e["time_ms"].get<double>()) + " ms";
  s += speedup_words(baselines_of(e), time_of(e));
  if (!e["roofline_fraction"].is_null())
    s += "; " + std::to_string(e["roofline_fraction"].get<double>()) + " of the roofline floor";
  return s + ".";
}

// `j` as JSON, its "dims" objects with the dims in `order` (the task's shape order) instead of
// by name; everything else as json::dump() writes it.
nlohmann::ordered_json in_order(const json& j, const std::vector<std::string>& order,
                                bool dims = false) {
  if (j.is_array()) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const json& v : j) a.push_back(in_order(v, order));
    return a;
  }
  if (!j.is_object()) return nlohmann::ordered_json::parse(j.dump());
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  if (dims)
    for (const std::string& k : order)
      if (j.contains(k)) o[k] = in_order(j[k], order);
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!o.contains(it.key())) o[it.key()] = in_order(it.value(), order, it.key() == "dims");
  return o;
}

std::string evidence_of(const json& c, const std::vector<std::string>& order) {
  std::string s;
  // Every check that failed: NVRTC's (ok false) and those after a module compiled (signatures,
  // limits: ok true, with errors).
  for (const auto& cr : c["compiles"])
    if (!cr["ok"].get<bool>() || cr["stage"] != "passed")
      for (const auto& err : cr["errors"]) s += "- " + err.get<std::string>() + "\n";
  for (const auto& e : c["evaluations"])
    if (e["outcome"] != "correct")
      s += "- " + e["outcome"].get<std::string>() + ": " + in_order(e["evidence"], order).dump() +
           "\n";
  return s.empty() ? "No failure recorded for this candidate." : s;
}

std::string one_decimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A profile (verify::parse_ncu_log's shape) in words, one line per launch.
std::string profile_words(const std::optional<json>& p) {
  if (!p)
    return "not measured (kforge profiles a parent with Nsight Compute where `ncu` is installed).";
  if (p->contains("error"))
    return "not available (" + (*p)["error"].get<std::string>().substr(0, 200) + ").";
  std::string out = "one run at the timed dims";
  const json& kernels = p->value("kernels", json::array());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const json& k = kernels[i];
    auto pct = [&](const char* key, const char* what) {
      return k.contains(key) ? std::string(what) + " " + one_decimal(k[key].get<double>()) + "%"
                             : std::string();
    };
    std::vector<std::string> parts;
    for (std::string part :
         {pct("dram_pct", "DRAM throughput"), pct("sm_pct", "SM throughput"),
          pct("l2_pct", "L2 throughput"), pct("occupancy_pct", "achieved occupancy")})
      if (!part.empty()) parts.push_back(part);
    out += "\n- launch " + std::to_string(i + 1) + " `" + k.value("name", std::string("?")) + "`";
    if (k.contains("duration_ms")) out += ": " + format_ms(k["duration_ms"].get<double>()) + " ms";
    if (!parts.empty()) out += "; " + join(parts, ", ") + " (of peak)";
    if (k.contains("registers"))
      out += "; " + std::to_string(k["registers"].get<int64_t>()) + " registers per thread";
    std::vector<std::string> stalls;
    for (const json& st : k.value("stalls", json::array()))
      stalls.push_back(st[0].get<std::string>() + " " + one_decimal(st[1].get<double>()));
    if (!stalls.empty())
      out += "; top warp stalls (cycles per issued instruction): " + join(stalls, ", ");
  }
  return out;
}

// The newest evaluation of `c` that was timed and measured `field` (roofline_fraction), or null.
const json* newest_with(const json& c, const char* field) {
  const json* found = nullptr;
  for (const auto& e : c["evaluations"])
    if (!e[field].is_null() && !e["time_ms"].is_null()) found = &e;
  return found;
}

// The newest evaluation of `c` that was timed beside a baseline, or null.
const json* newest_with_baselines(const json& c) {
  const json* found = nullptr;
  for (const auto& e : c["evaluations"])
    if (!e["time_ms"].is_null() && baselines_of(e).best()) found = &e;
  return found;
}

std::string measured_on(const json& e, archive::CandidateId id) {
  return " (measured beside candidate " + std::to_string(id.value) +
         (e["device"].is_null() ? "" : " on GPU " + e["device"].get<std::string>()) + ")";
}

std::string math_mode(const tasks::Task& t) {
  return t.allow_tf32 ? "tf32" : "ieee";
}

// ---- Failures ----

// A failure as the prompt quotes it: its kind (the outcome, or "compile") and what went wrong, in
// one line.
struct FailureRow {
  int64_t candidate = 0;
  std::optional<int64_t> run;
  int generation = 0;
  std::string kind;
  std::string text;
};

std::string one_line(std::string s, size_t max = 400) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + " ...";
  return s;
}

// The first line that says what the compiler or the plan checker rejected.
std::string first_error_line(const json& errors, const std::string& log) {
  if (!errors.is_array() || errors.empty() || !errors[0].is_string()) return "rejected";
  std::string first = errors[0].get<std::string>();
  std::istringstream lines(first.find('\n') == std::string::npos ? first : first + "\n" + log);
  std::string line;
  std::getline(lines, line);
  if (first.find('\n') == std::string::npos) return line;
  std::string head = line;
  while (std::getline(lines, line))
    if (line.find("error:") != std::string::npos) return head + " " + line;
  return head;
}

tasks::Dims dims_of(const json& j) {
  tasks::Dims d;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.value().is_number_integer()) d[it.key()] = it.value().get<int64_t>();
  return d;
}

std::string number(const json& v) {
  if (!v.is_number()) return "?";
  if (v.is_number_integer()) return v.dump();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
  return buf;
}

// Plain code, no std::regex: these read sanitizer and compiler logs of model-written kernels,
// whose lines can be megabytes long (std::regex recursed per character and overflowed the stack).

bool log_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\n';
}

// memcheck's first "Invalid __global__ read|write of size N byte(s)" line and the line after it,
// its "=========" prefixes (with the spaces around them) made one space; none without both lines.
std::optional<std::string> memcheck_first_error(const std::string& log) {
  static const std::string head = "Invalid __global__ ";
  for (size_t at = log.find(head); at != std::string::npos; at = log.find(head, at + 1)) {
    size_t i = at + head.size();
    if (log.compare(i, 4, "read") == 0)
      i += 4;
    else if (log.compare(i, 5, "write") == 0)
      i += 5;
    else
      continue;
    if (log.compare(i, 9, " of size ") != 0) continue;
    i += 9;
    size_t digits = i;
    while (digits < log.size() && log[digits] >= '0' && log[digits] <= '9') ++digits;
    if (digits == i || log.compare(digits, 5, " byte") != 0) continue;
    size_t first_end = log.find('\n', digits);
    if (first_end == std::string::npos) continue;  // the line after it is part of the message
    size_t second_end = log.find('\n', first_end + 1);
    std::string m =
        log.substr(at, (second_end == std::string::npos ? log.size() : second_end) - at);
    std::string out;
    static const std::string bar = "=========";
    size_t from = 0;
    for (size_t b = m.find(bar); b != std::string::npos; b = m.find(bar, from)) {
      size_t left = b;
      while (left > from && log_space(m[left - 1])) --left;
      out.append(m, from, left - from);
      out += ' ';
      from = b + bar.size();
      while (from < m.size() && log_space(m[from])) ++from;
    }
    out.append(m, from, std::string::npos);
    return out;
  }
  return std::nullopt;
}

// `text` with each number ("12", "0.25", "1e-4", "3-4") made "#": the same message at other
// sizes or lines is the same lesson.
std::string numbers_as_hash(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] < '0' || text[i] > '9') {
      out += text[i++];
      continue;
    }
    out += '#';
    for (++i;
         i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.' ||
                             text[i] == 'e' || text[i] == 'E' || text[i] == '+' || text[i] == '-');
         ++i) {
    }
  }
  return out;
}

// An evaluation's failure in one line: the verdict's summary where it was kept, else what its
// evidence says (where; expected against got; the runner's or memcheck's words).
std::string evaluation_text(const std::string& outcome, const json& ev,
                            const std::vector<std::string>& order) {
  if (ev.contains("summary") && ev["summary"].is_string()) return ev["summary"].get<std::string>();
  std::string where;
  if (ev.contains("where") && ev["where"].is_object())
    where = " at dims " + format_dims(dims_of(ev["where"].value("dims", json::object())), order) +
            (ev["where"].value("timed", false) ? " (the timed sizes)" : "");
  const json detail = ev.value("detail", json::object());
  std::string s;
  if (detail.contains("comparison") && detail["comparison"].is_object()) {
    const json& c = detail["comparison"];
    s = "output '" + detail.value("output", std::string("?")) + "': max abs error " +
        number(c["max_abs_error"]) + " > threshold " + number(c["threshold"]) + "; " +
        number(c["mismatches"]) + " of " + number(c["numel"]) + " elements wrong";
    if (c.value("nan_count", 0) > 0) s += " (" + number(c["nan_count"]) + " NaN)";
    if (c.contains("first_bad_position") && c["first_bad_position"].is_array() &&
        c.value("first_bad_index", -1) >= 0)
      s += ", first at " + format_shape(c["first_bad_position"].get<std::vector<int64_t>>()) +
           ": got " + number(c["first_bad_value"]) + ", expected " +
           number(c["first_bad_expected"]);
    if (detail.value("unwritten_elements", 0) > 0)
      s += "; " + number(detail["unwritten_elements"]) + " never written";
  } else if (outcome == "timeout") {
    s = "no answer within the " +
        (ev.contains("watchdog_ms") ? number(ev["watchdog_ms"]) + " ms " : std::string()) +
        "watchdog";
  } else if (detail.contains("memcheck") && detail["memcheck"].is_string()) {
    s = memcheck_first_error(detail["memcheck"].get<std::string>()).value_or(outcome);
  } else if (detail.contains("cuda_error") && detail["cuda_error"].is_string()) {
    s = detail["cuda_error"].get<std::string>();
  } else if (detail.contains("output") && detail.contains("elements_differing")) {
    s = "output '" + detail.value("output", std::string("?")) +
        "' differs bitwise between two runs in " + number(detail["elements_differing"]) +
        " element(s)";
  } else {
    s = outcome;
  }
  return s + where;
}

// The task's failures that a resumed run reads the same (archive::PromptMemory::failures), newest
// first, each in one line.
std::vector<FailureRow> failure_rows(const PromptInputs& in,
                                     const std::vector<std::string>& order) {
  std::optional<archive::RunId> run;
  if (in.run) run = archive::RunId{*in.run};
  std::vector<FailureRow> rows;
  for (const archive::FailureRecord& r :
       archive::PromptMemory(*in.archive).failures(*in.task, run, in.generation)) {
    FailureRow f;
    f.candidate = r.candidate.value;
    if (r.run) f.run = r.run->value;
    f.generation = r.generation;
    switch (r.source) {
      case archive::FailureSource::Evaluation:
        f.kind = r.outcome;
        f.text = evaluation_text(f.kind, r.evidence, order);
        break;
      case archive::FailureSource::Screen:
        f.kind = r.outcome;
        f.text = r.summary.empty() ? f.kind : r.summary;
        break;
      case archive::FailureSource::Compile:
        f.kind = "compile";
        f.text = (r.stage == "compile" ? "" : "rejected at the " + r.stage + " stage: ") +
                 first_error_line(r.errors, r.log);
        // A call that got no answer is no lesson about the task.
        if (f.text.find("no answer from the model") != std::string::npos) continue;
        break;
    }
    rows.push_back(std::move(f));
  }
  return rows;
}

std::string label(const std::string& kind) {
  return kind == "compile" ? "compile error" : kind;
}

// "eager 0.123 ms, scripted 0.111 ms, compile not measured (why)`on`; the best baseline, the time
// to beat: scripted, 0.111 ms (about)": every kind the list has (a kind with neither a time nor a
// reason, as in rows older than it, is left out), then the best, which a kernel has to beat.
std::string baseline_words(const BaselineTimes& b, const std::string& on) {
  std::vector<std::string> kinds;
  for (const BaselineMs& m : b.items) {
    std::string label(baseline_info(m.kind).label);
    if (m.ms)
      kinds.push_back(label + " " + format_ms(*m.ms) + " ms");
    else if (!m.absent.empty())
      kinds.push_back(label + " not measured (" + one_line(m.absent, 160) + ")");
  }
  std::string out = join(kinds, ", ") + on;
  if (std::optional<BaselineMs> best = b.best()) {
    const BaselineKindInfo& info = baseline_info(best->kind);
    out += "; the best baseline, the time to beat: " + std::string(info.label) + ", " +
           format_ms(*best->ms) + " ms (" + std::string(info.about) + ")";
  }
  return out;
}

}  // namespace

bool fill_measured(const PromptInputs& in, bool floor_known,
                   std::map<std::string, std::string>& v) {
  archive::PromptMemory memory(*in.archive);
  const tasks::Task& t = *in.task;
  bool baselines = false;
  if (in.device_id) {
    if (std::optional<archive::QuotedBaseline> b =
            memory.baseline(t, archive::DeviceId{*in.device_id}, math_mode(t))) {
      v["eager_time"] =
          baseline_words(b->baselines, " (measured on " + b->device_name + ", " +
                                           (t.allow_tf32 ? "TF32 allowed" : "TF32 off") + ")");
      baselines = true;
    }
  }
  // The newest judged candidate of this task version made before `run` (a resumed run's prompts
  // repeat).
  std::optional<archive::RunId> run;
  if (in.run) run = archive::RunId{*in.run};
  std::optional<archive::JudgedReferences> j = memory.newest_judged(t, run);
  if (!j) return baselines;
  std::string on = " (measured beside candidate " + std::to_string(j->candidate.value) + " on " +
                   j->device_name + ")";
  if (!baselines) v["eager_time"] = baseline_words(j->baselines, on);
  if (j->floor_ms && !floor_known) v["roofline_floor"] = format_ms(*j->floor_ms) + " ms" + on;
  return baselines;
}

void fill_parent(const PromptInputs& in, const std::string& prefix,
                 std::optional<archive::CandidateId> id, bool baselines_measured,
                 std::map<std::string, std::string>& v) {
  if (!id || !in.archive) return;
  const tasks::Task& t = *in.task;
  json c = in.archive->show(*id);
  if (c.is_null())
    throw UsageError("no candidate " + std::to_string(id->value) + " in " + in.archive->path());
  if (c["task"] != t.id())
    throw UsageError("candidate " + std::to_string(id->value) + " is a kernel of " +
                     c["task"].get<std::string>() + ", not of " + t.id() +
                     "; a parent must be a kernel of the task the prompt is for");
  v[prefix + "id"] = std::to_string(id->value);
  v[prefix + "source"] = c["source"].get<std::string>();
  v[prefix + "plan"] = c["plan"].dump(2);
  v[prefix + "numbers"] = numbers_of(c);
  v[prefix + "resources"] =
      c["compiles"].empty() ? "no compile report" : c["compiles"].back()["resources"].dump();
  v[prefix + "profile"] = profile_words(in.archive->profile(*id, in.device_id));
  if (prefix != "parent_") return;
  if (const json* e = newest_with_baselines(c); e && !baselines_measured)
    v["eager_time"] = baseline_words(baselines_of(*e), measured_on(*e, *id));
  if (const json* e = newest_with(c, "roofline_fraction"))
    v["roofline_floor"] =
        format_ms((*e)["roofline_fraction"].get<double>() * (*e)["time_ms"].get<double>()) + " ms" +
        measured_on(*e, *id);
  v["failure_evidence"] = evidence_of(c, ordered_dims(t));
}

std::vector<std::string> retrieved_kernels(const PromptInputs& in) {
  std::vector<std::string> out;
  if (!in.archive) return out;
  for (const auto& k : in.archive->similar(*in.task, in.retrieved, in.run)) {
    json c = in.archive->show(k.id);
    out.push_back("### " + k.task + " (candidate " + std::to_string(k.id.value) + ", " +
                  numbers_of(c) + (k.verified ? "" : " Imported, unverified.") + ")\n```cuda\n" +
                  trim_lines(c["source"].get<std::string>(), 80) + "```\n\n");
  }
  return out;
}

std::vector<std::string> notable_failures(const PromptInputs& in, size_t k) {
  std::vector<std::string> out;
  if (!in.archive || k == 0) return out;
  std::vector<std::string> order = ordered_dims(*in.task);
  std::vector<FailureRow> rows = failure_rows(in, order);
  // Distinct: one per candidate, and one per message (numbers aside: the same error on another
  // line, or the same wrong output at other sizes, is the same lesson).
  std::set<int64_t> candidates;
  std::set<std::string> messages;
  std::vector<const FailureRow*> distinct;
  for (const FailureRow& r : rows) {
    std::string key = r.kind + " " + numbers_as_hash(r.text);
    if (candidates.count(r.candidate) || messages.count(key)) continue;
    candidates.insert(r.candidate), messages.insert(key);
    distinct.push_back(&r);
  }
  // Notable: each kind of failure's newest first, then the other rows, newest first.
  std::vector<const FailureRow*> picked;
  std::set<std::string> kinds;
  for (const FailureRow* r : distinct)
    if (picked.size() < k && kinds.insert(r->kind).second) picked.push_back(r);
  for (const FailureRow* r : distinct)
    if (picked.size() < k && std::find(picked.begin(), picked.end(), r) == picked.end())
      picked.push_back(r);
  for (const FailureRow* r : picked) {
    std::string from = r->run ? (in.run && *r->run == *in.run
                                     ? "this run, generation " + std::to_string(r->generation)
                                     : "run " + std::to_string(*r->run))
                              : "no run";
    out.push_back("- **" + label(r->kind) + "** (candidate " + std::to_string(r->candidate) + ", " +
                  from + "): " + one_line(r->text) + "\n");
  }
  return out;
}

}  // namespace kforge::evolve::prompt_parts
