#include "kforge/evolve/batch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>

#include "kforge/common/hash.h"
#include "kforge/common/input_file.h"
#include "kforge/common/json_limits.h"
#include "kforge/common/secrets.h"
#include "kforge/common/strings.h"

namespace kforge::evolve {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Bounds on what the folder's files may hold: each is read again at every poll.
constexpr int64_t kMaxBatchFileBytes = int64_t{1} << 30;
constexpr size_t kMaxBatchLineBytes = size_t{64} << 20;  // one answer (or request) line

// A JSON line of a batch file, nlohmann's recursion bounded first; nullopt when it is not JSON (a
// line cut short, one still being written).
std::optional<json> parse_line(const std::string& line, const std::string& file, int n) {
  if (json_depth(line, kMaxJsonDepth) > kMaxJsonDepth)
    throw InputError(file, n, "",
                     "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Whether an answer line is an Anthropic Message Batches results line (custom_id, result) rather
// than an OpenAI Batch API output line (custom_id, response, error).
bool is_anthropic_result(const json& j) {
  return j.contains("result");
}

// The answer line's shape, in either batch API's output format; InputError naming the file, line
// and field otherwise. An answer with an error, a status other than 200, or a result other than
// succeeded, is a failed call later.
void check_answer(const json& j, const std::string& file, int n) {
  auto fail = [&](const std::string& field, const std::string& problem) {
    throw InputError(file, n, field, problem);
  };
  if (is_anthropic_result(j)) {
    const json& r = j["result"];
    if (!r.is_object())
      fail("result", "must be an object { type, ... } (a Message Batches result)");
    std::string type =
        r.contains("type") && r["type"].is_string() ? r["type"].get<std::string>() : "";
    if (type == "succeeded" && (!r.contains("message") || !r["message"].is_object()))
      fail("result.message", "must be an object (a Messages API response)");
    else if (type == "errored" && (!r.contains("error") || !r["error"].is_object()))
      fail("result.error", "must be an object (an error response)");
    else if (type != "succeeded" && type != "errored" && type != "canceled" && type != "expired")
      fail("result.type", "must be \"succeeded\", \"errored\", \"canceled\" or \"expired\"");
    return;
  }
  if (j.contains("error") && !j["error"].is_null()) return;
  if (!j.contains("response"))
    fail("response", "missing (an answer has a response, an error or a result)");
  const json& r = j["response"];
  if (!r.is_object()) fail("response", "must be an object { status_code, body }");
  if (!r.contains("status_code") || !r["status_code"].is_number_integer() ||
      r["status_code"].get<int64_t>() < 0 || r["status_code"].get<int64_t>() > 999)
    fail("response.status_code", "must be an HTTP status, a whole number like 200");
  if (r["status_code"].get<int>() == 200 && (!r.contains("body") || !r["body"].is_object()))
    fail("response.body", "must be an object (a chat completion)");
}

// What an answer line says, without the fields that name it or the batch (the same answer copied
// into a second file, or fetched twice, is one answer).
json what_it_says(const json& j) {
  return {{"response", j.value("response", json())},
          {"error", j.value("error", json())},
          {"result", j.value("result", json())}};
}

// "type: message" of an Anthropic errored result's error response ({type: "error", error: {type,
// message}}) or "code: message" of an OpenAI error object, else the error as JSON; bounded,
// printable, secrets redacted.
std::string error_message(const json& error) {
  const json* e = &error;
  if (e->contains("error") && (*e)["error"].is_object()) e = &(*e)["error"];
  auto text = [&](const char* field) {
    return e->contains(field) && (*e)[field].is_string() ? (*e)[field].get<std::string>()
                                                         : std::string();
  };
  std::string type = text("type").empty() ? text("code") : text("type");
  std::string message = text("message");
  std::string said = type.empty() && message.empty()
                         ? error.dump()
                         : type + (type.empty() || message.empty() ? "" : ": ") + message;
  said = redact_secrets(std::move(said));
  if (said.size() > 500) said = said.substr(0, 500) + "...";
  return printable(said);
}

// The response an answer line (checked by check_answer) gives, in either format; LlmError for a
// failed call: an error, a status other than 200, a result other than succeeded.
ChatResponse read_answer(const std::string& id, const json& a) {
  if (is_anthropic_result(a)) {
    const json& result = a["result"];
    std::string type = result["type"].get<std::string>();  // check_answer: one of the four
    if (type == "succeeded") return parse_reply(Provider::Anthropic, result["message"].dump());
    std::string why = type == "errored"    ? ": " + error_message(result["error"])
                      : type == "canceled" ? " (the batch was canceled before this request ran)"
                                           : " (the batch ended before this request ran)";
    throw LlmError(LlmError::Kind::Http, 0, "batch answer " + id + " is " + type + why);
  }
  if (a.contains("error") && !a["error"].is_null())
    throw LlmError(LlmError::Kind::Http, 0,
                   "batch answer " + id + " is an error: " + error_message(a["error"]));
  const json& response = a["response"];
  int status = response["status_code"].get<int>();  // check_answer: 0 to 999
  if (status != 200)
    throw LlmError(LlmError::Kind::Http, status,
                   "batch answer " + id + " has status " + std::to_string(status));
  return parse_reply(Provider::OpenAI, response["body"].dump());
}

// A fresh OpenAI endpoint for `model` with the default options (the model-name constructor's).
Endpoint openai_endpoint(std::string model) {
  Endpoint e;
  e.provider = Provider::OpenAI;
  e.model = std::move(model);
  return e;
}

}  // namespace

BatchExchange::BatchExchange(fs::path dir, std::string model, std::chrono::milliseconds wait,
                             std::chrono::milliseconds poll)
    : BatchExchange(std::move(dir), openai_endpoint(model), wait, poll) {
  model_ = std::move(model);
}

BatchExchange::BatchExchange(fs::path dir, Endpoint endpoint, std::chrono::milliseconds wait,
                             std::chrono::milliseconds poll)
    : dir_(std::move(dir)),
      requests_(dir_ / "requests.jsonl"),
      endpoint_(std::move(endpoint)),
      model_((endpoint_.provider == Provider::Anthropic ? "anthropic:" : "openai:") +
             endpoint_.model),
      wait_(wait),
      poll_(poll) {
  endpoint_.api_key.clear();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw UsageError("--model batch:" + dir_.string() +
                     ": cannot create the folder: " + ec.message());
  // Requests written by an earlier process (a resumed run) are not written again.
  struct stat st {};
  if (::lstat(requests_.c_str(), &st) != 0) return;
  if (!S_ISREG(st.st_mode))
    throw InputError(
        requests_.string(), std::nullopt, "",
        "not a regular file (a link, folder, FIFO or device): kforge writes its requests only to a "
        "plain file");
  InputFile in(requests_.string(), kMaxBatchFileBytes);
  for (std::string line; in.next_line(line, kMaxBatchLineBytes);) {
    std::optional<json> j = parse_line(line, in.path(), in.line());
    if (j && j->is_object() && j->contains("custom_id") && (*j)["custom_id"].is_string())
      written_.insert((*j)["custom_id"].get<std::string>());
  }
}

json BatchExchange::body(const ChatRequest& request) const {
  json b = chat_body(endpoint_, request, /*stream=*/false);
  b.erase("stream");  // neither batch API streams
  b.erase("stream_options");
  return b;
}

std::string BatchExchange::custom_id(const ChatRequest& request, int sample) const {
  json key = {{"body", body(request)}, {"sample", sample}};
  return "kf-" + content_hash(key.dump()).substr(0, 24);
}

// The answer for `id` in the folder's output files (regular files only, each bounded), read in
// the order of their names. A line that is not JSON (a file still being written, a broken line)
// is skipped, said once; an answer line of the wrong shape, and two different answers to `id`,
// are InputErrors naming the files and lines.
std::optional<json> BatchExchange::find_answer(const std::string& id) const {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".jsonl" && it->path().filename() != requests_.filename())
      files.push_back(it->path());
  if (ec)
    throw InputError(dir_.string(), std::nullopt, "",
                     "cannot list the batch folder: " + ec.message());
  std::sort(files.begin(), files.end());
  std::optional<json> found;
  std::string found_at;  // "file:line"
  for (const fs::path& p : files) {
    InputFile in(p.string(), kMaxBatchFileBytes);
    for (std::string line; in.next_line(line, kMaxBatchLineBytes);) {
      if (line.find(id) == std::string::npos) continue;
      std::optional<json> j = parse_line(line, in.path(), in.line());
      if (!j || !j->is_object()) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!in.at_end() && warned_.insert(in.path() + ":" + std::to_string(in.line())).second)
          std::cerr << "kforge: " << in.path() << ":" << in.line()
                    << ": not a batch output line (skipped)\n";
        continue;
      }
      if (!j->contains("custom_id") || !(*j)["custom_id"].is_string())
        throw InputError(in.path(), in.line(), "custom_id", "must be a string");
      if ((*j)["custom_id"] != id) continue;
      check_answer(*j, in.path(), in.line());
      std::string here = in.path() + ":" + std::to_string(in.line());
      if (!found) {
        found = std::move(*j);
        found_at = here;
      } else if (what_it_says(*found) != what_it_says(*j)) {
        throw InputError(in.path(), in.line(), "custom_id",
                         id + " is answered differently here and in " + found_at +
                             "; remove one of the two answers");
      }
    }
  }
  return found;
}

ChatResponse BatchExchange::chat(const ChatRequest& request, int sample) const {
  std::string id = custom_id(request, sample);
  auto t0 = std::chrono::steady_clock::now();
  if (std::optional<json> a = find_answer(id); !a) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (written_.insert(id).second) {
      json line = endpoint_.provider == Provider::Anthropic
                      ? json{{"custom_id", id}, {"params", body(request)}}
                      : json{{"custom_id", id},
                             {"method", "POST"},
                             {"url", "/v1/chat/completions"},
                             {"body", body(request)}};
      append_request(line.dump() + "\n");
    }
  }
  for (;;) {
    if (std::optional<json> a = find_answer(id)) {
      ChatResponse r = read_answer(id, *a);
      r.latency_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      r.attempts = 1;
      return r;
    }
    if (cancelled_)
      throw LlmError(LlmError::Kind::Unanswered, 0,
                     "the run stopped before " + id + " was answered");
    auto now = std::chrono::steady_clock::now();
    if (now - t0 >= wait_)
      throw LlmError(LlmError::Kind::Unanswered, 0,
                     "no answer to " + id + " in " + dir_.string() + " after " +
                         std::to_string(wait_.count() / 1000) + " s");
    if (report_ && now - t0 >= report_every_) {  // one report per `every`, across threads
      int64_t now_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
      int64_t last = last_report_ms_.load();
      if ((last < 0 || now_ms - last >= report_every_.count()) &&
          last_report_ms_.compare_exchange_strong(last, now_ms))
        report_({unanswered(), std::chrono::duration<double>(now - t0).count(),
                 std::chrono::duration<double>(wait_).count(), dir_});
    }
    std::this_thread::sleep_for(poll_);
  }
}

// Appends to requests.jsonl, never through a symbolic link nor into a FIFO or device.
void BatchExchange::append_request(const std::string& line) const {
  int fd = ::open(requests_.c_str(),
                  O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  struct stat st {};
  if (fd < 0 && errno == ELOOP)
    throw InputError(requests_.string(), std::nullopt, "",
                     "a symbolic link: kforge writes its requests only to a plain file");
  if (fd >= 0 && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    ::close(fd);
    throw InputError(requests_.string(), std::nullopt, "",
                     "not a regular file: kforge writes its requests only to a plain file");
  }
  if (fd < 0) throw Error("cannot append to " + requests_.string() + ": " + std::strerror(errno));
  for (size_t done = 0; done < line.size();) {
    ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw Error("cannot append to " + requests_.string() + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

int BatchExchange::unanswered() const {
  std::set<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ids = written_;
  }
  int n = 0;
  for (const std::string& id : ids) n += find_answer(id) ? 0 : 1;
  return n;
}

}  // namespace kforge::evolve
