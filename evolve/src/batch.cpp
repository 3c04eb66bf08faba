#include "kforge/evolve/batch.h"

#include <fstream>
#include <iostream>
#include <thread>

#include "kforge/common/hash.h"

namespace kforge::evolve {

using nlohmann::json;
namespace fs = std::filesystem;

BatchExchange::BatchExchange(fs::path dir, std::string model, std::chrono::milliseconds wait,
                             std::chrono::milliseconds poll)
    : dir_(std::move(dir)), requests_(dir_ / "requests.jsonl"), model_(std::move(model)), wait_(wait), poll_(poll) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw UsageError("--model batch:" + dir_.string() + ": cannot create the folder: " + ec.message());
  // Requests written by an earlier process (a resumed run) are not written again.
  std::ifstream in(requests_);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("custom_id") && j["custom_id"].is_string()) written_.insert(j["custom_id"].get<std::string>());
  }
}

std::string BatchExchange::custom_id(const ChatRequest& request, int sample) const {
  json key = {{"body", openai_chat_body(model_, request)}, {"sample", sample}};
  return "kf-" + content_hash(key.dump()).substr(0, 24);
}

// The answer for `id` in any output file of the folder; malformed lines (a file still being
// written, a broken line) are skipped, each said once.
std::optional<json> BatchExchange::find_answer(const std::string& id) const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const fs::path& p = entry.path();
    if (p.extension() != ".jsonl" || p.filename() == requests_.filename()) continue;
    std::ifstream in(p);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (line.find(id) == std::string::npos) continue;
      json j = json::parse(line, nullptr, false);
      if (!j.is_object() || !j.contains("custom_id")) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (in.peek() != EOF && warned_.insert(p.string() + ":" + std::to_string(n)).second)
          std::cerr << "kforge: " << p.string() << ":" << n << ": not a batch output line (skipped)\n";
        continue;
      }
      if (j["custom_id"] == id) return j;
    }
  }
  return std::nullopt;
}

ChatResponse BatchExchange::chat(const ChatRequest& request, int sample) const {
  std::string id = custom_id(request, sample);
  auto t0 = std::chrono::steady_clock::now();
  if (std::optional<json> a = find_answer(id); !a) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (written_.insert(id).second) {
      json line = {{"custom_id", id}, {"method", "POST"}, {"url", "/v1/chat/completions"},
                   {"body", openai_chat_body(model_, request)}};
      std::ofstream out(requests_, std::ios::app);
      out << line.dump() << "\n" << std::flush;
      if (!out) throw Error("cannot append to " + requests_.string());
    }
  }
  for (;;) {
    if (std::optional<json> a = find_answer(id)) {
      const json& response = (*a)["response"];
      if (a->contains("error") && !(*a)["error"].is_null())
        throw LlmError(LlmError::Kind::Http, 0, "batch answer " + id + " is an error: " + (*a)["error"].dump());
      int status = response.is_object() ? response.value("status_code", 0) : 0;
      if (status != 200 || !response.contains("body"))
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
