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
    throw InputError(file, n, "", "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// The answer line's shape (the Batch API's output format); InputError naming the file, line and
// field otherwise. An answer with an error, or a status other than 200, is a failed call later.
void check_answer(const json& j, const std::string& file, int n) {
  auto fail = [&](const std::string& field, const std::string& problem) { throw InputError(file, n, field, problem); };
  if (j.contains("error") && !j["error"].is_null()) return;
  if (!j.contains("response")) fail("response", "missing (an answer has a response or an error)");
  const json& r = j["response"];
  if (!r.is_object()) fail("response", "must be an object { status_code, body }");
  if (!r.contains("status_code") || !r["status_code"].is_number_integer() || r["status_code"].get<int64_t>() < 0 ||
      r["status_code"].get<int64_t>() > 999)
    fail("response.status_code", "must be an HTTP status, a whole number like 200");
  if (r["status_code"].get<int>() == 200 && (!r.contains("body") || !r["body"].is_object()))
    fail("response.body", "must be an object (a chat completion)");
}

}  // namespace

BatchExchange::BatchExchange(fs::path dir, std::string model, std::chrono::milliseconds wait,
                             std::chrono::milliseconds poll)
    : dir_(std::move(dir)), requests_(dir_ / "requests.jsonl"), model_(std::move(model)), wait_(wait), poll_(poll) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw UsageError("--model batch:" + dir_.string() + ": cannot create the folder: " + ec.message());
  // Requests written by an earlier process (a resumed run) are not written again.
  struct stat st {};
  if (::lstat(requests_.c_str(), &st) != 0) return;
  if (!S_ISREG(st.st_mode))
    throw InputError(requests_.string(), std::nullopt, "",
                     "not a regular file (a link, folder, FIFO or device): kforge writes its requests only to a "
                     "plain file");
  InputFile in(requests_.string(), kMaxBatchFileBytes);
  for (std::string line; in.next_line(line, kMaxBatchLineBytes);) {
    std::optional<json> j = parse_line(line, in.path(), in.line());
    if (j && j->is_object() && j->contains("custom_id") && (*j)["custom_id"].is_string())
      written_.insert((*j)["custom_id"].get<std::string>());
  }
}

std::string BatchExchange::custom_id(const ChatRequest& request, int sample) const {
  json key = {{"body", openai_chat_body(model_, request)}, {"sample", sample}};
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
    if (it->path().extension() == ".jsonl" && it->path().filename() != requests_.filename()) files.push_back(it->path());
  if (ec) throw InputError(dir_.string(), std::nullopt, "", "cannot list the batch folder: " + ec.message());
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
          std::cerr << "kforge: " << in.path() << ":" << in.line() << ": not a batch output line (skipped)\n";
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
      } else if (found->value("response", json()) != j->value("response", json()) ||
                 found->value("error", json()) != j->value("error", json())) {
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
      json line = {{"custom_id", id}, {"method", "POST"}, {"url", "/v1/chat/completions"},
                   {"body", openai_chat_body(model_, request)}};
      append_request(line.dump() + "\n");
    }
  }
  for (;;) {
    if (std::optional<json> a = find_answer(id)) {
      if (a->contains("error") && !(*a)["error"].is_null())
        throw LlmError(LlmError::Kind::Http, 0, "batch answer " + id + " is an error: " + (*a)["error"].dump());
      const json& response = (*a)["response"];
      int status = response["status_code"].get<int>();  // check_answer: 0 to 999
      if (status != 200)
        throw LlmError(LlmError::Kind::Http, status, "batch answer " + id + " has status " + std::to_string(status));
      ChatResponse r = parse_reply(Provider::OpenAI, response["body"].dump());
      r.latency_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      r.attempts = 1;
      return r;
    }
    if (cancelled_) throw LlmError(LlmError::Kind::Unanswered, 0, "the run stopped before " + id + " was answered");
    if (std::chrono::steady_clock::now() - t0 >= wait_)
      throw LlmError(LlmError::Kind::Unanswered, 0,
                     "no answer to " + id + " in " + dir_.string() + " after " + std::to_string(wait_.count() / 1000) + " s");
    std::this_thread::sleep_for(poll_);
  }
}

// Appends to requests.jsonl, never through a symbolic link nor into a FIFO or device.
void BatchExchange::append_request(const std::string& line) const {
  int fd = ::open(requests_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  struct stat st {};
  if (fd < 0 && errno == ELOOP)
    throw InputError(requests_.string(), std::nullopt, "", "a symbolic link: kforge writes its requests only to a plain file");
  if (fd >= 0 && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    ::close(fd);
    throw InputError(requests_.string(), std::nullopt, "", "not a regular file: kforge writes its requests only to a plain file");
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
