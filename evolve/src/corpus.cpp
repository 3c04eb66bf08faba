#include "kforge/evolve/corpus.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/compile/answer.h"
#include "kforge/tasks/task.h"

namespace kforge::evolve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

std::vector<CorpusEntry> collect_corpus(const std::vector<std::string>& paths,
                                        const std::string& expect, bool sanitizer) {
  std::vector<CorpusEntry> out;
  for (const std::string& p : paths) {
    std::vector<std::string> files;
    json manifest;
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.path().extension() == ".md" && e.path().filename() != "README.md")
          files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      if (auto m = read_file((fs::path(p) / "manifest.json").string())) {
        try {
          manifest = json::parse(*m);
        } catch (const json::exception& e) {
          throw InputError(p + "/manifest.json", std::nullopt, "",
                           std::string("not JSON: ") + e.what());
        }
      }
    } else if (fs::exists(p)) {
      files.push_back(p);
    } else {
      throw UsageError(p + ": no such file or folder");
    }
    for (const std::string& f : files) {
      CorpusEntry e;
      e.path = f;
      e.name = fs::path(f).filename().string();
      e.text = read_file(f).value_or("");
      e.task_spec = compile::task_named_in(e.text);
      if (manifest.contains("kernels") && manifest["kernels"].contains(e.name)) {
        e.expected = manifest["kernels"][e.name].get<std::vector<std::string>>();
        if (!sanitizer && manifest.contains("without_sanitizer") &&
            manifest["without_sanitizer"].contains(e.name))
          e.expected = manifest["without_sanitizer"][e.name].get<std::vector<std::string>>();
      } else if (!expect.empty()) {
        e.expected = {expect};
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

Corpus::Corpus(std::vector<CorpusEntry> entries, CorpusOptions options, Evaluator& evaluator)
    : entries_(std::move(entries)), options_(std::move(options)), evaluator_(evaluator) {
  ready_.resize(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    loaded_.push_back(load(entries_[i]));
    if (loaded_[i].proposal)
      ready_[i] = evaluator_.check_async(*loaded_[i].proposal, options_.tune_points);
  }
}

// The task (its reference compiled here, on the calling thread) and the answer parsed. Only the
// answer's own problems are caught: UsageError and InputError (no task line, an unknown task, a
// task file or reference that fails), and the answer's format (AnswerError, which the evaluator
// turns into a compile_error verdict).
Corpus::Loaded Corpus::load(const CorpusEntry& e) {
  Loaded l;
  try {
    if (e.task_spec.empty())
      throw InputError(e.path, 1, "task", "no `<!-- task: suite/name -->` line names the task");
    fs::path root =
        options_.tasks_dir.empty() ? tasks::default_tasks_root() : fs::path(options_.tasks_dir);
    std::vector<fs::path> files = tasks::resolve_tasks(e.task_spec, root);
    if (files.size() != 1)
      throw UsageError("task '" + e.task_spec + "' names a suite; give one task");
    Proposal p;
    p.task = std::make_shared<const tasks::Task>(tasks::load_task(files[0]));
    evaluator_.prepare(*p.task);
    p.lineage.prompt_kind = options_.kind;
    try {
      compile::Answer answer = compile::parse_answer(e.text);
      p.source = answer.source;
      p.plan = answer.plan;
    } catch (const compile::AnswerError& err) {
      p.answer_error = err.what();
    }
    l.proposal = std::move(p);
  } catch (const UsageError& err) {
    l.error = err.what();
  }
  return l;
}

std::vector<const tasks::Task*> Corpus::tasks() const {
  std::vector<const tasks::Task*> out;
  for (const Loaded& l : loaded_)
    if (l.proposal) out.push_back(l.proposal->task.get());
  return out;
}

void Corpus::judge(CorpusObserver& observer) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const CorpusEntry& e = entries_[i];
    CorpusResult r;
    r.entry = &e;
    observer.on_step(i, "compiling");
    if (!loaded_[i].proposal) {
      r.not_judged = loaded_[i].error;
      observer.on_result(i, r);
      continue;
    }
    std::vector<Checked> points = ready_[i].get();  // kforge's own failure throws here
    auto t_tune = Clock::now();
    if (points.size() > 1) {
      observer.on_step(i, "screening " + std::to_string(points.size()) + " tune points");
      Screened s = evaluator_.screen_points(points);
      observer.on_screened(e, points, s);
      r.checked = std::move(points[s.chosen]);
      r.tuning = s.records;
    } else {
      r.checked = std::move(points.front());
    }
    r.tuning_ms = ms_since(t_tune);
    observer.on_step(i, "judging");
    r.evaluation = evaluator_.judge(r.checked, options_.admit);
    const std::optional<verify::Verdict>& admission = r.evaluation.admission;
    r.outcome = verify::to_string(r.evaluation.verdict.outcome);
    if (admission && !admission->correct())
      r.outcome = "admission:" + std::string(verify::to_string(admission->outcome));
    r.as_expected = e.expected.empty() ||
                    std::find(e.expected.begin(), e.expected.end(), r.outcome) != e.expected.end();
    observer.on_result(i, r);
    if (options_.store && r.checked.report.stage != compile::Stage::Answer)
      evaluator_.record(r.checked, r.evaluation);
  }
}

}  // namespace kforge::evolve
