// The search loop against answers a model gave (issue 19, Tests): the corpus of tests/corpus/llm/
// (the batch run of 2026-12-03's real answers, and hand-written awkward ones) is replayed by the
// loopback LLM server (loopback_model.h) to the requests `kforge evolve`'s loop really makes, each
// matched by its task and prompt kind; the loop runs on the CPU with the real compiler and archive
// and the fake GPU of the other loop tests (fake_gpu.h). Every answer must become a candidate with
// the outcome the corpus expects, repairs must be asked with the right evidence, the loop must go
// on past every bad answer, and the run's tokens and dollars must be what the server reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "fake_gpu.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/compile/answer.h"
#include "kforge/evolve/config.h"
#include "kforge/evolve/run.h"
#include "loop_rig.h"
#include "loopback_model.h"
#include "test_util.h"

namespace {

using namespace kforge;
using kforge::test::FakeGpu;
using kforge::test::source_dir;
using kforge::test::TempDir;
using nlohmann::json;

constexpr const char* kModel = "openai:helper-as-model";
constexpr double kPriceIn = 3.0, kPriceOut = 15.0;  // $ per million tokens, in the LLM config below

// ---- The corpus ----

struct CorpusAnswer {
  std::string id, task, kind, expect, text;
  std::optional<std::pair<int64_t, int64_t>> usage;  // as recorded (prompt, completion tokens)
  std::optional<std::string> repair;                 // the answer to its repair prompt
  // The code as the archive keeps the candidate: the answer's CUDA block, or the whole answer
  // when it has no usable code (an answer error).
  std::string source() const { return stored_source(text); }
  static std::string stored_source(const std::string& text) {
    try {
      return compile::parse_answer(text).source;
    } catch (const compile::AnswerError&) {
      return text;
    }
  }
  // The kernels its plan launches.
  std::set<std::string> kernels() const {
    std::set<std::string> out;
    json plan = json::parse(compile::parse_answer(text).plan);
    for (const json& l : plan["launch"]) out.insert(l["kernel"].get<std::string>());
    return out;
  }
};

std::string corpus_dir() {
  return (source_dir() / "tests/corpus/llm").string();
}

// recorded.jsonl (the batch run's answers), then hand/manifest.json's answers.
std::vector<CorpusAnswer> load_corpus() {
  std::vector<CorpusAnswer> out;
  std::istringstream recorded(read_file(corpus_dir() + "/recorded.jsonl").value());
  for (std::string line; std::getline(recorded, line);) {
    json e = json::parse(line);
    out.push_back(
        {e["id"], e["task"], e["kind"], e["expect"], e["answer"],
         std::pair<int64_t, int64_t>{e["usage"]["prompt_tokens"], e["usage"]["completion_tokens"]},
         std::nullopt});
  }
  json manifest = json::parse(read_file(corpus_dir() + "/hand/manifest.json").value());
  for (const json& e : manifest["answers"]) {
    CorpusAnswer a{e["id"],
                   e["task"],
                   e["kind"],
                   e["expect"],
                   read_file(corpus_dir() + "/hand/" + e["file"].get<std::string>()).value(),
                   std::nullopt,
                   std::nullopt};
    if (e.contains("repair"))
      a.repair = read_file(corpus_dir() + "/hand/" + e["repair"].get<std::string>()).value();
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<CorpusAnswer> corpus_for(const std::set<std::string>& tasks) {
  std::vector<CorpusAnswer> out;
  for (CorpusAnswer& a : load_corpus())
    if (tasks.count(a.task)) out.push_back(std::move(a));
  return out;
}

// ---- The model: the loopback server replaying the corpus ----

// The prompt kind of a rendered prompt (the shared context, then its kind's part): the template
// whose opening line (its first that is not a heading) is a line of the prompt.
std::string kind_of(const std::string& prompt) {
  for (const char* kind :
       {"translate", "optimize", "crossover", "repair_compile", "repair_wrong", "ideas", "idea"}) {
    std::istringstream t(
        read_file((source_dir() / "prompts" / (std::string(kind) + ".md")).string()).value());
    std::string opening;
    while (std::getline(t, opening) && (opening.empty() || opening[0] == '#')) {
    }
    if (prompt.rfind(opening + "\n", 0) == 0 ||
        prompt.find("\n" + opening + "\n") != std::string::npos)
      return kind;
  }
  return "?";
}

std::string task_of(const std::string& prompt) {
  size_t at = prompt.find("## The operation: ");
  if (at == std::string::npos) return "?";
  at += 18;
  return prompt.substr(at, prompt.find('\n', at) - at);
}

// The section of a prompt under `heading` (to the next "## ").
std::string section(const std::string& prompt, const std::string& heading) {
  size_t at = prompt.find(heading);
  if (at == std::string::npos) return "";
  size_t end = prompt.find("\n## ", at + heading.size());
  return prompt.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

class CorpusModel {
 public:
  // What the server answered: a corpus answer (`id`, "ID/repair" for its repair) or a spare one
  // (id "") once the task's corpus answers are used up.
  struct Served {
    std::string id, kind, task, prompt, text;
  };

  explicit CorpusModel(std::vector<CorpusAnswer> corpus)
      : corpus_(std::move(corpus)),
        server_([this](const std::string& p) { return answer(p); }, "helper-as-model",
                [this](const std::string& p, const std::string& a) { return usage(p, a); }) {}

  std::vector<Served> served() {
    std::lock_guard<std::mutex> lock(mutex_);
    return served_;
  }
  std::pair<int64_t, int64_t> tokens() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {tokens_in_, tokens_out_};
  }
  std::string base_url() const { return server_.base_url(); }

 private:
  std::optional<std::string> answer(const std::string& prompt) {
    std::lock_guard<std::mutex> lock(mutex_);
    Served s{"", kind_of(prompt), task_of(prompt), prompt, ""};
    if (s.kind == "repair_compile" || s.kind == "repair_wrong") {
      // The repair of the corpus answer whose code the prompt quotes as the failed candidate.
      std::string failed = section(prompt, "## The candidate (");
      for (const CorpusAnswer& a : corpus_)
        if (a.repair && a.task == s.task &&
            failed.find("```cuda\n" + a.source()) != std::string::npos &&
            !used_.count(a.id + "/repair")) {
          s.id = a.id + "/repair", s.text = *a.repair;
          break;
        }
    } else {
      // The task's next answer of this kind, else its next of any kind.
      const CorpusAnswer* pick = nullptr;
      for (const CorpusAnswer& a : corpus_)
        if (a.task == s.task && !used_.count(a.id) &&
            (!pick || (a.kind == s.kind && pick->kind != s.kind)))
          pick = &a;
      if (pick) s.id = pick->id, s.text = pick->text;
    }
    if (s.id.empty()) {  // a spare: the task's seed, marked so that each is new code
      std::string seed = read_file((source_dir() / "tasks" / s.task.substr(0, s.task.find('/')) /
                                    "seeds" / (s.task.substr(s.task.find('/') + 1) + ".md"))
                                       .string())
                             .value();
      s.text = seed.insert(seed.find("```cuda\n") + 8,
                           "// spare answer " + std::to_string(served_.size()) + "\n");
    }
    used_.insert(s.id);
    served_.push_back(s);
    return s.text;
  }
  // The recorded usage, else what the batch helpers estimated: characters / 4.
  std::pair<int64_t, int64_t> usage(const std::string& prompt, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::pair<int64_t, int64_t> u{static_cast<int64_t>(prompt.size() / 4),
                                  static_cast<int64_t>(text.size() / 4)};
    for (const CorpusAnswer& a : corpus_)
      if (a.text == text && a.usage) u = *a.usage;
    tokens_in_ += u.first, tokens_out_ += u.second;
    return u;
  }

  std::vector<CorpusAnswer> corpus_;
  std::mutex mutex_;
  std::vector<Served> served_;
  std::set<std::string> used_;
  int64_t tokens_in_ = 0, tokens_out_ = 0;
  kforge::test::LoopbackModel server_;  // last: its server, which uses the rest, stops first
};

// ---- The loop ----

using kforge::test::Rig;

// The proposer as `kforge evolve --llm-config` makes it: one model with list prices, at the
// loopback server; answers cached in the rig's folder (a resumed run reads them there).
std::unique_ptr<evolve::LlmProposer> proposer(Rig& rig, const CorpusModel& model) {
  std::string path = (rig.dir.path() / "llm.toml").string();
  {
    std::ofstream cfg(path);
    cfg << "[[models]]\nmodel = \"" << kModel << "\"\nprice = { input = " << kPriceIn
        << ", output = " << kPriceOut << " }\n[providers.openai]\nbase_url = \"" << model.base_url()
        << "\"\n";
  }
  evolve::LlmConfig cfg = evolve::load_llm_config(path);
  auto cache = std::make_shared<evolve::ResponseCache>((rig.dir.path() / "llm-cache").string());
  std::vector<evolve::Voice> voices;
  for (const evolve::ModelConfig& m : cfg.models)
    voices.push_back({m, std::make_shared<const evolve::LlmClient>(cfg.endpoint(m), cfg.policy(m),
                                                                   nullptr, nullptr, cache)});
  return std::make_unique<evolve::LlmProposer>(voices, (source_dir() / "prompts").string(),
                                               "a test GPU");
}

std::vector<std::shared_ptr<const tasks::Task>> load_tasks(const std::vector<std::string>& ids) {
  std::vector<std::shared_ptr<const tasks::Task>> out;
  for (const std::string& id : ids)
    out.push_back(std::make_shared<const tasks::Task>(
        tasks::load_task(tasks::resolve_tasks(id, (source_dir() / "tasks").string()).at(0))));
  return out;
}

evolve::RunSummary run(Rig& rig, CorpusModel& model, const evolve::RunConfig& c,
                       std::optional<int64_t> resume = {}) {
  auto llm = proposer(rig, model);
  return evolve::run_evolution(c, load_tasks(c.tasks), *rig.evaluator, resume, {}, llm.get());
}

// ---- What the archive must hold ----

struct Candidate {
  int64_t id = 0;
  std::string model;
  bool compiled = false;
  std::string stage, errors;
  std::optional<std::string> screen, judgment;
};

// The run's candidates made of `source` by a `kind` prompt.
std::vector<Candidate> candidates(Rig& rig, int64_t run, const std::string& source,
                                  const std::string& kind) {
  std::vector<Candidate> out;
  archive::Statement s = rig.sql().prepare(
      "SELECT c.id, c.model, x.ok, x.stage, x.errors,"
      " (SELECT outcome FROM screens WHERE candidate_id = c.id),"
      " (SELECT outcome FROM evaluations WHERE candidate_id = c.id ORDER BY id DESC LIMIT 1)"
      " FROM candidates c JOIN compiles x ON x.candidate_id = c.id"
      " WHERE c.run_id = ? AND c.source = ? AND c.prompt_kind = ?");
  s.bind(1, run).bind(2, source).bind(3, kind);
  while (s.step()) {
    Candidate c;
    c.id = s.integer(0), c.model = s.text(1), c.stage = s.text(3), c.errors = s.text(4);
    // Compiled: every check passed (a module that compiled can still fail signatures or limits).
    c.compiled = s.integer(2) != 0 && c.stage == "passed";
    if (!s.is_null(5)) c.screen = s.text(5);
    if (!s.is_null(6)) c.judgment = s.text(6);
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string trimmed(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// Every diagnostic a repair prompt quotes with a line ("FILE:N: error: ...", a warning likewise;
// NVRTC then quotes the line) must name the candidate's own line N: the line the prompt shows as
// the candidate's. Returns how many it checked.
int check_error_lines(const std::string& evidence, const std::string& source,
                      const std::string& what) {
  std::vector<std::string> ev = lines_of(evidence), src = lines_of(source);
  static const std::regex error_line(R"([^\s:]+:([0-9]+): (error|warning)\b.*)");
  int checked = 0;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    std::smatch m;
    std::string line = trimmed(ev[i]);
    if (line.rfind("- ", 0) == 0) line = line.substr(2);
    if (!std::regex_match(line, m, error_line)) continue;
    size_t n = std::stoul(m[1]);
    ++checked;
    EXPECT_TRUE(n >= 1 && n <= src.size())
        << what << ": " << line << " (the candidate has " << src.size() << " lines)";
    if (n >= 1 && n <= src.size()) {
      EXPECT_EQ(trimmed(ev[i + 1]), trimmed(src[n - 1]))
          << what << ": " << line << " names line " << n
          << " of the candidate, which is not the line the log quotes";
    }
  }
  return checked;
}

struct Checked {
  int answers = 0, repairs = 0, error_lines = 0;
  std::map<std::string, int> by_expect;
};

// Every corpus answer the server gave: the candidate it became, its outcome, its repair.
void check_every_answer(Rig& rig, int64_t run, CorpusModel& model,
                        const std::vector<CorpusAnswer>& corpus, Checked& out) {
  std::vector<CorpusModel::Served> served = model.served();
  auto served_as = [&](const std::string& id) -> std::vector<const CorpusModel::Served*> {
    std::vector<const CorpusModel::Served*> v;
    for (const auto& s : served)
      if (s.id == id) v.push_back(&s);
    return v;
  };
  for (const CorpusAnswer& a : corpus) {
    std::vector<const CorpusModel::Served*> asked = served_as(a.id);
    EXPECT_EQ(asked.size(), 1u) << a.id << ": every corpus answer is given once";
    if (asked.size() != 1) continue;
    ++out.answers, ++out.by_expect[a.expect];
    std::vector<Candidate> cs = candidates(rig, run, a.source(), asked[0]->kind);
    ASSERT_EQ(cs.size(), 1u) << a.id << ": the answer to a " << asked[0]->kind
                             << " prompt is one candidate";
    const Candidate& c = cs[0];
    EXPECT_EQ(c.model, kModel) << a.id;
    bool gpu = a.expect == "compiles" || a.expect == "wrong_result";
    EXPECT_EQ(c.compiled, gpu) << a.id << ": " << c.stage << ": " << c.errors;
    EXPECT_EQ(c.screen.has_value(), gpu)
        << a.id << ": what compiles reaches the GPU, nothing else does";
    if (a.expect == "compiles") {
      EXPECT_EQ(c.screen.value_or(""), "correct") << a.id;
    }
    if (a.expect == "wrong_result") {
      EXPECT_EQ(c.screen.value_or(""), "wrong_result") << a.id;
      EXPECT_EQ(c.judgment.value_or(""), "wrong_result")
          << a.id << ": a wrong child is judged in full for its evidence";
    }
    if (a.expect == "compile_error") {
      EXPECT_TRUE(c.stage == "compile" || c.stage == "signature") << a.id << ": " << c.stage;
    }
    if (a.expect == "plan_error") {
      EXPECT_TRUE(c.stage == "plan" || c.stage == "limits") << a.id << ": " << c.stage;
    }
    if (a.expect == "answer_error") {
      EXPECT_EQ(c.stage, "answer") << a.id;
      std::string why;
      try {
        compile::parse_answer(a.text);
      } catch (const compile::AnswerError& e) {
        why = e.what();
      }
      EXPECT_FALSE(why.empty()) << a.id;
      EXPECT_NE(c.errors.find(json(why).dump().substr(1, 40)), std::string::npos)
          << a.id << ": " << c.errors;
    }
    // Its children: a repair for what failed (and can be fixed), none for an answer without code.
    archive::Statement kids = rig.sql().prepare(
        "SELECT count(*), group_concat(c.prompt_kind) FROM candidate_parents p"
        " JOIN candidates c ON c.id = p.candidate_id"
        " WHERE p.parent_id = ? AND c.prompt_kind LIKE 'repair%'");
    kids.bind(1, c.id);
    kids.step();
    bool repairable =
        a.expect == "compile_error" || a.expect == "plan_error" || a.expect == "wrong_result";
    EXPECT_EQ(kids.integer(0), repairable ? 1 : 0) << a.id;
    if (!repairable) continue;
    std::string repair_kind = a.expect == "wrong_result" ? "repair_wrong" : "repair_compile";
    EXPECT_EQ(kids.text(1), repair_kind) << a.id;
    ASSERT_TRUE(a.repair) << a.id << ": a failing corpus answer has its repaired answer";
    std::vector<const CorpusModel::Served*> fix = served_as(a.id + "/repair");
    ASSERT_EQ(fix.size(), 1u) << a.id << ": its repair is asked once";
    ++out.repairs;
    EXPECT_EQ(fix[0]->kind, repair_kind) << a.id;
    // The repair prompt carries the failed candidate and why it failed.
    std::string why = section(fix[0]->prompt, "## Why it was rejected");
    if (a.expect == "wrong_result") {
      why = fix[0]->prompt;
      EXPECT_NE(why.find(FakeGpu::kWrongSummary), std::string::npos)
          << a.id << ": the judgment's evidence\n"
          << why;
      EXPECT_NE(why.find("first_bad_expected"), std::string::npos) << a.id;
    } else {
      std::string first = lines_of(json::parse(c.errors).at(0).get<std::string>()).at(0);
      EXPECT_NE(why.find(first), std::string::npos) << a.id << ": the compile report's errors\n"
                                                    << why;
      out.error_lines += check_error_lines(why, a.source(), a.id);
    }
    // The repaired answer: a candidate of the repair kind, the failed one its parent, compiled.
    std::vector<Candidate> fixed =
        candidates(rig, run, CorpusAnswer::stored_source(*a.repair), repair_kind);
    ASSERT_EQ(fixed.size(), 1u) << a.id;
    EXPECT_TRUE(fixed[0].compiled) << a.id << ": " << fixed[0].errors;
    EXPECT_EQ(fixed[0].screen.value_or(""), "correct") << a.id;
    EXPECT_EQ(rig.count("SELECT count(*) FROM candidate_parents WHERE candidate_id = " +
                        std::to_string(fixed[0].id) + " AND parent_id = " + std::to_string(c.id)),
              1)
        << a.id;
  }
}

// What the run recorded it spent is what the server reported.
void check_spent(Rig& rig, const evolve::RunSummary& r, CorpusModel& model) {
  std::vector<CorpusModel::Served> served = model.served();
  auto [in, out] = model.tokens();
  EXPECT_EQ(r.llm.calls, static_cast<int64_t>(served.size()));
  EXPECT_EQ(r.llm.failed_calls, 0);
  EXPECT_EQ(r.llm.tokens_in, in);
  EXPECT_EQ(r.llm.tokens_out, out);
  double dollars =
      (static_cast<double>(in) * kPriceIn + static_cast<double>(out) * kPriceOut) / 1e6;
  EXPECT_NEAR(r.llm.cost_usd, dollars, 1e-9);
  archive::Statement s = rig.sql().prepare(
      "SELECT json_extract(budgets_used, '$.llm_calls'),"
      " json_extract(budgets_used, '$.llm_tokens_in'),"
      " json_extract(budgets_used, '$.llm_tokens_out'),"
      " json_extract(budgets_used, '$.llm_cost_usd') FROM runs WHERE id = ?");
  s.bind(1, r.run);
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.integer(0), r.llm.calls);
  EXPECT_EQ(s.integer(1), in);
  EXPECT_EQ(s.integer(2), out);
  EXPECT_NEAR(s.real(3), dollars, 1e-9);
}

// Resumed, the run asks the model nothing (the response cache) and measures nothing again.
void check_resume_asks_nothing(Rig& rig, CorpusModel& model, const evolve::RunConfig& c,
                               const evolve::RunSummary& first) {
  size_t asked = model.served().size();
  evolve::RunSummary again = run(rig, model, c, first.run);
  EXPECT_EQ(model.served().size(), asked) << "a resumed run asked the model again";
  EXPECT_EQ(again.llm.calls, first.llm.calls);
  EXPECT_EQ(again.llm.cached, again.llm.calls);
  EXPECT_EQ(again.llm.tokens(), first.llm.tokens());
  EXPECT_EQ(again.evaluations, 0);
}

// On failure, what the server answered to what (the ids of the corpus's answers, "" for a spare).
void explain(CorpusModel& model) {
  if (!::testing::Test::HasFailure()) return;
  for (const CorpusModel::Served& s : model.served())
    std::cerr << "  served " << (s.id.empty() ? "(spare)" : s.id) << " to a " << s.kind
              << " prompt for " << s.task << "\n";
}

evolve::RunConfig corpus_config(std::vector<std::string> tasks, int generations, int llm_children) {
  evolve::RunConfig c;
  c.tasks = std::move(tasks);
  c.generations = generations;
  c.llm_children = llm_children;
  c.children = 0;  // the model's children alone
  c.judge_top = 2;
  c.islands = 2;
  // The recorded run's mix (no ideas: they take two rounds of a batch folder).
  c.operators = {0.6, 0.4, 0};
  return c;
}

// The batch run's real answers, to the prompts kforge renders for the same tasks: two model
// children per task and generation, two generations, as recorded.
TEST(LlmCorpus, RecordedAnswersOfARealRunReplayThroughTheLoop) {
  // Three of the eight tasks (a cold compile of an answer takes 1 to 4 s: all eight take 40 s);
  // KFORGE_LLM_CORPUS_TASKS=all replays every recorded task.
  std::vector<std::string> tasks = {"level1/conv2d_depthwise", "level1/group_norm",
                                    "level1/matmul_square"};
  if (const char* all = std::getenv("KFORGE_LLM_CORPUS_TASKS"); all && std::string(all) == "all") {
    tasks.clear();
    for (const CorpusAnswer& a : load_corpus())
      if (a.id.rfind("batch-", 0) == 0 &&
          std::find(tasks.begin(), tasks.end(), a.task) == tasks.end())
        tasks.push_back(a.task);
  }
  std::vector<CorpusAnswer> corpus = corpus_for({tasks.begin(), tasks.end()});
  ASSERT_EQ(corpus.size(), 4 * tasks.size()) << "four recorded answers per task";
  CorpusModel model(corpus);
  Rig rig;
  evolve::RunConfig c = corpus_config(tasks, 2, 2);
  evolve::RunSummary r = run(rig, model, c);
  for (const evolve::TaskStatus& t : r.tasks) {
    EXPECT_EQ(t.stopped, "generations done") << t.task;
    EXPECT_EQ(t.generation, 2) << t.task;
  }
  Checked checked;
  check_every_answer(rig, r.run, model, corpus, checked);
  EXPECT_EQ(checked.answers, static_cast<int>(corpus.size()));
  // Each task's answers went to prompts of their kind wherever the loop asked for that kind: all of
  // generation 1 (optimize: the population holds one code), and generation 2's as far as the
  // loop's draws (optimize or crossover) allow.
  std::map<std::pair<std::string, std::string>, int> asked, recorded, matched;
  for (const CorpusAnswer& a : corpus) ++recorded[{a.task, a.kind}];
  for (const CorpusModel::Served& s : model.served()) {
    ++asked[{s.task, s.kind}];
    for (const CorpusAnswer& a : corpus)
      if (a.id == s.id && a.kind == s.kind) ++matched[{s.task, s.kind}];
  }
  for (const auto& [key, n] : asked)
    EXPECT_EQ(matched[key], std::min(n, recorded[key])) << key.first << " " << key.second;
  EXPECT_EQ(model.served().size(), corpus.size())
      << "no spare answer: every request was one of the corpus's";
  EXPECT_EQ(rig.gpu.screened, static_cast<int>(tasks.size() + corpus.size()))
      << "the seeds and every answer reached the GPU";
  check_spent(rig, r, model);
  check_resume_asks_nothing(rig, model, c, r);
  explain(model);
}

// The awkward answers a real model gives: no code, two code blocks, cut off, code that does not
// compile, an invalid launch plan, and the exploit corpus's cheats. Each is recorded with its
// outcome, each that can be is repaired with its evidence, and the loop goes on.
TEST(LlmCorpus, AwkwardAnswersAreRecordedRepairedWithTheirEvidenceAndTheLoopGoesOn) {
  std::vector<CorpusAnswer> corpus = corpus_for({"smoke/relu"});
  ASSERT_GE(corpus.size(), 8u);
  CorpusModel model(corpus);
  Rig rig;
  for (const CorpusAnswer& a : corpus)
    if (a.expect == "wrong_result")
      for (const std::string& k : a.kernels()) rig.gpu.wrong_kernels.insert(k);
  ASSERT_FALSE(rig.gpu.wrong_kernels.empty());
  // Four model children a generation: the answers that fail need the next generation's slots for
  // their repairs (repairs come first), so every answer and every repair is asked in four.
  evolve::RunConfig c = corpus_config({"smoke/relu"}, 4, 4);
  c.operators = {1, 0, 0};
  evolve::RunSummary r = run(rig, model, c);
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_EQ(r.tasks[0].stopped, "generations done");
  EXPECT_EQ(r.tasks[0].generation, 4);
  Checked checked;
  check_every_answer(rig, r.run, model, corpus, checked);
  EXPECT_EQ(checked.answers, static_cast<int>(corpus.size()));
  for (const char* expect : {"answer_error", "compile_error", "plan_error", "wrong_result"})
    EXPECT_GE(checked.by_expect[expect], 1)
        << expect << ": the corpus holds each kind of bad answer";
  EXPECT_EQ(checked.repairs, checked.by_expect["compile_error"] + checked.by_expect["plan_error"] +
                                 checked.by_expect["wrong_result"]);
  EXPECT_GE(checked.error_lines, 1) << "a compile log with line numbers was quoted and checked";
  // The loop went on past every bad answer: the last generation's children were asked and made.
  EXPECT_GT(rig.count("SELECT count(*) FROM candidates WHERE generation = 4 AND model = '" +
                      std::string(kModel) + "'"),
            0);
  check_spent(rig, r, model);
  check_resume_asks_nothing(rig, model, c, r);
  explain(model);
}

// The token budgets stop the run (per run) or the task at their limit, counted as the server
// reported them: a budget one token over what the first generation's answers reported stops it in
// the second.
TEST(LlmCorpus, TokenBudgetsStopTheRunAtTheServersCount) {
  evolve::RunConfig c = corpus_config({"smoke/relu"}, 4, 4);
  c.operators = {1, 0, 0};
  int64_t first_generation = 0;
  {
    CorpusModel model(corpus_for({"smoke/relu"}));
    Rig rig;
    evolve::RunConfig one = c;
    one.generations = 1;
    evolve::RunSummary r = run(rig, model, one);
    EXPECT_EQ(r.llm.calls, 4);
    first_generation = model.tokens().first + model.tokens().second;
  }
  for (bool per_task : {false, true}) {
    CorpusModel model(corpus_for({"smoke/relu"}));
    Rig rig;
    evolve::RunConfig budgeted = c;
    (per_task ? budgeted.task_llm_tokens : budgeted.llm_tokens) = first_generation + 1;
    evolve::RunSummary r = run(rig, model, budgeted);
    EXPECT_EQ(per_task ? r.tasks[0].stopped : r.stopped,
              per_task ? "task LLM token budget reached" : "LLM token budget reached");
    auto [in, out] = model.tokens();
    EXPECT_EQ(r.llm.tokens(), in + out);
    EXPECT_GT(r.llm.tokens(), first_generation + 1);
    EXPECT_LT(r.tasks[0].generation, 4) << "the budget did not stop the run";
    // A task's budget is checked between generations: the second's four answers all came. The
    // run's is checked as answers come: those still awaited when it is reached are cancelled.
    if (per_task) {
      EXPECT_EQ(r.llm.calls, 8);
    } else {
      EXPECT_TRUE(r.llm.calls > 4 && r.llm.calls <= 8) << r.llm.calls;
    }
  }
}

}  // namespace
