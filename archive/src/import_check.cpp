#include "import_check.h"

#include <climits>
#include <cmath>
#include <set>

#include "kforge/archive/lineage.h"
#include "kforge/common/hash.h"
#include "kforge/common/identity.h"

namespace kforge::archive::detail {
namespace {

using nlohmann::json;

constexpr int kFormat = 1;
constexpr int kMaxDepth = 64;

// The outcomes of DESIGN.md, as the evaluations table's CHECK constraint lists them.
const std::set<std::string> kOutcomes = {"compile_error",
                                         "plan_error",
                                         "launch_error",
                                         "runtime_error",
                                         "timeout",
                                         "wrong_result",
                                         "input_modified",
                                         "out_of_bounds_write",
                                         "out_of_bounds_read",
                                         "incomplete_output",
                                         "nondeterministic",
                                         "does_not_fit",
                                         "harness_error",
                                         "correct"};
const std::set<std::string> kRunStatuses = {"running", "finished", "failed", "interrupted"};

std::string field_name(const std::string& at, const char* key) {
  return at.empty() ? key : at + "." + key;
}

// How deep arrays and objects nest, outside strings: checked before parsing, so that nothing
// (parser, dump, identity) ever recurses on an untrusted depth.
int nesting(const std::string& s) {
  int depth = 0, most = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      most = std::max(most, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return most;
}

// kforge's timestamps: 2026-12-03T03:28:18.760Z (seconds' fraction optional).
bool is_timestamp(const std::string& s) {
  static const std::string pattern = "dddd-dd-ddTdd:dd:dd";
  if (s.size() < pattern.size() + 1 || s.size() > 40 || s.back() != 'Z') return false;
  for (size_t i = 0; i < pattern.size(); ++i)
    if (pattern[i] == 'd' ? !std::isdigit(static_cast<unsigned char>(s[i])) : s[i] != pattern[i])
      return false;
  std::string rest = s.substr(pattern.size(), s.size() - pattern.size() - 1);
  if (rest.empty()) return true;
  if (rest[0] != '.' || rest.size() < 2) return false;
  for (size_t i = 1; i < rest.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(rest[i]))) return false;
  return true;
}

// An older kforge's evaluation said why torch.compile has no time only in the judge's evidence
// (timing.compiled_absent): read where the line's baselines say nothing of the kind, as schema 7's
// migration reads it.
void compiled_absent_from_evidence(EvaluationRecord& r) {
  if (r.baselines.find(BaselineKind::Compiled)) return;
  const json* timing = r.evidence.contains("timing") ? &r.evidence["timing"] : nullptr;
  if (!timing || !timing->is_object()) return;
  auto why = timing->find("compiled_absent");
  if (why != timing->end() && why->is_string() && !why->get<std::string>().empty())
    r.baselines.set(BaselineKind::Compiled, std::nullopt, why->get<std::string>());
}

}  // namespace

void LineChecker::fail(const std::string& field, const std::string& problem) const {
  throw InputError(file_, line_, field, problem);
}

json LineChecker::parse(const std::string& text) const {
  if (nesting(text) > kMaxDepth)
    fail("", "JSON nested deeper than " + std::to_string(kMaxDepth) +
                 " levels; no kforge or AI CUDA Engineer line is");
  // Where the parser is (keys and list positions), so that a syntax error names its field too.
  struct Frame {
    bool list;
    std::string key;
    size_t index = 0;
  };
  std::vector<Frame> path;
  auto where = [&] {
    std::string out;
    for (const Frame& f : path)
      out += f.list          ? "[" + std::to_string(f.index) + "]"
             : f.key.empty() ? ""
                             : (out.empty() ? "" : ".") + f.key;
    return out;
  };
  auto element_done = [&] {
    if (!path.empty() && path.back().list) ++path.back().index;
  };
  json::parser_callback_t track = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        path.push_back({false, ""});
        break;
      case json::parse_event_t::array_start:
        path.push_back({true, ""});
        break;
      case json::parse_event_t::key:
        if (!path.empty() && parsed.is_string()) path.back().key = parsed.get<std::string>();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!path.empty()) path.pop_back();
        element_done();
        break;
      case json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text, track);
  } catch (const json::exception& e) {
    std::string why = e.what();
    if (size_t at = why.find("] "); at != std::string::npos)
      why = why.substr(at + 2);  // drop "[json.exception...]"
    fail(where(), "not JSON: " + why);
  }
  if (!j.is_object()) fail("", std::string("must be a JSON object, not ") + j.type_name());
  return j;
}

const json* LineChecker::get(const json& o, const std::string& at, const char* key,
                             bool required) const {
  auto it = o.find(key);
  if (it == o.end()) {
    if (required) fail(field_name(at, key), "missing");
    return nullptr;
  }
  return &*it;
}

std::string LineChecker::text(const json& o, const std::string& at, const char* key, bool required,
                              const std::string& fallback) const {
  const json* v = get(o, at, key, required);
  if (!v) return fallback;
  if (!v->is_string())
    fail(field_name(at, key), std::string("must be a string, not ") + v->type_name());
  return v->get<std::string>();
}

std::string LineChecker::name(const json& o, const std::string& at, const char* key) const {
  std::string s = text(o, at, key, true);
  if (s.empty()) fail(field_name(at, key), "is empty");
  if (s.size() > 256) fail(field_name(at, key), "is longer than 256 characters");
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '/')
      fail(field_name(at, key), "holds a control character or '/'");
  return s;
}

bool LineChecker::boolean(const json& o, const std::string& at, const char* key, bool required,
                          bool fallback) const {
  const json* v = get(o, at, key, required);
  if (!v) return fallback;
  if (!v->is_boolean())
    fail(field_name(at, key), std::string("must be true or false, not ") + v->type_name());
  return v->get<bool>();
}

int64_t LineChecker::integer(const json& o, const std::string& at, const char* key, bool required,
                             int64_t fallback, int64_t min, int64_t max) const {
  const json* v = get(o, at, key, required);
  if (!v) return fallback;
  std::string f = field_name(at, key);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max))
    fail(f, v->dump() + " is out of range (" + std::to_string(min) + " to " + std::to_string(max) +
                ")");
  if (!v->is_number_integer())
    fail(f,
         std::string("must be an integer, not ") + (v->is_number() ? v->dump() : v->type_name()));
  int64_t n = v->get<int64_t>();
  if (n < min || n > max)
    fail(f, std::to_string(n) + " is out of range (" + std::to_string(min) + " to " +
                std::to_string(max) + ")");
  return n;
}

std::optional<int64_t> LineChecker::maybe_count(const json& o, const std::string& at,
                                                const char* key) const {
  const json* v = get(o, at, key, false);
  if (!v || v->is_null()) return std::nullopt;
  return integer(o, at, key, true, 0, 1, INT64_MAX);
}

std::optional<double> LineChecker::measure(const json& o, const std::string& at, const char* key,
                                           bool zero_ok) const {
  const json* v = get(o, at, key, false);
  if (!v || v->is_null()) return std::nullopt;
  std::string f = field_name(at, key);
  if (!v->is_number()) fail(f, std::string("must be a number or null, not ") + v->type_name());
  double d = v->get<double>();
  if (!std::isfinite(d)) fail(f, "must be finite");
  if (zero_ok ? d < 0 : d <= 0)
    fail(f, v->dump() + (zero_ok ? " is negative" : " is not positive"));
  return d;
}

json LineChecker::object(const json& o, const std::string& at, const char* key,
                         bool required) const {
  const json* v = get(o, at, key, required);
  if (!v) return json::object();
  if (!v->is_object())
    fail(field_name(at, key), std::string("must be an object, not ") + v->type_name());
  return *v;
}

std::vector<std::string> LineChecker::strings(const json& o, const std::string& at,
                                              const char* key) const {
  const json* v = get(o, at, key, false);
  if (!v) return {};
  std::string f = field_name(at, key);
  if (!v->is_array()) fail(f, std::string("must be a list of strings, not ") + v->type_name());
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string())
      fail(f + "[" + std::to_string(i) + "]",
           std::string("must be a string, not ") + (*v)[i].type_name());
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::optional<std::string> LineChecker::timestamp(const json& o, const std::string& at,
                                                  const char* key, bool required) const {
  const json* v = get(o, at, key, required);
  if (!v) return std::nullopt;
  std::string s = text(o, at, key, true);
  if (!is_timestamp(s))
    fail(field_name(at, key),
         "'" + s.substr(0, 40) + "' is not a timestamp like 2026-12-03T03:28:18.760Z");
  return s;
}

BaselineTimes LineChecker::baselines(const json& o, const std::string& at) const {
  BaselineTimes out;
  const json* list = get(o, at, "baselines", false);
  if (!list || list->is_null()) {
    // Schema 6 and before: a column per kind.
    const std::pair<BaselineKind, const char*> columns[] = {
        {BaselineKind::Eager, "eager_ms"},
        {BaselineKind::Scripted, "scripted_ms"},
        {BaselineKind::Compiled, "compiled_ms"}};
    for (const auto& [kind, key] : columns)
      if (std::optional<double> ms = measure(o, at, key, false)) out.set(kind, ms);
    const json* why = get(o, at, "compiled_absent", false);
    if (why && !why->is_null() && !out.ms(BaselineKind::Compiled)) {
      std::string reason = text(o, at, "compiled_absent", true);
      if (!reason.empty()) out.set(BaselineKind::Compiled, std::nullopt, reason);
    }
    return out;
  }
  std::string lat = field_name(at, "baselines");
  if (!list->is_object())
    fail(lat, std::string("must be an object of times keyed by kind, not ") + list->type_name());
  json absent = object(*list, lat, "absent");
  for (const BaselineKindInfo& info : baseline_kinds()) {
    std::string kind(info.name);
    std::optional<double> ms = measure(*list, lat, kind.c_str(), false);
    std::string why;
    if (const json* w = get(absent, lat + ".absent", kind.c_str(), false); w && !w->is_null())
      why = text(absent, lat + ".absent", kind.c_str(), true);
    if (ms || !why.empty()) out.set(info.kind, ms, why);
  }
  return out;
}

bool known_outcome(const std::string& outcome) {
  return kOutcomes.count(outcome) != 0;
}

ImportedLine check_kforge_line(const json& j, const LineChecker& f, const std::string& source_name,
                               const ImportOptions& options) {
  ImportedLine l;
  int64_t format = f.integer(j, "", "kforge_archive", true, 0, 1, INT_MAX);
  if (format != kFormat)
    f.fail("kforge_archive", "format " + std::to_string(format) +
                                 " is newer than this kforge reads (" + std::to_string(kFormat) +
                                 "); upgrade kforge");

  const json& tj = *f.get(j, "", "task", true);
  if (!tj.is_object()) f.fail("task", std::string("must be an object, not ") + tj.type_name());
  l.task.suite = f.name(tj, "task", "suite");
  l.task.name = f.name(tj, "task", "name");
  l.task.content_hash = f.name(tj, "task", "version");
  l.task.summary = f.text(tj, "task", "summary", false);
  l.task.tags = f.strings(tj, "task", "tags");
  l.task.reference = f.text(tj, "task", "definition", false);
  l.task_created_at = f.timestamp(tj, "task", "created_at", false);

  const json& cj = *f.get(j, "", "candidate", true);
  if (!cj.is_object()) f.fail("candidate", std::string("must be an object, not ") + cj.type_name());
  NewCandidate& c = l.candidate;
  std::string stated = f.name(cj, "candidate", "identity");
  c.source = f.text(cj, "candidate", "source", true);
  c.plan = f.object(cj, "candidate", "plan");
  c.tunables = f.object(cj, "candidate", "tunables");
  std::map<std::string, int64_t> tunables;
  for (const auto& [k, v] : c.tunables.items())
    tunables[k] =
        f.integer(c.tunables, "candidate.tunables", k.c_str(), true, 0, INT64_MIN, INT64_MAX);
  // The identity names the content; it is recomputed, never believed. Besides the plan identity,
  // kforge's two stand-ins are recomputed too: a plan it could not parse, and AI CUDA Engineer
  // text.
  std::string identity = candidate_identity(c.source, c.plan, tunables);
  bool stand_in =
      (c.plan.empty() && tunables.empty() && stated == content_hash(c.source)) ||
      (c.plan.size() == 1 && c.plan.contains("unparsed") && c.plan["unparsed"].is_string() &&
       stated == content_hash(c.source + "\n" + c.plan["unparsed"].get<std::string>()));
  if (stated != identity && !stand_in)
    f.fail("candidate.identity",
           "'" + stated + "' is not the identity of this line's source, plan and tunables (" +
               identity + "); an imported line cannot lend its results to other content");
  c.identity = stated;
  c.generation = static_cast<int>(f.integer(cj, "candidate", "generation", false, 0, 0, INT_MAX));
  c.island = static_cast<int>(f.integer(cj, "candidate", "island", false, 0, 0, INT_MAX));
  c.prompt_kind = f.text(cj, "candidate", "prompt_kind", false);
  c.model = f.text(cj, "candidate", "model", false);
  std::string origin_text =
      f.text(cj, "candidate", "origin", false, std::string(to_string(Origin::Kforge)));
  std::optional<Origin> origin = origin_from_string(origin_text);
  if (!origin) f.fail("candidate.origin", "'" + origin_text + "' is neither kforge nor imported");
  bool verified = f.boolean(cj, "candidate", "verified", false, origin == Origin::Kforge);
  if (verified != (origin == Origin::Kforge))
    f.fail("candidate.verified",
           std::string(verified ? "true" : "false") + " contradicts origin '" + origin_text +
               "' (kforge's own candidates are verified, imported ones are not)");
  c.imported_claims = f.object(cj, "candidate", "imported");
  c.created_at = f.timestamp(cj, "candidate", "created_at", false);
  l.parents = f.strings(cj, "candidate", "parents");
  // Claims unless the user trusts the file; either way the rows say where they came from.
  c.imported = options.trust ? origin == Origin::Imported : true;
  c.import_source = source_name;
  c.import_trust = options.trust ? "trusted" : "claimed";
  if (const json* r = f.get(cj, "candidate", "run", false); r && !r->is_null()) {
    if (!r->is_object())
      f.fail("candidate.run", std::string("must be an object or null, not ") + r->type_name());
    ImportedLine::Run run;
    run.started_at = *f.timestamp(*r, "candidate.run", "started_at", true);
    if (const json* fin = f.get(*r, "candidate.run", "finished_at", false); fin && !fin->is_null())
      run.finished_at = f.timestamp(*r, "candidate.run", "finished_at", true);
    run.status = f.text(*r, "candidate.run", "status", false, "finished");
    if (!kRunStatuses.count(run.status))
      f.fail("candidate.run.status", "'" + run.status + "' is not a run status");
    run.config = f.object(*r, "candidate.run", "config");
    run.budgets_used = f.object(*r, "candidate.run", "budgets_used");
    l.run = run;
  }

  auto list = [&](const char* key) {
    const json* v = f.get(j, "", key, false);
    if (v && !v->is_array()) f.fail(key, std::string("must be a list, not ") + v->type_name());
    return v ? *v : json::array();
  };
  json compiles = list("compiles");
  for (size_t i = 0; i < compiles.size(); ++i) {
    std::string at = "compiles[" + std::to_string(i) + "]";
    const json& cr = compiles[i];
    if (!cr.is_object()) f.fail(at, std::string("must be an object, not ") + cr.type_name());
    CompileRecord r;
    r.ok = f.boolean(cr, at, "ok", true);
    r.stage = f.text(cr, at, "stage", true);
    r.errors = f.strings(cr, at, "errors");
    r.log = f.text(cr, at, "log", false);
    r.resources = f.object(cr, at, "resources");
    r.compile_ms = f.measure(cr, at, "compile_ms", /*zero_ok=*/true);
    r.arch = f.text(cr, at, "arch", false);
    r.nvrtc = f.text(cr, at, "nvrtc", false);
    r.created_at = f.timestamp(cr, at, "created_at", true);
    r.import_source = source_name;
    l.compiles.push_back(r);
  }
  json evaluations = list("evaluations");
  for (size_t i = 0; i < evaluations.size(); ++i) {
    std::string at = "evaluations[" + std::to_string(i) + "]";
    const json& e = evaluations[i];
    if (!e.is_object()) f.fail(at, std::string("must be an object, not ") + e.type_name());
    ImportedLine::Evaluation ie;
    EvaluationRecord& r = ie.record;
    if (const json* d = f.get(e, at, "device", false); d && !d->is_null()) {
      std::string dat = at + ".device";
      if (!d->is_object())
        f.fail(dat, std::string("must be an object or null, not ") + d->type_name());
      ie.device = ImportedLine::Device{
          f.name(*d, dat, "uuid"),        f.text(*d, dat, "name", false),
          f.text(*d, dat, "arch", false), f.text(*d, dat, "driver", false),
          f.maybe_count(*d, dat, "sms"),  f.maybe_count(*d, dat, "memory_bytes")};
    }
    r.outcome = f.text(e, at, "outcome", true);
    if (!kOutcomes.count(r.outcome))
      f.fail(at + ".outcome", "'" + r.outcome.substr(0, 40) + "' is not an outcome kforge knows");
    r.flags = f.strings(e, at, "flags");
    r.evidence = f.object(e, at, "evidence");
    r.dims = f.object(e, at, "dims");
    r.time_ms = f.measure(e, at, "time_ms", false);
    r.time_iqr_ms = f.measure(e, at, "time_iqr_ms", true);
    r.time_min_ms = f.measure(e, at, "time_min_ms", false);
    r.baselines = f.baselines(e, at);
    compiled_absent_from_evidence(r);
    r.roofline_fraction = f.measure(e, at, "roofline_fraction", true);
    r.admitted = f.boolean(e, at, "admitted", false);
    r.harness_version = static_cast<int>(f.integer(e, at, "harness_version", true, 0, 0, INT_MAX));
    r.toolchain = f.object(e, at, "toolchain");
    r.created_at = f.timestamp(e, at, "created_at", true);
    // A claim stays a claim (and keeps the file it was first claimed in), --trust or not.
    if (f.get(e, at, "claimed_from", false)) {
      r.import_source = f.text(e, at, "claimed_from", true);
      r.import_trust = "claimed";
    } else {
      r.import_source = source_name;
      r.import_trust = options.trust ? "trusted" : "claimed";
    }
    l.evaluations.push_back(ie);
  }
  return l;
}

}  // namespace kforge::archive::detail
