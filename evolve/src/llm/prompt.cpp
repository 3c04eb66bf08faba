#include "kforge/evolve/prompt.h"

#include <unistd.h>

#include <regex>
#include <sstream>

#include "kforge/common/files.h"
#include "prompt_parts.h"

namespace kforge::evolve {
namespace {

constexpr std::pair<PromptKind, std::string_view> kKinds[] = {
    {PromptKind::Translate, "translate"},
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

archive::LineageKind lineage_kind(PromptKind k) {
  switch (k) {
    case PromptKind::Translate:
      return archive::LineageKind::Translate;
    case PromptKind::Optimize:
      return archive::LineageKind::Optimize;
    case PromptKind::Crossover:
      return archive::LineageKind::Crossover;
    case PromptKind::RepairCompile:
      return archive::LineageKind::RepairCompile;
    case PromptKind::RepairWrong:
      return archive::LineageKind::RepairWrong;
    case PromptKind::Ideas:
    case PromptKind::Idea:
      return archive::LineageKind::Idea;
  }
  return archive::LineageKind::Manual;
}

const std::set<std::string>& known_placeholders() {
  static const std::set<std::string> names = {"task_id",
                                              "task_summary",
                                              "task_reference",
                                              "task_tensors",
                                              "timed_dims",
                                              "check_dims",
                                              "device",
                                              "gpu_facts",
                                              "eager_time",
                                              "roofline_floor",
                                              "retrieved_kernels",
                                              "failures",
                                              "answer_format",
                                              "parent_id",
                                              "parent_source",
                                              "parent_plan",
                                              "parent_numbers",
                                              "parent_resources",
                                              "failure_evidence",
                                              "judging",
                                              "second_parent_id",
                                              "second_parent_source",
                                              "second_parent_plan",
                                              "second_parent_numbers",
                                              "second_parent_resources",
                                              "parent_profile",
                                              "second_parent_profile",
                                              "idea",
                                              "idea_count"};
  return names;
}

const std::set<std::string>& context_placeholders() {
  static const std::set<std::string> names = {
      "answer_format", "device",         "gpu_facts",    "eager_time", "roofline_floor", "task_id",
      "task_summary",  "task_reference", "task_tensors", "timed_dims", "check_dims",     "judging"};
  return names;
}

namespace {

std::string joined_names(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The text of template `file`, each placeholder checked on its line: a known one and, for
// context.md (`context`), one every prompt about the task shares. Nullopt when there is no file.
std::optional<std::string> read_template(const std::string& file, bool context) {
  auto text = read_file(file);
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), placeholder_re());
         it != std::sregex_iterator(); ++it) {
      std::string name = (*it)[1];
      if (!known_placeholders().count(name))
        throw InputError(file, n, "{{" + name + "}}",
                         "unknown placeholder (known: " + joined_names(known_placeholders()) + ")");
      if (context && !context_placeholders().count(name))
        throw InputError(file, n, "{{" + name + "}}",
                         "differs from request to request, and context.md holds only what every "
                         "prompt about a task on "
                         "one GPU shares (" +
                             joined_names(context_placeholders()) +
                             "); quote it in the kinds' templates");
    }
  }
  return text;
}

std::set<std::string> placeholders_of(const std::string& text) {
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), placeholder_re());
       it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

// `text` with each placeholder replaced by its value (every one has a value).
std::string fill(const std::string& text, const std::map<std::string, std::string>& values) {
  std::string out;
  auto last = text.cbegin();
  for (auto it = std::sregex_iterator(text.begin(), text.end(), placeholder_re());
       it != std::sregex_iterator(); ++it) {
    out.append(last, (*it)[0].first);
    out += values.at((*it)[1]);
    last = (*it)[0].second;
  }
  out.append(last, text.cend());
  return out;
}

}  // namespace

PromptTemplates PromptTemplates::load(const std::string& dir) {
  PromptTemplates t;
  for (const auto& [kind, name] : kKinds) {
    std::string file = dir + "/" + std::string(name) + ".md";
    auto text = read_template(file, false);
    if (!text)
      throw InputError(file, std::nullopt, "",
                       "missing prompt template (every kind needs one: translate, optimize, "
                       "crossover, repair_compile, repair_wrong, ideas, idea)");
    t.kinds_[kind] = {*text, file};
  }
  std::string file = dir + "/context.md";
  if (auto text = read_template(file, true)) t.context_ = Template{*text, file};
  return t;
}

std::set<std::string> PromptTemplates::placeholders(PromptKind kind) const {
  return placeholders_of(kinds_.at(kind).text);
}

std::set<std::string> PromptTemplates::placeholders_in_context() const {
  return context_ ? placeholders_of(context_->text) : std::set<std::string>{};
}

std::string PromptTemplates::render(PromptKind kind,
                                    const std::map<std::string, std::string>& values) const {
  const Template& t = kinds_.at(kind);
  for (const std::string& p : placeholders(kind))
    if (!values.count(p))
      throw UsageError(t.file + ": {{" + p + "}} has no value for this prompt" +
                       (p.rfind("parent", 0) == 0          ? " (this kind needs --parent)"
                        : p.rfind("second_parent", 0) == 0 ? " (this kind needs a second parent)"
                        : p == "idea"
                            ? " (this kind implements one idea from an ideas answer: --idea TEXT)"
                            : ""));
  return fill(t.text, values);
}

std::string PromptTemplates::render_context(
    const std::map<std::string, std::string>& values) const {
  if (!context_) return "";
  for (const std::string& p : placeholders_in_context())
    if (!values.count(p))
      throw UsageError(context_->file + ": {{" + p + "}} has no value for this prompt");
  return fill(context_->text, values);
}

std::string default_prompts_dir() {
  if (const char* env = std::getenv("KFORGE_PROMPTS"); env && *env) return env;
  if (::access("prompts/translate.md", R_OK) == 0) return "prompts";
  return KFORGE_SOURCE_PROMPTS_DIR;
}

std::string load_answer_format(const std::string& prompts_dir) {
  std::string file = prompts_dir + "/../docs/answer-format.md";
  auto text = read_file(file);
  if (!text)
    throw InputError(
        file, std::nullopt, "",
        "the answer format (docs/answer-format.md) is missing beside the prompts folder");
  // The parts only kforge needs (the identity hash, its own file names) stay in the document for
  // people and out of the prompts. A marker opens or closes a section on a line of its own.
  static const std::string kOpen = "<!-- not-in-prompt -->", kClose = "<!-- /not-in-prompt -->";
  std::istringstream lines(*text);
  std::string out, line;
  int n = 0, opened_at = 0;
  while (std::getline(lines, line)) {
    ++n;
    std::string bare = line.substr(0, line.find_last_not_of(" \t\r") + 1);
    if (bare == kOpen || bare == kClose) {
      if ((bare == kOpen) == (opened_at != 0))
        throw InputError(
            file, n, bare,
            opened_at ? "a section is already open (since line " + std::to_string(opened_at) + ")"
                      : "closes no open section");
      opened_at = bare == kOpen ? n : 0;
      continue;
    }
    if (!opened_at) out += line + "\n";
  }
  if (opened_at) throw InputError(file, opened_at, kOpen, "never closed with " + kClose);
  // Sections dropped between paragraphs leave no run of blank lines behind.
  static const std::regex blank_run("\n{3,}");
  return std::regex_replace(out, blank_run, "\n\n");
}

namespace {

// Every value but the two lists, and the lists, which render_prompt shortens to fit. `shared`:
// the context placeholders' values before any parent's measurements or `extra` (context.md's).
struct Context {
  std::map<std::string, std::string> values, shared;
  std::vector<std::string> kernels, failures;
};

Context context_of(const PromptInputs& in) {
  namespace parts = prompt_parts;
  const tasks::Task& t = *in.task;
  Context c;
  std::map<std::string, std::string>& v = c.values;
  std::vector<std::string> order = parts::ordered_dims(t);
  v["task_id"] = t.id();
  v["task_summary"] = t.summary;
  v["task_reference"] = t.reference;
  v["timed_dims"] = parts::format_dims(t.dims, order);
  std::string checks;
  for (const auto& d : t.check_dims)
    checks += (checks.empty() ? "" : "; ") + parts::format_dims(d, order);
  v["check_dims"] = checks.empty() ? "none" : checks;
  v["task_tensors"] = parts::task_tensors(t, *in.reference);
  v["judging"] = parts::judging(t, *in.reference);
  v["device"] = !in.device.empty() || !in.gpu ? in.device
                                              : (in.gpu->name.empty() ? "A GPU" : in.gpu->name) +
                                                    " (" + in.gpu->plan.arch + ")";
  v["gpu_facts"] = in.gpu ? parts::gpu_facts(*in.gpu) : "";
  v["eager_time"] = "not measured yet";
  v["roofline_floor"] = "not measured yet";
  if (t.flops || t.min_bytes) {
    std::string f;
    if (t.flops) f += std::to_string(static_cast<int64_t>(t.flops->eval_real(t.dims))) + " FLOPs";
    if (t.min_bytes)
      f += (f.empty() ? "" : ", ") +
           std::to_string(static_cast<int64_t>(t.min_bytes->eval_real(t.dims))) +
           " bytes that must move";
    v["roofline_floor"] = "not measured yet (the work: " + f + ")";
  }
  std::optional<double> floor =
      in.gpu ? parts::roofline_floor_ms(t, *in.reference, *in.gpu) : std::nullopt;
  if (floor)
    v["roofline_floor"] =
        parts::format_ms(*floor) + " ms (from this GPU's measured bandwidth and peaks)";
  bool baselines = in.archive && parts::fill_measured(in, floor.has_value(), v);
  v["answer_format"] = in.answer_format;
  for (const std::string& name : context_placeholders()) c.shared[name] = v.at(name);
  c.kernels = parts::retrieved_kernels(in);
  c.failures = parts::notable_failures(in, 3);
  // The parent's own measurement beats earlier runs' (not the baselines table's).
  parts::fill_parent(in, "parent_", in.parent, baselines, v);
  parts::fill_parent(in, "second_parent_", in.second_parent, baselines, v);
  for (const auto& [k, value] : in.extra) v[k] = value;
  return c;
}

// The values with the first `kernels` retrieved kernels and `failures` failures.
std::map<std::string, std::string> values_with(const Context& c, size_t kernels, size_t failures) {
  std::map<std::string, std::string> v = c.values;
  auto left_out = [](size_t n, const char* what) {
    return "(" + std::to_string(n) + " more " + what + " left out for length.)\n";
  };
  // The first `n` of `items`, saying how many more were left out; `none` when there are none.
  auto first = [&](const std::vector<std::string>& items, size_t n, const char* none,
                   const char* what) {
    if (items.empty()) return std::string(none);
    std::string text;
    for (size_t k = 0; k < n; ++k) text += items[k];
    return n < items.size() ? text + left_out(items.size() - n, what) : text;
  };
  v["retrieved_kernels"] =
      first(c.kernels, kernels, "None in the archive yet.", "similar kernel(s)");
  v["failures"] = first(c.failures, failures, "No failures recorded yet.", "failure(s)");
  return v;
}

size_t estimated_tokens(const std::string& text) {
  return (text.size() + 3) / 4;
}

}  // namespace

std::map<std::string, std::string> prompt_context(const PromptInputs& in) {
  Context c = context_of(in);
  return values_with(c, c.kernels.size(), c.failures.size());
}

namespace {

// With a context: what was measured beside the parent where the context (which cannot quote a
// parent's numbers, as they differ from parent to parent) says eager or the floor was not measured.
void quote_parent_measurements(Context& c) {
  if (!c.values.count("parent_numbers")) return;
  static const std::pair<std::string, std::string> kNumbers[] = {
      {"eager_time", "PyTorch baselines "}, {"roofline_floor", "roofline floor "}};
  std::string measured;
  for (const auto& [key, words] : kNumbers)
    if (c.shared.at(key).rfind("not measured yet", 0) == 0 && c.values.at(key) != c.shared.at(key))
      measured += (measured.empty() ? "" : "; ") + words + c.values.at(key);
  if (!measured.empty())
    c.values["parent_numbers"] +=
        "\nMeasured beside this kernel, where the operation above says not measured yet: " +
        measured + ".";
}

}  // namespace

PromptParts render_prompt_parts(const PromptTemplates& templates, PromptKind kind,
                                const PromptInputs& in) {
  Context c = context_of(in);
  if (templates.has_context()) quote_parent_measurements(c);
  PromptParts p;
  p.context = templates.render_context(c.shared);
  p.context.erase(p.context.find_last_not_of('\n') +
                  1);  // joined: one blank line before the request
  size_t kernels = c.kernels.size(), failures = c.failures.size();
  p.body = templates.render(kind, values_with(c, kernels, failures));
  // Over budget (both parts together): retrieved kernels go first, the lowest ranked first, then
  // failures; the context, the task, the parents and the answer format stay whatever their length.
  while (estimated_tokens(p.joined()) > in.max_tokens && (kernels > 0 || failures > 0)) {
    if (kernels > 0)
      --kernels;
    else
      --failures;
    p.body = templates.render(kind, values_with(c, kernels, failures));
  }
  return p;
}

std::string render_prompt(const PromptTemplates& templates, PromptKind kind,
                          const PromptInputs& in) {
  return render_prompt_parts(templates, kind, in).joined();
}

}  // namespace kforge::evolve
