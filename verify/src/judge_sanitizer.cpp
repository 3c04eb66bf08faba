// The sanitizer runs (judge_parts.h): compute-sanitizer found and its logs read, one run of a
// configuration under a tool (a fault's diagnosis and admission both use it), and admission's
// memcheck, initcheck and racecheck passes.
#include <unistd.h>

#include <cstdlib>
#include <regex>

#include "judge_parts.h"
#include "kforge/common/files.h"
#include "kforge/common/strings.h"

namespace kforge::verify {

using nlohmann::json;

std::string find_cuda_tool(const std::string& tool, const std::string& hint) {
  std::vector<std::string> places;
  if (!hint.empty()) places.push_back(hint);
  if (const char* path = std::getenv("PATH"))
    for (const std::string& dir : split(path, ':')) places.push_back(dir + "/" + tool);
  if (const char* home = std::getenv("CUDA_HOME"))
    places.push_back(std::string(home) + "/bin/" + tool);
  places.push_back("/usr/local/cuda/bin/" + tool);
  for (const std::string& p : places)
    if (!p.empty() && ::access(p.c_str(), X_OK) == 0) return p;
  return "";
}

std::string find_compute_sanitizer(const std::string& hint) {
  return find_cuda_tool("compute-sanitizer", hint);
}

std::optional<Outcome> classify_memcheck_log(const std::string& log) {
  // "Invalid __global__ write of size 4 bytes ... Access to 0x... is out of bounds
  //  ... and is 1 bytes after the nearest allocation at 0x... of size 2,097,152 bytes"
  static const std::regex first(R"(Invalid __global__ (read|write) of size \d+ bytes?)");
  static const std::regex distance(
      R"(and is ([\d,]+) bytes (after|before) the nearest allocation)");
  std::smatch m;
  if (!std::regex_search(log, m, first)) return std::nullopt;
  std::string rest = log.substr(static_cast<size_t>(m.position(0)));
  std::string block = rest.substr(0, rest.find("Saved host backtrace"));
  std::smatch d;
  if (block.find("out of bounds") == std::string::npos || !std::regex_search(block, d, distance))
    return std::nullopt;
  std::string digits;
  for (char ch : d[1].str())
    if (ch != ',') digits += ch;
  // Beside a buffer (within the guard gaps): out of bounds. Far from every buffer: a wild pointer.
  if (digits.size() > 12 || std::stoll(digits) > kNearBufferBytes) return std::nullopt;
  return m[1] == "read" ? Outcome::OutOfBoundsRead : Outcome::OutOfBoundsWrite;
}

std::optional<int64_t> sanitizer_errors(const std::string& log) {
  // memcheck, initcheck: "========= ERROR SUMMARY: 2 errors"
  // racecheck:           "========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)"
  static const std::regex summary(R"(ERROR SUMMARY: ([\d,]+) errors?)");
  static const std::regex race(
      R"(RACECHECK SUMMARY: [\d,]+ hazards? displayed \(([\d,]+) errors?)");
  std::smatch m;
  if (!std::regex_search(log, m, summary) && !std::regex_search(log, m, race)) return std::nullopt;
  std::string digits;
  for (char ch : m[1].str())
    if (ch != ',') digits += ch;
  return std::stoll(digits);
}

namespace parts {

SanitizedRun run_wrapped(const Verification& j,
                         const std::function<std::vector<std::string>(const std::string&)>& wrapper,
                         Config& c, bool inputs_read_only, const std::vector<torch::Tensor>& inputs,
                         uint64_t seed, std::chrono::milliseconds limit) {
  RunnerOptions o = j.options.runner;
  o.device = j.options.device;
  char log_path[] = "/tmp/kforge-tool-log-XXXXXX";
  UniqueFd log_fd(::mkstemp(log_path));
  if (log_fd) o.wrapper = wrapper(log_path);
  SanitizedRun out;
  auto t0 = Clock::now();
  {
    RunnerClient client(o);
    RunResult shared = client.set_buffers(specs(c, inputs_read_only), fds(c));
    RunResult loaded = shared.ok() ? client.set_module(j.image) : shared;
    prepare_run(c, inputs, Poison::NaN, seed);
    out.result = loaded.ok() ? client.run(c.request, limit) : loaded;
    client.stop(std::chrono::seconds(60));
  }
  out.ms = ms_since(t0);
  if (log_fd) {
    out.log = read_file(log_path).value_or("");
    ::unlink(log_path);
  }
  return out;
}

SanitizedRun run_sanitized(const Verification& j, const std::string& tool_path, const char* tool,
                           Config& c, bool inputs_read_only,
                           const std::vector<torch::Tensor>& inputs, uint64_t seed,
                           std::chrono::milliseconds limit) {
  auto wrapper = [&](const std::string& log) -> std::vector<std::string> {
    if (tool_path.empty()) return {};
    return {tool_path, "--tool", tool, "--log-file", log, "--print-limit", "8"};
  };
  return run_wrapped(j, wrapper, c, inputs_read_only, inputs, seed, limit);
}

std::optional<Verdict> sanitize(const Verification& j, json& record) {
  const tasks::Task& task = j.task;
  const compile::CandidateReport& report = j.report;
  std::string tool_path = find_compute_sanitizer(j.options.sanitizer_path);
  record["sanitizers"] = json::array();
  if (tool_path.empty()) {
    record["sanitizer_path"] = "compute-sanitizer not found: no sanitizer passes";
    return std::nullopt;
  }
  size_t smallest = 0;
  for (size_t i = 1; i < report.configurations.size(); ++i)
    if (task.input_bytes(report.configurations[i].first) <
        task.input_bytes(report.configurations[smallest].first))
      smallest = i;
  const auto& [dims, plan] = report.configurations[smallest];
  Config c = prepare_config(j, dims, plan, smallest);
  Place at{&c, j.seed + 7, 0, 1};
  std::vector<torch::Tensor> inputs = draw_inputs(j, dims, at.seed, 0);
  for (const char* tool : {"memcheck", "initcheck", "racecheck"}) {
    SanitizedRun run =
        run_sanitized(j, tool_path, tool, c, true, inputs, at.seed, std::chrono::seconds(120));
    const RunResult& r = run.result;
    const std::string& log = run.log;
    json entry{{"tool", tool}, {"dims", dims}, {"status", to_string(r.status)}, {"ms", run.ms}};
    int64_t errors = sanitizer_errors(log).value_or(-1);
    entry["errors"] = errors;
    if (errors != 0 || !r.ok()) entry["log"] = log.substr(0, 3000);
    record["sanitizers"].push_back(entry);
    if (errors > 0 || !r.ok()) {
      Verdict v;
      std::string what =
          std::string(tool) + " found " +
          (errors > 0 ? std::to_string(errors) + " error(s)" : "a failed run (" + r.evidence + ")");
      if (std::string(tool) == "memcheck") {
        v.outcome = classify_memcheck_log(log).value_or(Outcome::RuntimeError);
      } else if (std::string(tool) == "initcheck") {
        v.outcome = Outcome::WrongResult;
        what += ": the kernel reads memory nothing wrote";
      } else {
        v.outcome = Outcome::Nondeterministic;
        what += ": a shared-memory race";
      }
      v.summary = what + " " + at.words();
      v.evidence = j.evidence;
      v.evidence["where"] = at.to_json();
      v.evidence["detail"] = entry;
      return v;
    }
    if (errors < 0) entry["note"] = "the tool gave no summary";
  }
  return std::nullopt;
}

}  // namespace parts
}  // namespace kforge::verify
