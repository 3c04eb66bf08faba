// The run config (docs/evolve.md, "The run config"): a TOML file whose keys mirror RunConfig's
// JSON form, which is also what the archive's runs.config keeps for --resume.
#include <toml++/toml.h>

#include <algorithm>
#include <map>

#include "kforge/common/error.h"
#include "kforge/evolve/run.h"

namespace kforge::evolve {
namespace {

using nlohmann::json;

// Every key kforge knows, by section ("" the top level), with whether it is a number, a bool,
// or a list of strings.
enum class Kind { Number, Integer, Bool, String, Strings };
const std::map<std::string, std::map<std::string, Kind>>& known() {
  static const std::map<std::string, std::map<std::string, Kind>> k = {
      {"", {{"tasks", Kind::Strings}, {"seed", Kind::Integer}, {"model", Kind::String}, {"llm_config", Kind::String},
            {"generations", Kind::Integer},
            {"children", Kind::Integer}, {"judge_top", Kind::Integer}, {"islands", Kind::Integer},
            {"migration_interval", Kind::Integer}, {"target_speedup", Kind::Number}, {"admit", Kind::Bool}}},
      {"llm",
       {{"children", Kind::Integer}, {"repair_attempts", Kind::Integer}, {"optimize", Kind::Number},
        {"crossover", Kind::Number}, {"ideas", Kind::Number}, {"ideas_count", Kind::Integer},
        {"profile", Kind::Bool}}},
      {"budget",
       {{"evaluations", Kind::Integer}, {"task_evaluations", Kind::Integer}, {"minutes", Kind::Number},
        {"gpu_minutes", Kind::Number}, {"task_gpu_minutes", Kind::Number}, {"llm_calls", Kind::Integer},
        {"llm_tokens", Kind::Integer}, {"llm_dollars", Kind::Number}, {"task_llm_tokens", Kind::Integer},
        {"task_llm_dollars", Kind::Number}}},
      {"selection", {{"best", Kind::Number}, {"elite", Kind::Number}}},
      {"tuner", {{"exhaustive_max", Kind::Integer}, {"elite", Kind::Integer}, {"random_share", Kind::Number}}},
  };
  return k;
}

// Checks `j` against known(): unknown keys, wrong types and negative numbers are InputErrors.
void check(const json& j, const std::string& file) {
  if (!j.is_object()) throw InputError(file, std::nullopt, "", "a run config is a table of keys");
  for (const auto& [key, value] : j.items()) {
    bool section = known().count(key) && !key.empty();
    const std::map<std::string, Kind>& keys = known().at(section ? key : "");
    const json& entries = section ? value : json{{key, value}};
    if (section && !value.is_object()) throw InputError(file, std::nullopt, key, "must be a table");
    for (const auto& [name, v] : entries.items()) {
      std::string field = section ? key + "." + name : name;
      auto it = keys.find(name);
      if (it == keys.end()) throw InputError(file, std::nullopt, field, "unknown key (docs/evolve.md lists them)");
      bool ok = it->second == Kind::Bool      ? v.is_boolean()
                : it->second == Kind::String  ? v.is_string()
                : it->second == Kind::Strings ? v.is_array() && std::all_of(v.begin(), v.end(), [](const json& s) {
                                                  return s.is_string();
                                                })
                : it->second == Kind::Integer ? v.is_number_integer() && v.get<int64_t>() >= 0
                                              : v.is_number() && v.get<double>() >= 0;
      if (!ok)
        throw InputError(file, std::nullopt, field,
                         it->second == Kind::Bool      ? "must be true or false"
                         : it->second == Kind::String  ? "must be a string"
                         : it->second == Kind::Strings ? "must be a list of strings"
                         : it->second == Kind::Integer ? "must be a whole number, 0 or more"
                                                       : "must be a number, 0 or more");
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
          {"migration_interval", migration_interval},
          {"target_speedup", target_speedup},
          {"admit", admit},
          {"budget", {{"evaluations", evaluations}, {"task_evaluations", task_evaluations}, {"minutes", minutes},
                      {"gpu_minutes", gpu_minutes}, {"task_gpu_minutes", task_gpu_minutes}, {"llm_calls", llm_calls},
                      {"llm_tokens", llm_tokens}, {"llm_dollars", llm_dollars}, {"task_llm_tokens", task_llm_tokens},
                      {"task_llm_dollars", task_llm_dollars}}},
          {"llm", {{"children", llm_children}, {"repair_attempts", repair_attempts}, {"optimize", operators.optimize},
                   {"crossover", operators.crossover}, {"ideas", operators.ideas}, {"ideas_count", ideas_count},
                   {"profile", profile}}},
          {"selection", {{"best", select_best}, {"elite", select_elite}}},
          {"tuner", {{"exhaustive_max", tuner.exhaustive_max}, {"elite", tuner.elite},
                     {"random_share", tuner.random_share}}}};
}

RunConfig RunConfig::from_json(const json& recorded) {
  json j = recorded;
  json target = j.is_object() && j.contains("target") ? j["target"] : json(nullptr);
  if (j.is_object()) j.erase("target");  // recorded by kforge, not a setting a file gives
  check(j, "run config");
  RunConfig c;
  c.target = target;
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
    throw InputError("run config", std::nullopt, "selection", "best + elite must be at most 1 (the rest is random)");
  if (c.tuner.random_share > 1)
    throw InputError("run config", std::nullopt, "tuner.random_share", "must be at most 1");
  if (c.operators.optimize + c.operators.crossover + c.operators.ideas <= 0)
    throw InputError("run config", std::nullopt, "llm", "optimize + crossover + ideas must be above 0 (they are the mix of operators)");
  if (c.ideas_count < 1) throw InputError("run config", std::nullopt, "llm.ideas_count", "must be at least 1");
  if (c.islands < 1) throw InputError("run config", std::nullopt, "islands", "must be at least 1");
  return c;
}

RunConfig load_run_config(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw InputError(path, static_cast<int>(e.source().begin.line), "", "not valid TOML: " + std::string(e.description()));
  }
  json j = toml_to_json(root);
  try {
    return RunConfig::from_json(j);
  } catch (const InputError& e) {
    throw InputError(path, std::nullopt, e.field(), e.problem());
  }
}

}  // namespace kforge::evolve
