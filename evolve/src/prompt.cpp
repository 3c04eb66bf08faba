#include "kforge/evolve/prompt.h"

#include <unistd.h>

#include <cstdio>
#include <regex>
#include <sstream>

#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/verify/compare.h"

namespace kforge::evolve {
namespace {

using nlohmann::json;

constexpr std::pair<PromptKind, std::string_view> kKinds[] = {{PromptKind::Translate, "translate"},
                                                               {PromptKind::Optimize, "optimize"},
                                                               {PromptKind::Crossover, "crossover"},
                                                               {PromptKind::RepairCompile, "repair_compile"},
                                                               {PromptKind::RepairWrong, "repair_wrong"},
                                                               {PromptKind::Ideas, "ideas"},
                                                               {PromptKind::Idea, "idea"}};

const std::regex& placeholder_re() {
  static const std::regex re(R"(\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\})");
  return re;
}

std::string trim_lines(const std::string& text, size_t max_lines) {
  std::istringstream in(text);
  std::string out, line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (++n > max_lines) return out + "// ... (" + std::to_string(max_lines) + " of more lines shown)\n";
    out += line + "\n";
  }
  return out;
}

std::string numbers_of(const json& c) {
  if (c["evaluations"].empty()) return "Not evaluated yet.";
  const json& e = c["evaluations"].back();
  std::string s = "Outcome: " + e["outcome"].get<std::string>();
  if (!e["flags"].empty()) s += " (flags: " + e["flags"].dump() + ")";
  if (!e["time_ms"].is_null()) s += "; time " + std::to_string(e["time_ms"].get<double>()) + " ms";
  if (!e["speedup_eager"].is_null()) s += "; " + std::to_string(e["speedup_eager"].get<double>()) + "x eager";
  if (!e["roofline_fraction"].is_null()) s += "; " + std::to_string(e["roofline_fraction"].get<double>()) + " of the roofline floor";
  return s + ".";
}

std::string evidence_of(const json& c) {
  std::string s;
  for (const auto& cr : c["compiles"])
    if (!cr["ok"].get<bool>())
      for (const auto& err : cr["errors"]) s += "- " + err.get<std::string>() + "\n";
  for (const auto& e : c["evaluations"])
    if (e["outcome"] != "correct") s += "- " + e["outcome"].get<std::string>() + ": " + e["evidence"].dump() + "\n";
  return s.empty() ? "No failure recorded for this candidate." : s;
}

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", ms);
  return buf;
}

// The newest evaluation of `c` that was timed and measured `field` (eager_ms, roofline_fraction),
// or null.
const json* newest_with(const json& c, const char* field) {
  const json* found = nullptr;
  for (const auto& e : c["evaluations"])
    if (!e[field].is_null() && !e["time_ms"].is_null()) found = &e;
  return found;
}

std::string measured_on(const json& e, archive::CandidateId id) {
  return " (measured beside candidate " + std::to_string(id.value) +
         (e["device"].is_null() ? "" : " on GPU " + e["device"].get<std::string>()) + ")";
}

// What the parent's evaluation measured of PyTorch eager and of the roofline floor, in words.
std::optional<std::string> measured_eager(const json& c, archive::CandidateId id) {
  const json* e = newest_with(c, "eager_ms");
  if (!e) return std::nullopt;
  return format_ms((*e)["eager_ms"].get<double>()) + " ms" + measured_on(*e, id);
}

std::optional<std::string> measured_floor(const json& c, archive::CandidateId id) {
  const json* e = newest_with(c, "roofline_fraction");
  if (!e) return std::nullopt;
  double floor_ms = (*e)["roofline_fraction"].get<double>() * (*e)["time_ms"].get<double>();
  return format_ms(floor_ms) + " ms" + measured_on(*e, id);
}

}  // namespace

std::string_view prompt_kind_name(PromptKind k) {
  for (const auto& [kind, name] : kKinds)
    if (kind == k) return name;
  return "?";
}

std::optional<PromptKind> parse_prompt_kind(std::string_view name) {
  for (const auto& [kind, n] : kKinds)
    if (n == name) return kind;
  return std::nullopt;
}

const std::set<std::string>& known_placeholders() {
  static const std::set<std::string> names = {
      "task_id", "task_summary", "task_reference", "task_tensors", "timed_dims", "check_dims", "device", "eager_time",
      "roofline_floor", "retrieved_kernels", "answer_format", "parent_id", "parent_source", "parent_plan", "parent_numbers",
      "parent_resources", "failure_evidence", "judging", "second_parent_id", "second_parent_source", "second_parent_plan",
      "second_parent_numbers", "second_parent_resources", "idea", "idea_count"};
  return names;
}

PromptTemplates PromptTemplates::load(const std::string& dir) {
  PromptTemplates t;
  for (const auto& [kind, name] : kKinds) {
    std::string file = dir + "/" + std::string(name) + ".md";
    auto text = read_file(file);
    if (!text) throw InputError(file, std::nullopt, "", "missing prompt template (every kind needs one: translate, optimize, crossover, repair_compile, repair_wrong, ideas, idea)");
    std::istringstream lines(*text);
    std::string line;
    int n = 0;
    while (std::getline(lines, line)) {
      ++n;
      for (auto it = std::sregex_iterator(line.begin(), line.end(), placeholder_re()); it != std::sregex_iterator(); ++it)
        if (!known_placeholders().count((*it)[1]))
          throw InputError(file, n, "{{" + std::string((*it)[1]) + "}}", "unknown placeholder (known: task_id, task_summary, task_reference, task_tensors, timed_dims, check_dims, device, eager_time, roofline_floor, retrieved_kernels, answer_format, parent_*, second_parent_*, failure_evidence)");
    }
    t.text_[kind] = *text;
    t.file_[kind] = file;
  }
  return t;
}

std::set<std::string> PromptTemplates::placeholders(PromptKind kind) const {
  std::set<std::string> out;
  const std::string& text = text_.at(kind);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), placeholder_re()); it != std::sregex_iterator(); ++it) out.insert((*it)[1]);
  return out;
}

std::string PromptTemplates::render(PromptKind kind, const std::map<std::string, std::string>& values) const {
  for (const std::string& p : placeholders(kind))
    if (!values.count(p))
      throw UsageError(file_.at(kind) + ": {{" + p + "}} has no value for this prompt" +
                  (p.rfind("parent", 0) == 0 ? " (this kind needs --parent)" : p.rfind("second_parent", 0) == 0 ? " (this kind needs a second parent)"
                       : p == "idea"                      ? " (this kind implements one idea from an ideas answer)"
                                                          : ""));
  const std::string& text = text_.at(kind);
  std::string out;
  auto last = text.cbegin();
  for (auto it = std::sregex_iterator(text.begin(), text.end(), placeholder_re()); it != std::sregex_iterator(); ++it) {
    out.append(last, (*it)[0].first);
    out += values.at((*it)[1]);
    last = (*it)[0].second;
  }
  out.append(last, text.cend());
  return out;
}

std::string default_prompts_dir() {
  if (const char* env = std::getenv("KFORGE_PROMPTS"); env && *env) return env;
  if (::access("prompts/translate.md", R_OK) == 0) return "prompts";
  return KFORGE_SOURCE_PROMPTS_DIR;
}

std::string load_answer_format(const std::string& prompts_dir) {
  std::string file = prompts_dir + "/../docs/answer-format.md";
  auto text = read_file(file);
  if (!text) throw InputError(file, std::nullopt, "", "the answer format (docs/answer-format.md) is missing beside the prompts folder");
  return *text;
}

namespace {

// The task's newest measured eager and scripted times and roofline floor at the timed dims, from any
// judged candidate of this task version made before `run` (so a resumed run's prompts repeat).
void fill_measured(archive::Archive& ar, const tasks::Task& t, std::optional<int64_t> run,
                   std::map<std::string, std::string>& v) {
  archive::Statement s = ar.db().prepare(
      "SELECT e.eager_ms, e.scripted_ms, e.roofline_fraction * e.time_ms, coalesce(d.name, 'a GPU'), c.id "
      "FROM evaluations e JOIN candidates c ON c.id = e.candidate_id JOIN tasks k ON k.id = c.task_id "
      "LEFT JOIN devices d ON d.id = e.device_id WHERE k.suite = ?1 AND k.name = ?2 AND k.version = ?3 "
      "AND e.eager_ms IS NOT NULL AND e.import_trust IS NOT 'claimed' "
      "AND (?4 IS NULL OR c.run_id IS NULL OR c.run_id < ?4) ORDER BY e.id DESC LIMIT 1");
  s.bind(1, t.suite).bind(2, t.name).bind(3, t.content_hash).bind(4, run);
  if (!s.step()) return;
  std::string on = " (measured beside candidate " + std::to_string(s.integer(4)) + " on " + s.text(3) + ")";
  v["eager_time"] = format_ms(s.real(0)) + " ms" +
                    (s.is_null(1) ? "" : ", TorchScript-scripted " + format_ms(s.real(1)) + " ms") + on;
  if (!s.is_null(2)) v["roofline_floor"] = format_ms(s.real(2)) + " ms" + on;
}

// How a candidate is held to account: the acceptance rule with this task's tolerances, the math
// mode, the compile flags and what is timed (docs/design.md, "Acceptance rule"; docs/protocol.md).
std::string judging(const tasks::Task& t, const std::vector<tasks::OutputInfo>& outs) {
  std::string tols;
  for (size_t k = 0; k < outs.size(); ++k) {
    std::optional<double> given = k < t.outputs.size() ? t.outputs[k].tolerance : std::nullopt;
    double tol = given.value_or(verify::default_tolerance(outs[k].dtype));
    std::ostringstream os;
    os << tol;
    tols += (tols.empty() ? "" : ", ") + std::string("`") + outs[k].name + "` " +
            (tasks::is_floating(outs[k].dtype) ? "tol = " + os.str() : "exactly equal to eager's output");
  }
  std::ostringstream k;
  k << verify::kEagerErrorFactor;
  return "Correctness: each output is compared in float64 with the reference run in float64, over several "
         "seeds, two input distributions and every size above. The largest |yours - reference| may not exceed "
         "max(tol * rms(reference), " + k.str() + " * eager's own largest error); here " + tols + ". " +
         (t.allow_tf32 ? "TF32 is allowed for this task. "
                       : "Math is IEEE: TF32 is off, and float32 work must stay float32 (no fp16/TF32 shortcuts). ") +
         "NVRTC compiles with -std=c++17 and without --use_fast_math (fast intrinsics such as __expf are yours "
         "to call, and must still meet the tolerance).\n"
         "Timing: each launch of your plan in order, at the timed sizes, with the L2 cache flushed and the inputs "
         "taken from a pool of fresh sets before every repetition; the median of many repetitions, beside PyTorch "
         "eager on the same inputs.";
}

}  // namespace

std::map<std::string, std::string> prompt_context(const PromptInputs& in) {
  const tasks::Task& t = *in.task;
  std::map<std::string, std::string> v;
  v["task_id"] = t.id();
  v["task_summary"] = t.summary;
  v["task_reference"] = t.reference;
  v["timed_dims"] = tasks::format_dims(t.dims);
  std::string checks;
  for (const auto& d : t.check_dims) checks += (checks.empty() ? "" : "; ") + tasks::format_dims(d);
  v["check_dims"] = checks.empty() ? "none" : checks;
  std::string tensors;
  for (const auto& i : t.inputs)
    tensors += "- input `" + i.name + "`: " + std::string(tasks::dtype_name(i.dtype)) + " " + format_shape(t.shape_of(i, t.dims)) +
             " (shape " + tasks::shape_expressions(i) + "), values " + (i.init.text.empty() ? "randn" : i.init.text) + "\n";
  auto shapes = tasks::output_shapes(t, *in.reference, t.dims);
  auto outs = tasks::describe_outputs(t, *in.reference);
  for (size_t k = 0; k < outs.size(); ++k)
    tensors += "- output `" + outs[k].name + "`: " + std::string(tasks::dtype_name(outs[k].dtype)) + " " +
               (shapes ? format_shape((*shapes)[k].sizes) : "(rank " + std::to_string(outs[k].rank) + ")") + "\n";
  v["task_tensors"] = tensors;
  v["judging"] = judging(t, outs);
  v["device"] = in.device;
  v["eager_time"] = "not measured yet";
  v["roofline_floor"] = "not measured yet";
  if (t.flops || t.min_bytes) {
    std::string f;
    if (t.flops) f += std::to_string(static_cast<int64_t>(t.flops->eval_real(t.dims))) + " FLOPs";
    if (t.min_bytes) f += (f.empty() ? "" : ", ") + std::to_string(static_cast<int64_t>(t.min_bytes->eval_real(t.dims))) + " bytes that must move";
    v["roofline_floor"] = "not measured yet (the work: " + f + ")";
  }
  if (in.archive) fill_measured(*in.archive, t, in.run, v);  // a parent's own measurement, below, wins
  v["answer_format"] = in.answer_format;
  std::string retrieved;
  if (in.archive)
    for (const auto& k : in.archive->similar(t, in.retrieved, in.run)) {
      json c = in.archive->show(k.id);
      retrieved += "### " + k.task + " (candidate " + std::to_string(k.id.value) + ", " + numbers_of(c) +
                   (k.verified ? "" : " Imported, unverified.") + ")\n```cuda\n" + trim_lines(c["source"].get<std::string>(), 80) + "```\n\n";
    }
  v["retrieved_kernels"] = retrieved.empty() ? "None in the archive yet." : retrieved;
  auto fill_parent = [&](const std::string& prefix, std::optional<archive::CandidateId> id) {
    if (!id || !in.archive) return;
    json c = in.archive->show(*id);
    if (c.is_null()) throw UsageError("no candidate " + std::to_string(id->value) + " in " + in.archive->db().path());
    if (c["task"] != t.id())
      throw UsageError("candidate " + std::to_string(id->value) + " is a kernel of " + c["task"].get<std::string>() +
                       ", not of " + t.id() + "; a parent must be a kernel of the task the prompt is for");
    v[prefix + "id"] = std::to_string(id->value);
    v[prefix + "source"] = c["source"].get<std::string>();
    v[prefix + "plan"] = c["plan"].dump(2);
    v[prefix + "numbers"] = numbers_of(c);
    v[prefix + "resources"] = c["compiles"].empty() ? "no compile report" : c["compiles"].back()["resources"].dump();
    if (prefix == "parent_") {
      if (std::optional<std::string> eager = measured_eager(c, *id)) v["eager_time"] = *eager;
      if (std::optional<std::string> floor = measured_floor(c, *id)) v["roofline_floor"] = *floor;
      v["failure_evidence"] = evidence_of(c);
    }
  };
  fill_parent("parent_", in.parent);
  fill_parent("second_parent_", in.second_parent);
  return v;
}

}  // namespace kforge::evolve
