#include "kforge/evolve/config.h"

#include <toml++/toml.h>

#include <cstdlib>
#include <set>

#include "config_values.h"
#include "kforge/common/secrets.h"

namespace kforge::evolve {
namespace {

const std::set<std::string> kRoles = {"translate", "optimize", "crossover", "repair", "ideas"};

// Bounds of the file's values (docs/llm-config.md).
constexpr int kMaxConcurrency = 256;
constexpr int kMaxTokens = 1 << 20;
constexpr double kMaxWeight = 1e6;
constexpr double kMaxPricePerMtok = 1e6;  // dollars per million tokens

std::optional<int> line_of(const toml::node* n) { return toml_line(n); }

}  // namespace

double ModelConfig::temperature_for(const std::string& role) const {
  auto it = temperature.find(role);
  return it == temperature.end() ? 1.0 : it->second;
}

double ModelConfig::cost_usd(int64_t tokens_in, int64_t tokens_out) const {
  return (static_cast<double>(tokens_in) * price_input_per_mtok + static_cast<double>(tokens_out) * price_output_per_mtok) / 1e6;
}

Endpoint LlmConfig::endpoint(const ModelConfig& m) const {
  Endpoint e = endpoint_from_spec(m.spec);
  std::string provider = m.spec.substr(0, m.spec.find(':'));
  if (auto it = providers.find(provider); it != providers.end()) {
    if (!it->second.base_url.empty()) e.base_url = it->second.base_url;
    if (!it->second.api_key.empty()) e.api_key = it->second.api_key;
  }
  return e;
}

RetryPolicy LlmConfig::policy(const ModelConfig& m, RetryPolicy base) const {
  auto it = providers.find(m.spec.substr(0, m.spec.find(':')));
  if (it == providers.end()) return base;
  if (it->second.timeout) base.total_timeout = *it->second.timeout;
  if (it->second.connect_timeout) base.connect_timeout = *it->second.connect_timeout;
  if (it->second.max_reply_bytes) base.max_reply_bytes = *it->second.max_reply_bytes;
  return base;
}

const ModelConfig& LlmConfig::pick(std::mt19937_64& rng) const {
  std::vector<double> w;
  for (const auto& m : models) w.push_back(m.weight);
  std::discrete_distribution<size_t> d(w.begin(), w.end());
  return models.at(d(rng));
}

LlmConfig load_llm_config(const std::string& path) {
  toml::table root = parse_config_file(path);
  auto at = [&](const toml::node& n, const std::string& field) { return ConfigPlace{path, line_of(&n), field}; };
  auto fail = [&](const toml::node* n, const std::string& field, const std::string& problem) {
    throw InputError(path, line_of(n), field, problem);
  };
  for (auto&& [k, v] : root)
    if (k.str() != "models" && k.str() != "providers") fail(&v, std::string(k.str()), "unknown key (known: models, providers)");
  LlmConfig cfg;
  if (const toml::node* p = root.get("providers")) {
    if (!p->is_table()) fail(p, "providers", "must be a table of [providers.openai] / [providers.anthropic]");
    for (auto&& [name, node] : *p->as_table()) {
      std::string field = "providers." + std::string(name.str());
      if (name.str() != "openai" && name.str() != "anthropic") fail(&node, field, "unknown provider (openai, anthropic)");
      const toml::table* t = node.as_table();
      if (!t) fail(&node, field, "must be a table");
      ProviderConfig pc;
      std::string key_env = name.str() == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
      for (auto&& [k, v] : *t) {
        std::string f = field + "." + std::string(k.str());
        if (k.str() == "base_url") {
          if (!v.is_string()) fail(&v, f, "must be a string");
          pc.base_url = **v.as_string();
          if (pc.base_url.rfind("http://", 0) != 0 && pc.base_url.rfind("https://", 0) != 0)
            fail(&v, f, "must be an http:// or https:// URL");
        } else if (k.str() == "api_key_env") {
          if (!v.is_string()) fail(&v, f, "must be the name of an environment variable");
          key_env = **v.as_string();
        } else if (k.str() == "api_key") {
          if (!v.is_string()) fail(&v, f, "must be a string");
          pc.api_key = **v.as_string();
        } else if (k.str() == "concurrency") {
          pc.concurrency = config_integer(toml_int(v), 1, kMaxConcurrency, at(v, f));
        } else if (k.str() == "timeout" || k.str() == "connect_timeout") {
          if (!v.is_number()) fail(&v, f, "must be a number of seconds");
          auto ms = checked_timeout(v.value<double>().value(), path, line_of(&v), f);
          (k.str() == "timeout" ? pc.timeout : pc.connect_timeout) = ms;
        } else if (k.str() == "max_reply_bytes") {
          pc.max_reply_bytes = config_integer(toml_int(v), kMinReplyBytes, kMaxReplyBytes, at(v, f), "bytes");
        } else {
          fail(&v, f, "unknown key (known: base_url, api_key_env, api_key, concurrency, timeout, connect_timeout, max_reply_bytes)");
        }
      }
      if (pc.api_key.empty())
        if (const char* k = std::getenv(key_env.c_str())) pc.api_key = k;
      remember_secret(pc.api_key);  // never in a log, the archive or a prompt
      while (!pc.base_url.empty() && pc.base_url.back() == '/') pc.base_url.pop_back();
      cfg.providers[std::string(name.str())] = pc;
    }
  }
  const toml::node* models = root.get("models");
  if (!models) fail(&root, "models", "missing: list the models with [[models]]");
  const toml::array* arr = models->as_array();
  if (!arr || !arr->is_array_of_tables() || arr->empty()) fail(models, "models", "must be one or more [[models]] tables");
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::table& t = *arr->get(i)->as_table();
    std::string field = "models[" + std::to_string(i) + "]";
    ModelConfig m;
    for (auto&& [k, v] : t) {
      std::string f = field + "." + std::string(k.str());
      if (k.str() == "model") {
        if (!v.is_string()) fail(&v, f, "must be a string like \"openai:gpt-4.1\"");
        m.spec = **v.as_string();
        try {
          (void)endpoint_from_spec(m.spec);
        } catch (const InputError& e) {
          fail(&v, f, e.problem());
        }
      } else if (k.str() == "weight") {
        m.weight = config_number(toml_number(v), 0, kMaxWeight, true, at(v, f),
                                 "a positive number, at most " + std::to_string(static_cast<int>(kMaxWeight)));
      } else if (k.str() == "max_tokens") {
        m.max_tokens = config_integer(toml_int(v), 1, kMaxTokens, at(v, f));
      } else if (k.str() == "temperature") {
        if (!v.is_table()) fail(&v, f, "must be a table like { translate = 0.7, repair = 0.2 }");
        for (auto&& [role, tv] : *v.as_table()) {
          std::string rf = f + "." + std::string(role.str());
          if (!kRoles.count(std::string(role.str()))) fail(&tv, rf, "unknown role (translate, optimize, crossover, repair, ideas)");
          m.temperature[std::string(role.str())] = config_number(toml_number(tv), 0, 2, false, at(tv, rf), "a number in [0, 2]");
        }
      } else if (k.str() == "price") {
        if (!v.is_table()) fail(&v, f, "must be a table { input = dollars per million tokens, output = ... }");
        for (auto&& [pk, pv] : *v.as_table()) {
          std::string pf = f + "." + std::string(pk.str());
          if (pk.str() != "input" && pk.str() != "output") fail(&pv, pf, "unknown key (input, output)");
          double price = config_number(toml_number(pv), 0, kMaxPricePerMtok, false, at(pv, pf),
                                       "a non-negative number of dollars per million tokens, at most 1000000");
          (pk.str() == "input" ? m.price_input_per_mtok : m.price_output_per_mtok) = price;
        }
      } else {
        fail(&v, f, "unknown key (known: model, weight, max_tokens, temperature, price)");
      }
    }
    if (m.spec.empty()) fail(&t, field + ".model", "missing");
    cfg.models.push_back(m);
  }
  return cfg;
}

}  // namespace kforge::evolve
