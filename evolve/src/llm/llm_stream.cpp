// Streamed replies: the server-sent events of OpenAI's chat completions and Anthropic's Messages
// API, assembled into the body the unstreamed request would have had, so one parser (parse_reply)
// reads both. One pass over the events; every event's JSON bounded in depth before it is parsed.
#include <map>
#include <nlohmann/json.hpp>

#include "kforge/common/json_limits.h"
#include "kforge/common/strings.h"
#include "kforge/evolve/llm.h"

namespace kforge::evolve {

using nlohmann::json;

namespace {

struct Event {
  std::string name;  // "event:" (Anthropic names each event; OpenAI sends data only)
  std::string data;  // its "data:" lines joined with '\n'
};

// The events of an SSE body (the WHATWG EventSource rules: lines end in \n, \r\n or \r; a blank
// line ends an event; ':' starts a comment; "field: value" with one optional space).
std::vector<Event> split_events(const std::string& body) {
  std::vector<Event> events;
  Event current;
  bool has_data = false;
  size_t i = 0, n = body.size();
  while (i < n) {
    size_t end = body.find_first_of("\r\n", i);
    if (end == std::string::npos) end = n;  // a last line without its end: the stream was cut there
    std::string_view line(body.data() + i, end - i);
    i = end < n && body[end] == '\r' && end + 1 < n && body[end + 1] == '\n' ? end + 2 : end + 1;
    if (line.empty()) {
      if (has_data || !current.name.empty()) events.push_back(std::move(current));
      current = Event{};
      has_data = false;
      continue;
    }
    if (line[0] == ':') continue;
    size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon),
                     value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
    if (field == "event") {
      current.name = std::string(value);
    } else if (field == "data") {
      if (has_data) current.data += '\n';
      current.data.append(value);
      has_data = true;
    }
  }
  if (has_data) events.push_back(std::move(current));  // an event the stream's end cut short
  return events;
}

// An event's JSON, or an LlmError (BadResponse) naming the event for one that is not.
json event_json(const Event& e, size_t index) {
  if (json_depth(e.data, kMaxJsonDepth) <= kMaxJsonDepth) {
    json j = json::parse(e.data, nullptr, false);
    if (j.is_object()) return j;
  }
  throw LlmError(LlmError::Kind::BadResponse, 200,
                 "event " + std::to_string(index + 1) +
                     " of the stream is not a JSON object: " + printable(e.data.substr(0, 120)));
}

// A failure with the usage the events reported so far (a retried call still counts it).
LlmError stream_error(LlmError::Kind kind, int status, const std::string& what, const json& usage,
                      Provider provider) {
  LlmError e(kind, status, what);
  if (usage.is_object()) {
    bool openai = provider == Provider::OpenAI;
    auto count = [&](const char* field) {
      auto it = usage.find(field);
      return it != usage.end() && it->is_number_integer() && it->get<int64_t>() > 0
                 ? std::min<int64_t>(it->get<int64_t>(), kMaxReplyTokens)
                 : int64_t{0};
    };
    e.tokens_in = openai ? count("prompt_tokens")
                         : count("input_tokens") + count("cache_read_input_tokens") +
                               count("cache_creation_input_tokens");
    e.tokens_out = count(openai ? "completion_tokens" : "output_tokens");
    if (!openai)
      e.tokens_cache_read = count("cache_read_input_tokens"),
      e.tokens_cache_write = count("cache_creation_input_tokens");
  }
  return e;
}

// An error inside a stream ({"error": {...}} or Anthropic's `event: error`): retried like the
// status it stands for (overloaded 529, rate limit 429, api_error 500), final otherwise.
LlmError error_event(const json& j, const json& usage, Provider provider) {
  const json& err = j.contains("error") && j["error"].is_object() ? j["error"] : j;
  std::string type =
      err.contains("type") && err["type"].is_string() ? err["type"].get<std::string>() : "";
  std::string message = err.contains("message") && err["message"].is_string()
                            ? err["message"].get<std::string>()
                            : "";
  int status = type == "overloaded_error"        ? 529
               : type == "rate_limit_error"      ? 429
               : type == "invalid_request_error" ? 400
                                                 : 500;
  return stream_error(LlmError::Kind::Http, status,
                      "the stream carried an error (" + printable(type.substr(0, 64)) +
                          "): " + printable(message.substr(0, 200)),
                      usage, provider);
}

std::string string_at(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string openai_assembled(const std::vector<Event>& events) {
  std::string text, reasoning, finish, model;
  json usage;
  bool done = false;
  for (size_t k = 0; k < events.size() && !done; ++k) {
    if (events[k].data == "[DONE]") {
      done = true;
      break;
    }
    json j = event_json(events[k], k);
    if (j.contains("error") && !j["error"].is_null()) throw error_event(j, usage, Provider::OpenAI);
    if (model.empty()) model = string_at(j, "model");
    if (j.contains("usage") && j["usage"].is_object()) usage = j["usage"];
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty() ||
        !(*choices)[0].is_object())
      continue;
    const json& choice = (*choices)[0];
    if (std::string f = string_at(choice, "finish_reason"); !f.empty()) finish = f;
    if (!choice.contains("delta") || !choice["delta"].is_object()) continue;
    const json& delta = choice["delta"];
    text += string_at(delta, "content");
    reasoning += string_at(delta, "reasoning_content") + string_at(delta, "reasoning");
  }
  if (!done && finish.empty())
    throw stream_error(LlmError::Kind::Network, 200,
                       "the stream ended before its end (no finish reason, no [DONE]) after " +
                           std::to_string(events.size()) + " event(s) and " +
                           std::to_string(text.size()) + " characters of answer",
                       usage, Provider::OpenAI);
  json message = {{"role", "assistant"}, {"content", text}};
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  json reply = {
      {"model", model},
      {"choices", json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}}})}};
  if (usage.is_object()) reply["usage"] = usage;
  return reply.dump();
}

std::string anthropic_assembled(const std::vector<Event>& events) {
  json message = json::object(), usage = json::object();
  std::map<int64_t, json> blocks;  // by index
  std::string stop;
  bool done = false;
  for (size_t k = 0; k < events.size() && !done; ++k) {
    json j = event_json(events[k], k);
    std::string type = string_at(j, "type");
    if (type.empty()) type = events[k].name;
    if (type == "error") throw error_event(j, usage, Provider::Anthropic);
    if (type == "message_start" && j.contains("message") && j["message"].is_object()) {
      message = j["message"];
      if (message.contains("usage") && message["usage"].is_object()) usage = message["usage"];
    } else if (type == "content_block_start" && j.contains("content_block") &&
               j["content_block"].is_object()) {
      blocks[j.value("index", int64_t{0})] = j["content_block"];
    } else if (type == "content_block_delta" && j.contains("delta") && j["delta"].is_object()) {
      const json& d = j["delta"];
      json& block = blocks[j.value("index", int64_t{0})];
      std::string dtype = string_at(d, "type");
      const char* field = dtype == "text_delta"       ? "text"
                          : dtype == "thinking_delta" ? "thinking"
                                                      : nullptr;
      if (!field) continue;  // signature_delta, input_json_delta: nothing kforge reads
      if (!block.is_object()) block = {{"type", dtype == "text_delta" ? "text" : "thinking"}};
      block[field] = string_at(block, field) + string_at(d, field);
    } else if (type == "message_delta") {
      if (j.contains("delta") && j["delta"].is_object())
        if (std::string s = string_at(j["delta"], "stop_reason"); !s.empty()) stop = s;
      if (j.contains("usage") && j["usage"].is_object())
        for (const auto& [key, value] : j["usage"].items())
          if (!value.is_null()) usage[key] = value;  // cumulative counts: the last one holds
    } else if (type == "message_stop") {
      done = true;
    }
  }
  if (!done && stop.empty())
    throw stream_error(LlmError::Kind::Network, 200,
                       "the stream ended before its end (no message_stop) after " +
                           std::to_string(events.size()) + " event(s)",
                       usage, Provider::Anthropic);
  json content = json::array();
  for (auto& [index, block] : blocks)
    if (block.is_object()) content.push_back(block);
  message["content"] = content;
  message["stop_reason"] = stop.empty() ? json(nullptr) : json(stop);
  message["usage"] = usage;
  return message.dump();
}

}  // namespace

bool is_event_stream(const std::string& content_type, const std::string& body) {
  std::string type = lower_ascii(content_type);
  if (type.find("text/event-stream") != std::string::npos) return true;
  size_t at = body.find_first_not_of(" \t\r\n");
  if (at == std::string::npos) return false;
  return body.compare(at, 5, "data:") == 0 || body.compare(at, 6, "event:") == 0 || body[at] == ':';
}

std::string assemble_stream(Provider provider, const std::string& events) {
  std::vector<Event> list = split_events(events);
  try {
    return provider == Provider::OpenAI ? openai_assembled(list) : anthropic_assembled(list);
  } catch (const json::exception& e) {  // a field of the wrong type ("index": "x")
    throw LlmError(LlmError::Kind::BadResponse, 200,
                   std::string("an event of the stream is malformed: ") + e.what());
  }
}

}  // namespace kforge::evolve
