#include "kforge/evolve/proposer.h"

#include <climits>
#include <future>
#include <random>
#include <sstream>

#include "kforge/common/hash.h"
#include "kforge/common/strings.h"
#include "kforge/compile/answer.h"
#include "kforge/tasks/reference_cache.h"

namespace kforge::evolve {

namespace {

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t out;
  return __builtin_add_overflow(a, b, &out) ? (b > 0 ? INT64_MAX : INT64_MIN) : out;
}

}  // namespace

void LlmSpent::add(const LlmSpent& o) {
  calls = saturating_add(calls, o.calls),
  failed_calls = saturating_add(failed_calls, o.failed_calls);
  tokens_in = saturating_add(tokens_in, o.tokens_in),
  tokens_out = saturating_add(tokens_out, o.tokens_out);
  cached = saturating_add(cached, o.cached), cost_usd += o.cost_usd;
  tokens_cache_read = saturating_add(tokens_cache_read, o.tokens_cache_read);
  tokens_cache_write = saturating_add(tokens_cache_write, o.tokens_cache_write);
}

LlmProposer::LlmProposer(std::vector<Voice> voices, const std::string& prompts_dir,
                         std::string device)
    : voices_(std::move(voices)),
      templates_(PromptTemplates::load(prompts_dir)),
      answer_format_(load_answer_format(prompts_dir)),
      device_(std::move(device)) {
  if (voices_.empty()) throw Error("LlmProposer: no model");
}

LlmProposer::LlmProposer(std::shared_ptr<const ChatModel> client, const std::string& prompts_dir,
                         std::string device)
    : LlmProposer(std::vector<Voice>{{model_config(client->model()), client}}, prompts_dir,
                  std::move(device)) {}

namespace {

constexpr const char* kIdeaMark = "\x01the idea\x01";
constexpr int kRetrySample = 1 << 20;  // added to a sample to ask once more after a paid failure

// The ensemble's role for a prompt kind (the LLM config's temperature keys).
std::string role_of(PromptKind kind) {
  switch (kind) {
    case PromptKind::RepairCompile:
    case PromptKind::RepairWrong:
      return "repair";
    case PromptKind::Ideas:
    case PromptKind::Idea:
      return "ideas";
    default:
      return std::string(prompt_kind_name(kind));
  }
}

}  // namespace

std::function<std::vector<Proposal>()> LlmProposer::prepare(
    const Ask& ask, const std::shared_ptr<const tasks::Task>& task, archive::Archive& archive) {
  std::shared_ptr<const tasks::Reference> reference = tasks::shared_references().reference(*task);
  PromptInputs in;
  in.task = task.get();
  in.reference = reference.get();
  in.archive = &archive;
  if (ask.parent) in.parent = archive::CandidateId{*ask.parent};
  if (ask.second_parent) in.second_parent = archive::CandidateId{*ask.second_parent};
  in.run = ask.lineage.run;
  in.generation = ask.horizon.value_or(ask.lineage.generation);
  in.device = device_;
  in.gpu = gpu_;
  in.device_id = device_id_;
  in.answer_format = answer_format_;
  in.extra["idea_count"] = std::to_string(ideas);
  in.extra["idea"] =
      kIdeaMark;  // an Idea prompt is rendered here, its idea filled in when it is known

  // The model: drawn by weight from the ensemble, the same draw for the same ask (resume asks the
  // same model the same thing).
  std::seed_seq seq{
      static_cast<uint32_t>(ask.sample), static_cast<uint32_t>(ask.lineage.generation),
      static_cast<uint32_t>(std::stoull(content_hash(task->id()).substr(0, 8), nullptr, 16))};
  std::mt19937_64 rng(seq);
  std::vector<double> weights;
  for (const Voice& v : voices_) weights.push_back(v.config.weight);
  const Voice& voice =
      voices_[std::discrete_distribution<size_t>(weights.begin(), weights.end())(rng)];

  ChatRequest request;
  request.system = "You are an expert CUDA engineer. Answer in the format the prompt gives.";
  PromptParts prompt = render_prompt_parts(templates_, ask.kind, in);
  request.context = prompt.context;
  request.user = prompt.body;
  request.temperature = voice.config.temperature_for(role_of(ask.kind));
  request.max_tokens = voice.config.max_tokens;
  Proposal blank;
  blank.task = task;
  blank.lineage = ask.lineage;
  blank.lineage.prompt_kind = lineage_kind(ask.kind);
  blank.lineage.model = voice.config.spec;
  // Compile errors name the candidate's own lines (label candidate.cu, from its first line): the
  // code the archive keeps and a repair prompt shows, not the answer around it.
  if (ask.kind != PromptKind::Ideas)
    return [this, &voice, request, blank, sample = ask.sample] {
      return answer(voice, request, blank, sample, true);
    };

  // Ideas: the ideas in words first, then each one's implementation, asked at once.
  std::string idea_prompt = render_prompt_parts(templates_, PromptKind::Idea, in).body;
  return
      [this, &voice, request, blank, idea_prompt, sample = ask.sample]() -> std::vector<Proposal> {
        std::vector<Proposal> listed = answer(voice, request, blank, sample, false);
        if (listed.front().unanswered || listed.front().answer_error) return listed;
        std::vector<std::string> ideas =
            parse_ideas(listed.front().source, static_cast<size_t>(this->ideas));
        if (ideas.empty()) {
          listed.front().answer_error = "the answer lists no numbered ideas";
          return listed;
        }
        std::vector<std::future<std::vector<Proposal>>> asked;
        for (size_t i = 0; i < ideas.size(); ++i) {
          ChatRequest r = request;
          r.user = idea_prompt;
          if (size_t at = r.user.find(kIdeaMark);
              at != std::string::npos)  // a template without {{idea}}: as it is
            r.user.replace(at, std::string(kIdeaMark).size(), ideas[i]);
          asked.push_back(std::async(std::launch::async, [this, &voice, r, blank, i] {
            return answer(voice, r, blank, static_cast<int>(i), true);
          }));
        }
        std::vector<Proposal> out;
        for (auto& f : asked)
          for (Proposal& p : f.get()) out.push_back(std::move(p));
        return out;
      };
}

// One request and its answer as a proposal (without `expect_code`, the answer's text is its
// source). Every reply's reported usage is counted, a failed call's too.
std::vector<Proposal> LlmProposer::answer(const Voice& v, const ChatRequest& request,
                                          const Proposal& blank, int sample, bool expect_code) {
  Proposal p = blank;
  const std::string& task = blank.task->id();
  ChatResponse r;
  std::string failed;  // the first ask's failure, where a second ask finds the budget spent
  for (int asked = 1;; ++asked) {
    // Not asked once the budget is spent: the loop stops on the same budget, nothing is recorded.
    // A paid failure's second ask also needs the task's budget.
    if (!take_call(asked == 1 ? "" : task)) {
      if (asked == 1) p.unanswered = true;
      if (asked > 1) p.answer_error = failed + " (not asked again: the LLM budget is spent)";
      return {p};
    }
    struct GiveBack {  // the call taken, counted (count) or given back unspent (a throw)
      LlmProposer& proposer;
      const std::string& task;
      bool done = false;
      void count(const LlmSpent& s) {
        proposer.give_back_call(task, &s);
        done = true;
      }
      ~GiveBack() {
        if (!done) proposer.give_back_call(task, nullptr);
      }
    } taken{*this, task};
    LlmSpent s;
    try {
      // The second ask is another sample: a batch folder's answer to the first is that answer
      // again (it would be counted twice), and a response cache keeps each apart.
      r = v.client->chat(request, asked == 1 ? sample : sample + kRetrySample);
      s.calls = 1, s.tokens_in = r.tokens_in, s.tokens_out = r.tokens_out, s.cached = r.cached;
      s.tokens_cache_read = r.tokens_cache_read, s.tokens_cache_write = r.tokens_cache_write;
      s.cost_usd =
          v.config.cost_usd(r.tokens_in, r.tokens_out, r.tokens_cache_read, r.tokens_cache_write);
      taken.count(s);
      break;
    } catch (const LlmError& e) {
      if (e.kind() == LlmError::Kind::Unanswered) {
        p.unanswered = true;
        return {p};
      }
      s.failed_calls = 1, s.tokens_in = e.tokens_in, s.tokens_out = e.tokens_out;
      s.tokens_cache_read = e.tokens_cache_read, s.tokens_cache_write = e.tokens_cache_write;
      s.cost_usd =
          v.config.cost_usd(e.tokens_in, e.tokens_out, e.tokens_cache_read, e.tokens_cache_write);
      taken.count(s);
      failed = std::string("no answer from the model: ") + e.what() +
               (e.finish_reason.empty() ? "" : " [finish_reason: " + e.finish_reason + "]");
      // A paid failure (cut off at the token limit, no answer text) is asked once more, if the
      // budget allows; the client retried the unpaid ones already.
      if (e.paid() && asked < 2 && !budget_spent(task)) continue;
      p.answer_error = failed + (asked > 1 ? " (asked " + std::to_string(asked) + " times)" : "");
      return {p};
    }
  }
  if (!expect_code) {
    p.source = r.text;
    return {p};
  }
  try {
    compile::Answer a = compile::parse_answer(r.text);
    p.source = a.source, p.plan = a.plan;
  } catch (const compile::AnswerError& e) {
    p.source =
        r.text;  // what the model said instead, kept as the candidate's evidence (or the ideas)
    p.answer_error = e.what();
    std::string reason = lower_ascii(r.finish_reason);
    if (reason == "length" || reason == "max_tokens")
      *p.answer_error +=
          " [finish_reason: " + r.finish_reason + ": the answer was cut at max_tokens]";
  }
  return {p};
}

namespace {

bool spent_by(const LlmBudget& b, const LlmSpent& run, int64_t calls_taken, const LlmSpent* task) {
  if ((b.calls > 0 && run.calls + calls_taken >= b.calls) ||
      (b.tokens > 0 && run.tokens() >= b.tokens) || (b.dollars > 0 && run.cost_usd >= b.dollars))
    return true;
  return task && ((b.task_tokens > 0 && task->tokens() >= b.task_tokens) ||
                  (b.task_dollars > 0 && task->cost_usd >= b.task_dollars));
}

}  // namespace

bool LlmProposer::take_call(const std::string& task) {
  std::lock_guard<std::mutex> lock(spent_mutex_);
  auto it = task.empty() ? by_task_.end() : by_task_.find(task);
  if (spent_by(budget, spent_, calls_taken_, it == by_task_.end() ? nullptr : &it->second))
    return false;
  ++calls_taken_;
  return true;
}

void LlmProposer::give_back_call(const std::string& task, const LlmSpent* s) {
  std::lock_guard<std::mutex> lock(spent_mutex_);
  --calls_taken_;  // in the same hold as the count: no moment counts the call twice
  if (!s) return;
  spent_.add(*s);
  by_task_[task].add(*s);
}

bool LlmProposer::budget_spent(const std::string& task) const {
  std::lock_guard<std::mutex> lock(spent_mutex_);
  auto it = task.empty() ? by_task_.end() : by_task_.find(task);
  return spent_by(budget, spent_, 0, it == by_task_.end() ? nullptr : &it->second);
}

LlmSpent LlmProposer::spent() const {
  std::lock_guard<std::mutex> lock(spent_mutex_);
  return spent_;
}

LlmSpent LlmProposer::spent(const std::string& task) const {
  std::lock_guard<std::mutex> lock(spent_mutex_);
  auto it = by_task_.find(task);
  return it == by_task_.end() ? LlmSpent{} : it->second;
}

void LlmProposer::cancel() const {
  for (const Voice& v : voices_) v.client->cancel();
}

bool LlmProposer::proposes_as(const std::string& model) const {
  for (const Voice& v : voices_)
    if (v.config.spec == model) return true;
  return false;
}

std::string LlmProposer::models() const {
  if (voices_.size() == 1) return voices_[0].config.spec;
  std::string out;
  for (const Voice& v : voices_) {
    std::ostringstream w;
    w << v.config.weight;
    out += (out.empty() ? "" : ", ") + v.config.spec + " x" + w.str();
  }
  return out;
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\n';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// An idea's first line: optional spaces, an optional "-" or "*" bullet, optional "**", an optional
// "Idea" (any case), its number (1 or 2 digits) and ".", ")" or ":", an optional "**"; what
// follows is the idea. Each optional part is tried taken and left (as a regex would backtrack):
// 8 tries, each one pass over the line's head.
std::optional<std::pair<int, std::string>> idea_item(const std::string& line) {
  for (int tries = 0; tries < 8; ++tries) {
    bool bullet = tries & 1, bold = tries & 2, word = tries & 4;
    size_t i = 0, n = line.size();
    auto spaces = [&] {
      while (i < n && is_space(line[i])) ++i;
    };
    spaces();
    if (bullet) {
      if (i >= n || (line[i] != '-' && line[i] != '*')) continue;
      ++i;
      spaces();
    }
    if (bold) {
      if (line.compare(i, 2, "**") != 0) continue;
      i += 2;
    }
    if (word) {
      std::string w = line.substr(i, 4);
      for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (w != "idea") continue;
      i += 4;
      spaces();
    }
    size_t digits = 0;
    while (i + digits < n && digits < 3 && is_digit(line[i + digits])) ++digits;
    if (digits == 0 || digits > 2) continue;
    int number = std::stoi(line.substr(i, digits));
    i += digits;
    if (i >= n || (line[i] != '.' && line[i] != ')' && line[i] != ':')) continue;
    ++i;
    if (line.compare(i, 2, "**") == 0) i += 2;
    spaces();
    return std::make_pair(number, line.substr(i));
  }
  return std::nullopt;
}

void append_capped(std::string& idea, const std::string& more) {
  if (idea.size() >= kMaxIdeaBytes) return;
  idea += more.substr(0, kMaxIdeaBytes - idea.size());
}

}  // namespace

std::vector<std::string> parse_ideas(const std::string& text, size_t max) {
  std::vector<std::string> ideas;
  std::istringstream in(text);
  bool in_code = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("```", 0) == 0) in_code = !in_code;
    if (in_code || line.rfind("```", 0) == 0) continue;
    auto item = idea_item(line);
    if (item && item->first == static_cast<int>(ideas.size()) + 1) {
      if (ideas.size() == max) break;
      ideas.emplace_back();
      append_capped(ideas.back(), item->second);
    } else if (!ideas.empty() && !line.empty()) {
      append_capped(ideas.back(), "\n" + line);
    }
  }
  for (std::string& i : ideas) {
    while (!i.empty() && (i.back() == '\n' || i.back() == ' ')) i.pop_back();
  }
  return ideas;
}

}  // namespace kforge::evolve
