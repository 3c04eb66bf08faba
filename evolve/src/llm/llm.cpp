#include "kforge/evolve/llm.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/paths.h"
#include "kforge/common/secrets.h"
#include "kforge/common/strings.h"

namespace kforge::evolve {
namespace {

using nlohmann::json;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

struct HttpReply {
  long status = 0;
  std::string body;
  std::string content_type;
  std::optional<double> retry_after_s;
  CURLcode curl = CURLE_OK;
  double ms = 0;
  size_t max_body = 0;
  bool too_large = false;  // the body passed max_body and the transfer was stopped
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<HttpReply*>(user);
  size_t bytes = size * n;                     // size is 1 and n at most CURL_MAX_WRITE_SIZE
  if (bytes > r->max_body - r->body.size()) {  // body.size() never passes max_body
    r->too_large = true;
    return 0;  // anything but `bytes` aborts the transfer (CURLE_WRITE_ERROR)
  }
  r->body.append(data, bytes);
  return bytes;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<HttpReply*>(user);
  std::string line(data, size * n);
  std::string lower = lower_ascii(line);
  if (lower.rfind("retry-after:", 0) == 0) {
    // A number of seconds (backoff() caps it at max_delay, "inf" and 1e300 included) or an
    // HTTP-date; garbage, NaN or a negative value: none (the exponential backoff).
    std::string v = trim(line.substr(12));
    char* end = nullptr;
    double s = std::strtod(v.c_str(), &end);
    if (end != v.c_str() && s >= 0) {
      if (!r->retry_after_s) r->retry_after_s = s;  // NaN fails the comparison
    } else if (time_t at = curl_getdate(v.c_str(), nullptr); at != -1) {
      r->retry_after_s = std::max(0.0, std::difftime(at, std::time(nullptr)));
    }
  } else if (lower.rfind("retry-after-ms:", 0) == 0) {  // OpenAI's, finer: it wins
    std::string v = line.substr(15);
    char* end = nullptr;
    double ms = std::strtod(v.c_str(), &end);
    if (end != v.c_str() && ms >= 0) r->retry_after_s = ms / 1000;
  } else if (lower.rfind("content-type:", 0) == 0) {
    r->content_type = trim(line.substr(13));
  }
  return size * n;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

HttpReply post(const std::string& url, const std::vector<std::string>& headers,
               const std::string& body, const RetryPolicy& policy) {
  static CurlGlobal global;
  HttpReply reply;
  reply.max_body = static_cast<size_t>(policy.max_reply_bytes);
  CURL* curl = curl_easy_init();
  if (!curl) throw Error("libcurl: curl_easy_init failed");
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(policy.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(policy.total_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(policy.max_reply_bytes));  // a declared length
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  // http and https only: a base_url of file:// would read a local file, gopher:// or dict:// reach
  // any TCP port (LlmClient refuses such a base_url up front; this holds whatever gets here).
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  auto t0 = std::chrono::steady_clock::now();
  reply.curl = curl_easy_perform(curl);
  reply.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return reply;
}

// The first 300 characters of a reply, redacted as a whole first (a key cut in two by the
// truncation would otherwise leave its first part).
std::string excerpt(const std::string& body) {
  std::string clean = redact_secrets(body);
  std::string s = clean.substr(0, 300);
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s + (clean.size() > 300 ? "..." : "");
}

}  // namespace

std::string redact(std::string text, const std::string& secret) {
  if (!secret.empty()) {
    remember_secret(secret);
    for (size_t at; (at = text.find(secret)) != std::string::npos;)
      text.replace(at, secret.size(), kRedacted);
  }
  return redact_secrets(std::move(text));
}

Endpoint endpoint_from_spec(const std::string& spec) {
  size_t colon = spec.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size())
    throw InputError(
        "--model", std::nullopt, "",
        "'" + spec + "' is not PROVIDER:MODEL (openai:gpt-4.1, anthropic:claude-sonnet-4-5)");
  Endpoint e;
  std::string provider = spec.substr(0, colon);
  e.model = spec.substr(colon + 1);
  if (provider == "openai") {
    e.provider = Provider::OpenAI;
    e.base_url =
        env("OPENAI_BASE_URL").empty() ? "https://api.openai.com/v1" : env("OPENAI_BASE_URL");
    e.api_key = env("OPENAI_API_KEY");
  } else if (provider == "anthropic") {
    e.provider = Provider::Anthropic;
    e.base_url =
        env("ANTHROPIC_BASE_URL").empty() ? "https://api.anthropic.com" : env("ANTHROPIC_BASE_URL");
    e.api_key = env("ANTHROPIC_API_KEY");
  } else {
    throw InputError("--model", std::nullopt, "",
                     "unknown provider '" + provider + "' (openai, anthropic)");
  }
  while (!e.base_url.empty() && e.base_url.back() == '/') e.base_url.pop_back();
  if (!is_http_url(e.base_url))
    throw InputError(
        e.provider == Provider::OpenAI ? "OPENAI_BASE_URL" : "ANTHROPIC_BASE_URL", std::nullopt, "",
        "must be an http:// or https:// URL, got '" + printable(redact_secrets(e.base_url)) + "'");
  return e;
}

bool is_http_url(const std::string& url) {
  std::string lower = lower_ascii(url.substr(0, 8));
  size_t host = lower.rfind("https://", 0) == 0 ? 8 : lower.rfind("http://", 0) == 0 ? 7 : 0;
  return host && url.size() > host && url[host] != '/';
}

namespace {

// One usage field as a token count: absent or null is 0; a count outside [0, kMaxReplyTokens], a
// fraction's whole part aside, or a value that is not a number sets `problem` and is charged as
// its bound (0 below, kMaxReplyTokens above; 0 for a non-number).
int64_t token_count(const json& usage, const char* field, std::string& problem) {
  auto it = usage.find(field);
  if (it == usage.end() || it->is_null()) return 0;
  // A scalar as written; a container by its type (dump() recurses: a deep one would overflow).
  std::string said = "usage." + std::string(field) + " = " +
                     (it->is_primitive() ? it->dump().substr(0, 40) : it->type_name());
  auto bad = [&](int64_t charged) {
    if (problem.empty())
      problem = "the reply's usage is implausible (a negative token count or one past " +
                std::to_string(kMaxReplyTokens) + " per reply): " + said;
    return charged;
  };
  if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    return u > static_cast<uint64_t>(kMaxReplyTokens) ? bad(kMaxReplyTokens)
                                                      : static_cast<int64_t>(u);
  }
  if (it->is_number_integer()) {
    int64_t i = it->get<int64_t>();
    return i < 0 ? bad(0) : i > kMaxReplyTokens ? bad(kMaxReplyTokens) : i;
  }
  if (it->is_number_float()) {
    double d = it->get<double>();  // JSON has no NaN or infinity; 1e400 parses as infinity
    if (!(d >= 0)) return bad(0);
    if (!(d <= static_cast<double>(kMaxReplyTokens))) return bad(kMaxReplyTokens);
    return static_cast<int64_t>(d);
  }
  if (problem.empty()) problem = "the reply's usage is not a token count: " + said;
  return 0;
}

// An OpenAI message's content: a string, or a list of parts whose text parts are joined.
std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array())
    for (const json& part : content)
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
          part["text"].is_string())
        out += part["text"].get<std::string>();
  return out;
}

}  // namespace

ChatResponse parse_reply(Provider provider, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded())
    throw LlmError(LlmError::Kind::BadResponse, 200,
                   "the endpoint's reply is not JSON: " + excerpt(body));
  if (!j.is_object())
    throw LlmError(LlmError::Kind::BadResponse, 200,
                   "the endpoint's reply is not a JSON object: " + excerpt(body));
  ChatResponse r;
  // Usage first: a reply counts against the budgets whatever else is wrong with it.
  std::string usage_problem;
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (provider == Provider::OpenAI) {
      // prompt_tokens counts the cached ones (prompt_tokens_details.cached_tokens).
      r.tokens_in = token_count(*u, "prompt_tokens", usage_problem);
      if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object()) {
        r.tokens_cache_read =
            std::min(r.tokens_in, token_count(*d, "cached_tokens", usage_problem));
        r.tokens_cache_write =  // newer usage objects say what the cache stored
            std::min(r.tokens_in - r.tokens_cache_read,
                     token_count(*d, "cache_write_tokens", usage_problem));
      }
      r.tokens_out =
          token_count(*u, "completion_tokens", usage_problem);  // reasoning tokens included
    } else {
      // input_tokens counts only what follows the last cache breakpoint: the cache's reads and
      // writes are input tokens too.
      r.tokens_cache_read = token_count(*u, "cache_read_input_tokens", usage_problem);
      r.tokens_cache_write = token_count(*u, "cache_creation_input_tokens", usage_problem);
      r.tokens_in = token_count(*u, "input_tokens", usage_problem) + r.tokens_cache_read +
                    r.tokens_cache_write;
      if (r.tokens_in >
          kMaxReplyTokens) {  // each count plausible, their sum not: charged at the bound
        if (usage_problem.empty())
          usage_problem =
              "the reply's usage is implausible (input, cache read and cache write tokens sum "
              "past " +
              std::to_string(kMaxReplyTokens) + ")";
        r.tokens_in = kMaxReplyTokens;
        r.tokens_cache_read = std::min(r.tokens_cache_read, r.tokens_in);
        r.tokens_cache_write = std::min(r.tokens_cache_write, r.tokens_in - r.tokens_cache_read);
      }
      r.tokens_out = token_count(*u, "output_tokens", usage_problem);
    }
  }
  auto fail = [&](LlmError::Kind kind, const std::string& what) {
    LlmError e(kind, 200, what);
    e.tokens_in = r.tokens_in, e.tokens_out = r.tokens_out, e.finish_reason = r.finish_reason;
    e.tokens_cache_read = r.tokens_cache_read, e.tokens_cache_write = r.tokens_cache_write;
    return e;
  };
  try {
    if (j.contains("model") && j["model"].is_string())
      r.model = redact_secrets(printable(j["model"].get<std::string>().substr(0, 200)));
    if (provider == Provider::OpenAI) {
      auto choices = j.find("choices");
      if (choices == j.end() || !choices->is_array() || choices->empty() ||
          !(*choices)[0].is_object())
        throw fail(LlmError::Kind::BadResponse, "the reply has no choices: " + excerpt(body));
      const json& choice = (*choices)[0];
      if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
        r.finish_reason = choice["finish_reason"].get<std::string>().substr(0, 64);
      if (!choice.contains("message") || !choice["message"].is_object())
        throw fail(LlmError::Kind::BadResponse,
                   "the reply's choice has no message: " + excerpt(body));
      const json& msg = choice["message"];
      if (msg.contains("content")) r.text = content_text(msg["content"]);
      for (const char* k : {"reasoning_content", "reasoning"})
        if (msg.contains(k) && msg[k].is_string()) r.reasoning = msg[k].get<std::string>();
    } else {
      if (j.contains("stop_reason") && j["stop_reason"].is_string())
        r.finish_reason = j["stop_reason"].get<std::string>().substr(0, 64);
      auto content = j.find("content");
      if (content == j.end() || !content->is_array())
        throw fail(LlmError::Kind::BadResponse,
                   "the reply has no content blocks: " + excerpt(body));
      for (const json& block : *content) {
        if (!block.is_object()) continue;
        std::string type = block.contains("type") && block["type"].is_string()
                               ? block["type"].get<std::string>()
                               : "";
        const char* field = type == "text" ? "text" : type == "thinking" ? "thinking" : nullptr;
        if (!field || !block.contains(field) || !block[field].is_string()) continue;
        // Other blocks (redacted_thinking, tool_use, ...) carry nothing kforge uses.
        (type == "text" ? r.text : r.reasoning) += block[field].get<std::string>();
      }
    }
  } catch (const json::exception& e) {
    throw fail(LlmError::Kind::BadResponse, std::string("the reply lacks an expected field (") +
                                                e.what() + "): " + excerpt(body));
  }
  r.finish_reason = printable(r.finish_reason);
  // Token counts become costs and budgets: an implausible one makes the reply a bad one (charged
  // at its bound, so a hostile count stops a budget rather than passing it).
  if (!usage_problem.empty())
    throw fail(LlmError::Kind::BadResponse, usage_problem + ": " + excerpt(body));
  // An endpoint that echoes the key: redacted before anything (cache, archive, output) sees it.
  r.text = redact_secrets(std::move(r.text));
  r.reasoning = redact_secrets(std::move(r.reasoning));
  if (r.text.empty()) {
    std::string reason = lower_ascii(r.finish_reason);
    std::string usage = " (" + std::to_string(r.tokens_in) + " tokens in, " +
                        std::to_string(r.tokens_out) + " out)";
    if (reason == "length" || reason == "max_tokens")
      throw fail(LlmError::Kind::CutOff,
                 "the reply stopped at the token limit before any answer text (finish reason '" +
                     r.finish_reason + "'" + (r.reasoning.empty() ? "" : ", after reasoning") +
                     ")" + usage + ": raise max_tokens in the LLM config for a reasoning model");
    throw fail(LlmError::Kind::BadResponse, "the reply has no answer text (finish reason '" +
                                                r.finish_reason + "')" + usage + ": " +
                                                excerpt(body));
  }
  return r;
}

void ConcurrencyLimit::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return free_ > 0; });
  --free_;
}

void ConcurrencyLimit::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++free_;
  }
  cv_.notify_one();
}

TokenRate::TokenRate(int64_t per_minute, Clock clock, Sleep sleep)
    : per_minute_(per_minute), clock_(std::move(clock)), sleep_(std::move(sleep)) {
  if (per_minute_ < 1) throw UsageError("TokenRate: the limit must be at least 1 token per minute");
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
  if (!sleep_) sleep_ = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
}

int64_t TokenRate::in_window(std::chrono::steady_clock::time_point now) {
  auto window_start = now - std::chrono::minutes(1);
  sent_.erase(std::remove_if(sent_.begin(), sent_.end(),
                             [&](const Sent& s) { return s.at <= window_start; }),
              sent_.end());
  int64_t sum = 0;
  for (const Sent& s : sent_) sum += s.tokens;
  return sum;
}

int64_t TokenRate::acquire(int64_t tokens) {
  tokens = std::max<int64_t>(tokens, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto now = clock_();
    int64_t sum = in_window(now);
    if (sent_.empty() || sum + tokens <= per_minute_) {
      sent_.push_back({next_ticket_, now, tokens});
      return next_ticket_++;
    }
    // The oldest request leaves the window first; then look again.
    auto oldest = std::min_element(sent_.begin(), sent_.end(),
                                   [](const Sent& a, const Sent& b) { return a.at < b.at; });
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
                    oldest->at + std::chrono::minutes(1) - now) +
                std::chrono::milliseconds(1);
    lock.unlock();
    sleep_(wait);
    lock.lock();
  }
}

void TokenRate::settle(int64_t ticket, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Sent& s : sent_)
    if (s.ticket == ticket) s.tokens = std::max<int64_t>(tokens, 0);
}

ResponseCache::ResponseCache(std::string dir)
    : dir_(dir.empty() ? (cache_dir() / "llm").string() : std::move(dir)) {}

std::string ResponseCache::key(const Endpoint& e, const ChatRequest& r, int sample) const {
  // The question as the endpoint is asked it (its configured shape: what the endpoint refused
  // during a run does not change the question), the stream aside.
  json k = {{"provider", e.provider == Provider::OpenAI ? "openai" : "anthropic"},
            {"base_url", e.base_url},
            {"body", chat_body(e, r, false)},
            {"sample", sample}};
  return content_hash(k.dump());
}

std::optional<ChatResponse> ResponseCache::get(const std::string& key) const {
  auto text = read_file(dir_ + "/" + key.substr(0, 2) + "/" + key + ".json");
  if (!text) return std::nullopt;
  try {
    json j = json::parse(*text);
    ChatResponse r;
    // Redacted again on the way out: an entry written before replies were redacted may hold a key.
    r.text = redact_secrets(j.at("text").get<std::string>());
    r.reasoning = redact_secrets(j.at("reasoning").get<std::string>());
    r.model = redact_secrets(j.at("model").get<std::string>());
    r.finish_reason = j.value("finish_reason", "");
    r.tokens_in = j.at("tokens_in");
    r.tokens_out = j.at("tokens_out");
    r.tokens_cache_read = j.value("tokens_cache_read", int64_t{0});
    r.tokens_cache_write = j.value("tokens_cache_write", int64_t{0});
    r.latency_ms = j.at("latency_ms");
    r.attempts = j.at("attempts");
    r.cached = true;
    // Each attempt's counts are bounded: more than max_attempts replies' worth is a damaged entry.
    int64_t bound = kMaxReplyTokens * std::max(1, std::min(r.attempts, 100));
    if (r.tokens_in < 0 || r.tokens_out < 0 || r.tokens_in > bound || r.tokens_out > bound)
      return std::nullopt;
    if (r.tokens_cache_read < 0 || r.tokens_cache_write < 0 ||
        r.tokens_cache_read + r.tokens_cache_write > r.tokens_in)
      return std::nullopt;
    return r;
  } catch (const json::exception&) {
    return std::nullopt;  // a damaged entry is a miss; the next put replaces it
  }
}

void ResponseCache::put(const std::string& key, const ChatResponse& r) const {
  std::string dir = dir_ + "/" + key.substr(0, 2);
  make_directories(dir);
  // No secret reaches the disk: the reply's text is redacted already (parse_reply); this holds for
  // any other ChatModel's answers too.
  json j = {{"text", redact_secrets(r.text)},
            {"reasoning", redact_secrets(r.reasoning)},
            {"model", redact_secrets(r.model)},
            {"finish_reason", r.finish_reason},
            {"tokens_in", r.tokens_in},
            {"tokens_out", r.tokens_out},
            {"tokens_cache_read", r.tokens_cache_read},
            {"tokens_cache_write", r.tokens_cache_write},
            {"latency_ms", r.latency_ms},
            {"attempts", r.attempts}};
  write_file_atomic(dir + "/" + key + ".json", j.dump());
}

LlmClient::LlmClient(Endpoint endpoint, RetryPolicy policy,
                     std::function<void(std::chrono::milliseconds)> sleep,
                     std::shared_ptr<ConcurrencyLimit> limit, std::shared_ptr<ResponseCache> cache,
                     std::shared_ptr<TokenRate> rate)
    : endpoint_(std::move(endpoint)),
      policy_(policy),
      sleep_(std::move(sleep)),
      limit_(std::move(limit)),
      cache_(std::move(cache)),
      rate_(std::move(rate)),
      wire_(endpoint_.wire) {
  validate_policy(policy_);
  if (!is_http_url(endpoint_.base_url)) {
    bool openai = endpoint_.provider == Provider::OpenAI;
    throw InputError(openai ? "OPENAI_BASE_URL" : "ANTHROPIC_BASE_URL", std::nullopt, "",
                     std::string("the base URL (this variable, or base_url under [providers.") +
                         (openai ? "openai" : "anthropic") +
                         "] in the LLM config) must be an http:// or https:// URL, got '" +
                         printable(redact(endpoint_.base_url, endpoint_.api_key)) + "'");
  }
  if (!sleep_) sleep_ = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  notice_ = [](const std::string& line) { std::cerr << "kforge: " << line << "\n"; };
  remember_secret(endpoint_.api_key);
}

WireOptions LlmClient::wire() const {
  std::lock_guard<std::mutex> lock(wire_mutex_);
  return wire_;
}

std::chrono::milliseconds LlmClient::backoff(int attempt,
                                             std::optional<double> retry_after_s) const {
  if (retry_after_s &&
      *retry_after_s >= 0)  // inf or 1e300: capped before any cast; NaN fails the comparison
    return std::chrono::milliseconds(static_cast<int64_t>(
        std::min(*retry_after_s * 1000, static_cast<double>(policy_.max_delay.count()))));
  static thread_local std::mt19937_64 rng(std::random_device{}());
  double full = static_cast<double>(policy_.base_delay.count()) * std::pow(2.0, attempt - 1);
  full = std::min(full, static_cast<double>(policy_.max_delay.count()));
  double jittered =
      full * (0.5 + 0.5 * std::uniform_real_distribution<double>(0, 1)(rng));  // "equal jitter"
  return std::chrono::milliseconds(static_cast<int64_t>(jittered));
}

ChatResponse LlmClient::chat(const ChatRequest& req, int sample) const {
  std::string key;
  if (cache_) {
    key = cache_->key(endpoint_, req, sample);
    if (auto hit = cache_->get(key)) return *hit;
  }
  ChatResponse r = chat_uncached(req);
  if (cache_) cache_->put(key, r);
  return r;
}

namespace {

// The request's tokens as providers count them against a tokens-per-minute limit: its prompt
// (characters / 4) and all it may answer.
int64_t estimated_tokens(const ChatRequest& r) {
  return static_cast<int64_t>((r.system.size() + r.context.size() + r.user.size()) / 4) +
         r.max_tokens;
}

}  // namespace

// The field a 400 refuses, if the current shape still sends it and can do without it: the shape
// is changed for every later request (said once per field); false leaves the 400 final.
bool LlmClient::adapt(const json& sent, const std::string& reply_body) const {
  std::string field = refused_field(sent, reply_body);
  if (field.empty()) return false;
  std::lock_guard<std::mutex> lock(wire_mutex_);
  Endpoint now = endpoint_;
  now.wire = wire_;
  std::string body = chat_body(now, ChatRequest{}, wire_.stream).dump();
  bool still_sent = field == "cache_control" ? wire_.cache_prompt
                    : field == "temperature" ? wire_.temperature
                                             : body.find("\"" + field + "\"") != std::string::npos;
  if (!still_sent) return true;  // another request adapted the shape since this one was sent
  WireOptions before = wire_;
  if (!adapt_to_refusal(endpoint_.provider, wire_, field)) return false;
  std::string change = wire_.token_limit_field != before.token_limit_field
                           ? "sending the token limit as '" + wire_.token_limit_field + "' instead"
                           : "leaving it out";
  notice_(endpoint_.model + " at " + printable(redact(endpoint_.base_url, endpoint_.api_key)) +
          " refused '" + field + "' (HTTP 400); " + change + " for the rest of the run");
  return true;
}

ChatResponse LlmClient::chat_uncached(const ChatRequest& request) const {
  bool openai = endpoint_.provider == Provider::OpenAI;
  std::string url = endpoint_.base_url + (openai ? "/chat/completions" : "/v1/messages");
  std::string where = redact(endpoint_.model + " at " + url, endpoint_.api_key);
  std::vector<std::string> headers = {"Content-Type: application/json"};
  if (openai) {
    if (!endpoint_.api_key.empty()) headers.push_back("Authorization: Bearer " + endpoint_.api_key);
  } else {
    headers.push_back("x-api-key: " + endpoint_.api_key);
    headers.push_back("anthropic-version: " + endpoint_.anthropic_version);
  }
  std::string last_problem;
  LlmError::Kind last_kind = LlmError::Kind::Network;
  int last_status = 0;
  ChatResponse paid;  // usage reported by replies that were not taken
  auto charge = [&paid](const auto& from) {
    paid.tokens_in += from.tokens_in, paid.tokens_out += from.tokens_out;
    paid.tokens_cache_read += from.tokens_cache_read,
        paid.tokens_cache_write += from.tokens_cache_write;
  };
  auto carry = [&paid](LlmError& e) {
    e.tokens_in = paid.tokens_in, e.tokens_out = paid.tokens_out;
    e.tokens_cache_read = paid.tokens_cache_read, e.tokens_cache_write = paid.tokens_cache_write;
    return e;
  };
  int adaptations = 0;  // 400s answered by leaving a field out: bounded by the fields there are
  for (int attempt = 1; attempt <= policy_.max_attempts; ++attempt) {
    Endpoint shaped = endpoint_;
    shaped.wire = wire();
    json body = chat_body(shaped, request, shaped.wire.stream);
    int64_t ticket = rate_ ? rate_->acquire(estimated_tokens(request)) : 0;
    if (limit_) limit_->acquire();
    HttpReply reply;
    try {
      reply = post(url, headers, body.dump(), policy_);
    } catch (...) {
      if (limit_) limit_->release();
      if (rate_) rate_->settle(ticket, 0);
      throw;
    }
    if (limit_) limit_->release();
    int64_t used = estimated_tokens(request);  // what the minute's window keeps of this attempt
    bool retry = false;
    if (reply.too_large || reply.curl == CURLE_FILESIZE_EXCEEDED) {
      // An endless or enormous body: stopped at the cap, and treated like any other bad reply.
      last_kind = LlmError::Kind::BadResponse;
      last_problem = "the reply body passed " + std::to_string(policy_.max_reply_bytes) +
                     " bytes (max_reply_bytes); the transfer was stopped (HTTP " +
                     std::to_string(reply.status) + ")";
      retry = true;
    } else if (reply.curl != CURLE_OK) {
      // A stream the connection dropped mid-answer: what its events reported so far counts.
      if (reply.status == 200 && is_event_stream(reply.content_type, reply.body)) {
        try {
          (void)assemble_stream(endpoint_.provider, reply.body);
        } catch (const LlmError& e) {
          charge(e);
        }
      }
      last_kind = reply.curl == CURLE_OPERATION_TIMEDOUT ? LlmError::Kind::Timeout
                                                         : LlmError::Kind::Network;
      last_problem =
          std::string(reply.curl == CURLE_OPERATION_TIMEDOUT ? "timed out" : "network error") +
          " (" + curl_easy_strerror(reply.curl) + ")";
      retry = true;
    } else if (reply.status == 429 || reply.status >= 500) {
      used = reply.status == 429 ? 0 : used;  // a request refused for the rate was not counted
      last_kind = LlmError::Kind::Http;
      last_problem = "HTTP " + std::to_string(reply.status) + ": " + excerpt(reply.body);
      retry = true;
    } else if (reply.status != 200) {
      if (rate_) rate_->settle(ticket, 0);
      // A 400 naming a parameter the model does not take: asked again without it, at once. Other
      // 4xx (bad model, bad key): retrying will not help.
      if (reply.status == 400 && adaptations < 8 && adapt(body, reply.body)) {
        ++adaptations, --attempt;
        continue;
      }
      LlmError e(
          LlmError::Kind::Http, static_cast<int>(reply.status),
          redact(where + ": HTTP " + std::to_string(reply.status) + ": " + excerpt(reply.body),
                 endpoint_.api_key));
      throw carry(e);
    } else {
      try {
        std::string reply_body = is_event_stream(reply.content_type, reply.body)
                                     ? assemble_stream(endpoint_.provider, reply.body)
                                     : reply.body;
        ChatResponse r = parse_reply(endpoint_.provider, reply_body);
        if (rate_)
          rate_->settle(ticket, r.tokens_in + r.tokens_out > 0 ? r.tokens_in + r.tokens_out : used);
        charge(r);  // the total of every reply
        r.tokens_in = paid.tokens_in, r.tokens_out = paid.tokens_out;
        r.tokens_cache_read = paid.tokens_cache_read,
        r.tokens_cache_write = paid.tokens_cache_write;
        r.latency_ms = reply.ms;
        r.attempts = attempt;
        return r;
      } catch (LlmError& e) {
        charge(e);
        bool cut = e.kind() == LlmError::Kind::Network;  // a stream that ended before its end
        bool stream_error = e.kind() == LlmError::Kind::Http;
        if (stream_error && (e.http_status() == 429 || e.http_status() >= 500)) {
          last_kind = LlmError::Kind::Http;
          last_problem = e.what();
          retry = true;
        } else if (cut) {
          last_kind = LlmError::Kind::Network;
          last_problem = e.what();
          retry = true;
        } else if (e.paid() || stream_error) {
          // The model spent tokens on it (cut off at the token limit, no answer text, implausible
          // usage): one failed call. Asking again is the caller's choice, which knows the budgets.
          if (rate_) rate_->settle(ticket, used);
          LlmError failed(
              e.kind(), stream_error ? e.http_status() : 200,
              redact(where + ": " + e.what() + " (attempt " + std::to_string(attempt) + ")",
                     endpoint_.api_key));
          failed.finish_reason = e.finish_reason;
          throw carry(failed);
        } else {
          // A truncated or garbled 200 that reported no usage is retried like a network error.
          last_kind = LlmError::Kind::BadResponse;
          last_problem = e.what();
          retry = true;
        }
      }
    }
    if (rate_) rate_->settle(ticket, used);
    last_status = static_cast<int>(reply.status);
    if (retry && attempt < policy_.max_attempts) sleep_(backoff(attempt, reply.retry_after_s));
  }
  LlmError failed(last_kind, last_status,
                  redact(where + ": gave up after " + std::to_string(policy_.max_attempts) +
                             " attempt(s); last: " + last_problem,
                         endpoint_.api_key));
  throw carry(failed);
}

}  // namespace kforge::evolve

namespace kforge::evolve {

std::chrono::milliseconds checked_timeout(double seconds, const std::string& file,
                                          std::optional<int> line, const std::string& field) {
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > kMaxTimeoutSeconds) {
    std::ostringstream got;
    got << seconds;
    throw InputError(file, line, field,
                     "must be a number of seconds above 0 and at most " +
                         std::to_string(static_cast<int>(kMaxTimeoutSeconds)) +
                         " (0 or less, NaN and infinity would wait forever), got " + got.str());
  }
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(seconds * 1000)));  // never 0: curl's "no limit"
}

std::chrono::milliseconds parse_timeout(const std::string& text, const std::string& option) {
  size_t begin = text.find_first_not_of(" \t"), end = text.find_last_not_of(" \t");
  std::string t = begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
  char* stop = nullptr;
  double v = t.empty() ? 0 : std::strtod(t.c_str(), &stop);
  if (t.empty() || stop != t.c_str() + t.size())
    throw InputError(option, std::nullopt, "",
                     "must be a number of seconds above 0 and at most " +
                         std::to_string(static_cast<int>(kMaxTimeoutSeconds)) + ", got '" + text +
                         "'");
  return checked_timeout(v, option, std::nullopt, "");
}

void validate_policy(const RetryPolicy& p) {
  auto ms_ok = [](std::chrono::milliseconds d) {
    return d.count() > 0 && d.count() <= static_cast<int64_t>(kMaxTimeoutSeconds * 1000);
  };
  if (!ms_ok(p.total_timeout) || !ms_ok(p.connect_timeout))
    throw UsageError("LLM client: a timeout of the retry policy is not within (0, " +
                     std::to_string(static_cast<int>(kMaxTimeoutSeconds)) + "] s (" +
                     std::to_string(p.total_timeout.count()) + " ms total, " +
                     std::to_string(p.connect_timeout.count()) + " ms connect)");
  if (p.max_reply_bytes < kMinReplyBytes || p.max_reply_bytes > kMaxReplyBytes)
    throw UsageError("LLM client: max_reply_bytes " + std::to_string(p.max_reply_bytes) +
                     " is not within [" + std::to_string(kMinReplyBytes) + ", " +
                     std::to_string(kMaxReplyBytes) + "]");
  if (p.max_attempts < 1) throw UsageError("LLM client: max_attempts must be at least 1");
}

}  // namespace kforge::evolve
