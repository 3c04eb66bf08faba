// The run config (docs/evolve.md, "The run config"): a TOML file whose keys mirror RunConfig's
// JSON form, which is also what the archive's runs.config keeps for --resume.
#include <toml++/toml.h>

#include <algorithm>
#include <limits>
#include <map>

#include "../config_values.h"

#include "kforge/common/error.h"
#include "kforge/evolve/run.h"

namespace kforge::evolve {
namespace {

using nlohmann::json;

// Every key kforge knows, by section ("" the top level), with its kind and, for an integer, its
// range: each bound is checked before the value is narrowed to its field (a generations of 2^63 - 1
// became -1 and measured nothing; children = 10^9 hung the loop).
enum class Kind { Number, Integer, Seed, Bool, String, Strings };
struct Spec {
  Kind kind;
  int64_t lo = 0, hi = 0;  // Integer
};
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();  // an int64_t budget; 0 is none
const std::map<std::string, std::map<std::string, Spec>>& known() {
  static const std::map<std::string, std::map<std::string, Spec>> k = {
      {"",
       {{"tasks", {Kind::Strings}},
        {"seed", {Kind::Seed}},
        {"model", {Kind::String}},
        {"llm_config", {Kind::String}},
        {"generations", {Kind::Integer, 0, 10000}},
        {"children", {Kind::Integer, 0, 1000}},
        {"judge_top", {Kind::Integer, 0, 1000}},
        {"islands", {Kind::Integer, 1, 100}},
        {"lookahead", {Kind::Integer, 0, 64}},
        {"migration_interval", {Kind::Integer, 0, 10000}},
        {"target_speedup", {Kind::Number}},
        {"admit", {Kind::Bool}}}},
      {"llm",
       {{"children", {Kind::Integer, 0, 1000}},
        {"repair_attempts", {Kind::Integer, 0, 10}},
        {"optimize", {Kind::Number}},
        {"crossover", {Kind::Number}},
        {"ideas", {Kind::Number}},
        {"ideas_count", {Kind::Integer, 1, 100}},
        {"profile", {Kind::Bool}}}},
      {"budget",
       {{"evaluations", {Kind::Integer, 0, kNoLimit}},
        {"task_evaluations", {Kind::Integer, 0, kNoLimit}},
        {"minutes", {Kind::Number}},
        {"gpu_minutes", {Kind::Number}},
        {"task_gpu_minutes", {Kind::Number}},
        {"llm_calls", {Kind::Integer, 0, kNoLimit}},
        {"llm_tokens", {Kind::Integer, 0, kNoLimit}},
        {"llm_dollars", {Kind::Number}},
        {"task_llm_tokens", {Kind::Integer, 0, kNoLimit}},
        {"task_llm_dollars", {Kind::Number}}}},
      {"selection", {{"best", {Kind::Number}}, {"elite", {Kind::Number}}}},
      {"tuner",
       {{"exhaustive_max", {Kind::Integer, 0, 100000}},
        {"elite", {Kind::Integer, 0, 1000}},
        {"random_share", {Kind::Number}}}},
  };
  return k;
}

// A JSON integer as config_integer's input: nullopt when it is not one or lies past int64_t.
std::optional<int64_t> json_int(const json& v) {
  if (v.is_number_unsigned())
    return v.get<uint64_t>() <= static_cast<uint64_t>(kNoLimit)
               ? std::optional<int64_t>(v.get<int64_t>())
               : std::nullopt;
  return v.is_number_integer() ? std::optional<int64_t>(v.get<int64_t>()) : std::nullopt;
}

// Checks `j` against known(): unknown keys, wrong types, integers out of their range and numbers
// that are negative, NaN or infinite are InputErrors naming the key.
void check(const json& j, const std::string& file) {
  if (!j.is_object()) throw InputError(file, std::nullopt, "", "a run config is a table of keys");
  for (const auto& [key, value] : j.items()) {
    bool section = known().count(key) && !key.empty();
    const std::map<std::string, Spec>& keys = known().at(section ? key : "");
    const json& entries = section ? value : json{{key, value}};
    if (section && !value.is_object()) throw InputError(file, std::nullopt, key, "must be a table");
    for (const auto& [name, v] : entries.items()) {
      std::string field = section ? key + "." + name : name;
      auto it = keys.find(name);
      if (it == keys.end())
        throw InputError(file, std::nullopt, field, "unknown key (docs/evolve.md lists them)");
      ConfigPlace at{file, std::nullopt, field};
      const Spec& spec = it->second;
      switch (spec.kind) {
        case Kind::Integer:
          (void)config_integer(json_int(v), spec.lo, spec.hi, at);
          break;
        case Kind::Seed:  // a uint64_t: --seed takes any, a TOML file 0 to 2^63 - 1
          if (!v.is_number_unsigned()) (void)config_integer(json_int(v), int64_t{0}, kNoLimit, at);
          break;
        case Kind::Number:
          (void)config_number(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt,
                              0, std::numeric_limits<double>::max(), false, at,
                              "a number, 0 or more (not NaN or infinite)");
          break;
        case Kind::Bool:
          if (!v.is_boolean()) throw InputError(file, std::nullopt, field, "must be true or false");
          break;
        case Kind::String:
          if (!v.is_string()) throw InputError(file, std::nullopt, field, "must be a string");
          break;
        case Kind::Strings:
          if (!v.is_array() ||
              !std::all_of(v.begin(), v.end(), [](const json& s) { return s.is_string(); }))
            throw InputError(file, std::nullopt, field, "must be a list of strings");
          break;
      }
    }
  }
}

json toml_to_json(const toml::node& n) {
  if (const toml::table* t = n.as_table()) {
    json j = json::object();
    for (auto&& [k, v] : *t) j[std::string(k.str())] = toml_to_json(v);
    return j;
  }
  if (const toml::array* a = n.as_array()) {
    json j = json::array();
    for (const toml::node& v : *a) j.push_back(toml_to_json(v));
    return j;
  }
  if (auto v = n.value<bool>(); v && n.is_boolean()) return *v;
  if (n.is_integer()) return *n.value<int64_t>();
  if (n.is_floating_point()) return *n.value<double>();
  if (n.is_string()) return *n.value<std::string>();
  return nullptr;
}

}  // namespace

json RunConfig::to_json() const {
  json j = to_json_settings();
  if (!target.is_null()) j["target"] = target;
  if (!batch_model.empty() || batch_wait_s) {
    j["batch"] = {{"model", batch_model}};
    if (batch_wait_s) j["batch"]["wait_s"] = *batch_wait_s;
  }
  return j;
}

json RunConfig::to_json_settings() const {
  return {{"tasks", tasks},
          {"model", model},
          {"llm_config", llm_config},
          {"seed", seed},
          {"generations", generations},
          {"children", children},
          {"judge_top", judge_top},
          {"islands", islands},
          {"lookahead", lookahead},
          {"migration_interval", migration_interval},
          {"target_speedup", target_speedup},
          {"admit", admit},
          {"budget",
           {{"evaluations", evaluations},
            {"task_evaluations", task_evaluations},
            {"minutes", minutes},
            {"gpu_minutes", gpu_minutes},
            {"task_gpu_minutes", task_gpu_minutes},
            {"llm_calls", llm_calls},
            {"llm_tokens", llm_tokens},
            {"llm_dollars", llm_dollars},
            {"task_llm_tokens", task_llm_tokens},
            {"task_llm_dollars", task_llm_dollars}}},
          {"llm",
           {{"children", llm_children},
            {"repair_attempts", repair_attempts},
            {"optimize", operators.optimize},
            {"crossover", operators.crossover},
            {"ideas", operators.ideas},
            {"ideas_count", ideas_count},
            {"profile", profile}}},
          {"selection", {{"best", select_best}, {"elite", select_elite}}},
          {"tuner",
           {{"exhaustive_max", tuner.exhaustive_max},
            {"elite", tuner.elite},
            {"random_share", tuner.random_share}}}};
}

RunConfig RunConfig::from_json(const json& recorded) {
  json j = recorded;
  json target = j.is_object() && j.contains("target") ? j["target"] : json(nullptr);
  json batch = j.is_object() && j.contains("batch") ? j["batch"] : json(nullptr);
  if (j.is_object()) j.erase("target"), j.erase("batch");  // recorded by kforge, not settings
  check(j, "run config");
  RunConfig c;
  c.target = target;
  if (batch.is_object()) {
    if (batch.contains("model") && batch["model"].is_string()) c.batch_model = batch["model"];
    if (batch.contains("wait_s") && batch["wait_s"].is_number() && batch["wait_s"] >= 0)
      c.batch_wait_s = batch["wait_s"].get<double>();
  }
  auto get = [&](const char* section, const char* key, auto& out) {
    const json& from = *section ? j.value(section, json::object()) : j;
    if (from.contains(key)) out = from[key].get<std::decay_t<decltype(out)>>();
  };
  get("", "tasks", c.tasks);
  get("", "model", c.model);
  get("", "llm_config", c.llm_config);
  get("", "seed", c.seed);
  get("", "generations", c.generations);
  get("", "children", c.children);
  get("", "judge_top", c.judge_top);
  get("", "islands", c.islands);
  get("", "lookahead", c.lookahead);
  get("", "migration_interval", c.migration_interval);
  get("", "target_speedup", c.target_speedup);
  get("", "admit", c.admit);
  get("budget", "evaluations", c.evaluations);
  get("budget", "task_evaluations", c.task_evaluations);
  get("budget", "minutes", c.minutes);
  get("budget", "gpu_minutes", c.gpu_minutes);
  get("budget", "task_gpu_minutes", c.task_gpu_minutes);
  get("budget", "llm_calls", c.llm_calls);
  get("budget", "llm_tokens", c.llm_tokens);
  get("budget", "llm_dollars", c.llm_dollars);
  get("budget", "task_llm_tokens", c.task_llm_tokens);
  get("budget", "task_llm_dollars", c.task_llm_dollars);
  get("llm", "children", c.llm_children);
  get("llm", "repair_attempts", c.repair_attempts);
  get("llm", "optimize", c.operators.optimize);
  get("llm", "crossover", c.operators.crossover);
  get("llm", "ideas", c.operators.ideas);
  get("llm", "ideas_count", c.ideas_count);
  get("llm", "profile", c.profile);
  get("selection", "best", c.select_best);
  get("selection", "elite", c.select_elite);
  get("tuner", "exhaustive_max", c.tuner.exhaustive_max);
  get("tuner", "elite", c.tuner.elite);
  get("tuner", "random_share", c.tuner.random_share);
  if (c.select_best + c.select_elite > 1)
    throw InputError("run config", std::nullopt, "selection",
                     "best + elite must be at most 1 (the rest is random)");
  if (c.tuner.random_share > 1)
    throw InputError("run config", std::nullopt, "tuner.random_share", "must be at most 1");
  if (c.operators.optimize + c.operators.crossover + c.operators.ideas <= 0)
    throw InputError(
        "run config", std::nullopt, "llm",
        "optimize + crossover + ideas must be above 0 (they are the mix of operators)");
  return c;
}

RunConfig load_run_config(const std::string& path) {
  toml::table root = parse_config_file(path);
  json j = toml_to_json(root);
  // What kforge records with a run (the GPU facts, a batch folder's choices) is not a setting.
  for (const char* recorded : {"target", "batch"})
    if (j.contains(recorded))
      throw InputError(path, std::nullopt, recorded,
                       "unknown key (kforge records it with a run; a config file cannot set it)");
  try {
    return RunConfig::from_json(j);
  } catch (const InputError& e) {
    throw InputError(path, std::nullopt, e.field(), e.problem());
  }
}

}  // namespace kforge::evolve
