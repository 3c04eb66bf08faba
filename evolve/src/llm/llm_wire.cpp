// What kforge sends an endpoint: the request body for each provider, shaped by WireOptions, and
// what a 400 says the endpoint refuses (docs/llm-config.md, "What kforge sends").
#include <algorithm>
#include <nlohmann/json.hpp>

#include "kforge/common/secrets.h"
#include "kforge/common/strings.h"
#include "kforge/evolve/llm.h"

namespace kforge::evolve {

using nlohmann::json;

namespace {

// The user message: the context first (the part a prompt cache serves again), then the request's
// own part.
std::string user_text(const ChatRequest& r) {
  return r.context.empty() ? r.user : r.context + "\n\n" + r.user;
}

json text_block(const std::string& text, bool cacheable) {
  json block = {{"type", "text"}, {"text", text}};
  if (cacheable) block["cache_control"] = {{"type", "ephemeral"}};
  return block;
}

json openai_body(const Endpoint& e, const ChatRequest& r, bool stream) {
  const WireOptions& w = e.wire;
  json messages = json::array();
  if (!r.system.empty()) messages.push_back({{"role", "system"}, {"content", r.system}});
  messages.push_back({{"role", "user"}, {"content", user_text(r)}});
  json body = {{"model", e.model}, {"messages", messages}};
  body[w.token_limit_field == "max_tokens" ? "max_tokens" : "max_completion_tokens"] = r.max_tokens;
  if (r.temperature && w.temperature) body["temperature"] = *r.temperature;
  if (!w.reasoning_effort.empty()) body["reasoning_effort"] = w.reasoning_effort;
  if (stream) {
    body["stream"] = true;
    if (w.stream_usage) body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

json anthropic_body(const Endpoint& e, const ChatRequest& r, bool stream) {
  const WireOptions& w = e.wire;
  json content = json::array();
  if (!r.context.empty()) content.push_back(text_block(r.context, w.cache_prompt));
  content.push_back(text_block(r.user, false));
  json body = {{"model", e.model},
               {"max_tokens", r.max_tokens},
               {"messages", json::array({{{"role", "user"}, {"content", content}}})}};
  if (!r.system.empty()) body["system"] = json::array({text_block(r.system, w.cache_prompt)});
  if (w.thinking_adaptive) {
    body["thinking"] = {{"type", "adaptive"}};
  } else if (w.thinking_budget > 0) {
    body["thinking"] = {{"type", "enabled"}, {"budget_tokens", w.thinking_budget}};
    // max_tokens counts the thinking: a request whose limit does not pass the budget (the ping's)
    // gets its limit on top of the budget.
    if (r.max_tokens <= w.thinking_budget)
      body["max_tokens"] = int64_t{w.thinking_budget} + r.max_tokens;
  } else if (r.temperature && w.temperature) {
    body["temperature"] = *r.temperature;  // Anthropic refuses a temperature with thinking on
  }
  if (stream) body["stream"] = true;
  return body;
}

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Where `word` first occurs in `text` as a whole identifier, or npos.
size_t word_at(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    bool starts = at == 0 || !identifier_char(text[at - 1]);
    bool ends = at + word.size() == text.size() || !identifier_char(text[at + word.size()]);
    if (starts && ends) return at;
  }
  return std::string::npos;
}

// Whether an error message says a parameter or its value is refused (OpenAI, Anthropic, vLLM,
// SGLang, llama.cpp and Ollama word it differently), rather than, say, that a value is too large.
bool says_refused(const std::string& message) {
  static const char* kWords[] = {"unsupported",      "not supported",    "does not support",
                                 "not permitted",    "not allowed",      "unrecognized",
                                 "unrecognised",     "unknown",          "extra inputs",
                                 "only the default", "may only be set",  "cannot be used",
                                 "can only be",      "is not available", "no longer supported"};
  std::string m = lower_ascii(message);
  return std::any_of(std::begin(kWords), std::end(kWords),
                     [&](const char* w) { return m.find(w) != std::string::npos; });
}

}  // namespace

json chat_body(const Endpoint& endpoint, ChatRequest request, bool stream) {
  // A prompt carries archive text (compile logs, evidence): no secret goes to a provider in it.
  request.system = redact_secrets(std::move(request.system));
  request.context = redact_secrets(std::move(request.context));
  request.user = redact_secrets(std::move(request.user));
  return endpoint.provider == Provider::OpenAI ? openai_body(endpoint, request, stream)
                                               : anthropic_body(endpoint, request, stream);
}

json openai_chat_body(const std::string& model, ChatRequest request) {
  Endpoint e;
  e.model = model;
  return chat_body(e, std::move(request), false);
}

std::string refused_field(const json& body, const std::string& reply_body) {
  json reply = json::parse(reply_body.substr(0, 64 * 1024), nullptr, false);
  if (!reply.is_object()) return "";
  // {"error": {"message", "param", ...}} (OpenAI, Anthropic, llama.cpp, Ollama) or a flat
  // {"message", "param"} (vLLM, SGLang).
  const json& error =
      reply.contains("error") && reply["error"].is_object() ? reply["error"] : reply;
  std::string message = error.contains("message") && error["message"].is_string()
                            ? error["message"].get<std::string>()
                            : "";
  if (message.empty() && reply.contains("detail") && reply["detail"].is_string())
    message = reply["detail"].get<std::string>();
  std::string param = error.contains("param") && error["param"].is_string()
                          ? error["param"].get<std::string>()
                          : "";
  std::string code =
      error.contains("code") && error["code"].is_string() ? error["code"].get<std::string>() : "";
  bool refusal =
      says_refused(message) || code == "unsupported_parameter" || code == "unsupported_value";
  if (!refusal || !body.is_object()) return "";
  // The fields kforge may leave out or rename (adapt_to_refusal says which it can do without).
  std::vector<std::string> candidates;
  for (const auto& [key, value] : body.items())
    if (key != "model" && key != "messages" && key != "system") candidates.push_back(key);
  if (body.dump().find("\"cache_control\"") != std::string::npos)
    candidates.push_back("cache_control");
  if (!param.empty()) {
    std::string top = param.substr(0, param.find_first_of(".["));
    if (std::find(candidates.begin(), candidates.end(), top) != candidates.end()) return top;
  }
  // The candidate the message names first ("'temperature' may only be set to 1 when thinking is
  // enabled" names temperature, not thinking).
  std::string found;
  size_t first = std::string::npos;
  for (const std::string& c : candidates)
    if (size_t at = word_at(message, c); at < first) first = at, found = c;
  return found;
}

bool adapt_to_refusal(Provider provider, WireOptions& w, const std::string& field) {
  if (field == "max_tokens" || field == "max_completion_tokens") {
    if (provider != Provider::OpenAI) return false;  // Anthropic requires max_tokens
    std::string other = field == "max_tokens" ? "max_completion_tokens" : "max_tokens";
    if (w.token_limit_field == other) return false;
    w.token_limit_field = other;
    return true;
  }
  auto off = [](auto& option, auto value) {
    if (option == value) return false;
    option = value;
    return true;
  };
  if (field == "temperature") return off(w.temperature, false);
  if (field == "reasoning_effort") return off(w.reasoning_effort, std::string());
  if (field == "stream_options") return off(w.stream_usage, false);
  if (field == "stream") return off(w.stream, false);
  if (field == "thinking") return off(w.thinking_budget, 0) | off(w.thinking_adaptive, false);
  if (field == "cache_control") return off(w.cache_prompt, false);
  return false;
}

}  // namespace kforge::evolve
