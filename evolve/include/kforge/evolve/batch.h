// The batch exchange (`--model batch:DIR`, docs/evolve.md): requests are written to
// DIR/requests.jsonl in a batch API's input format, and answers are read from any other *.jsonl
// file in DIR, whenever they appear. An OpenAI-compatible endpoint's requests are OpenAI Batch API
// lines (custom_id, method, url, body: a chat completions body); an Anthropic endpoint's are
// Message Batches request items (custom_id, params: a Messages body). Answers are read in either
// API's output format whatever the endpoint, told apart line by line: OpenAI's (custom_id,
// response: status_code and body, error) and Anthropic's results (custom_id, result: succeeded with
// a message, errored with an error, canceled, expired). For batch APIs at a lower price, air-gapped
// machines, or any client that can read and write files. The custom_id is a hash of the request's
// body and its sample index, so a resumed run asks again for what is still unanswered and reads
// what was answered: the folder is the record.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "kforge/evolve/llm.h"

namespace kforge::evolve {

// What a request waiting for its answer reports (BatchExchange::on_waiting).
struct BatchWaiting {
  int unanswered = 0;   // requests in the folder with no answer yet
  double waited_s = 0;  // how long this request has waited
  double limit_s = 0;   // when the run pauses (the `wait` given)
  std::filesystem::path dir;
};

class BatchExchange : public ChatModel {
 public:
  // OpenAI Batch API lines for `model` (default WireOptions): `model` is the body's "model" and
  // the name recorded with each candidate. `wait`: how long a request waits for its answer before
  // the run pauses (LlmError, Unanswered: `kforge evolve --resume` goes on once it is answered);
  // `poll`: how often DIR is read.
  BatchExchange(std::filesystem::path dir, std::string model,
                std::chrono::milliseconds wait = std::chrono::hours(24),
                std::chrono::milliseconds poll = std::chrono::milliseconds(1000));
  // Requests shaped for `endpoint` (its provider, model and WireOptions; never streamed): an
  // Anthropic endpoint's are Anthropic Message Batches request lines (custom_id, params). The name
  // recorded with each candidate is the endpoint's spec, "anthropic:MODEL" or "openai:MODEL": the
  // model the requests ask for, as an LLM config's models are recorded. Its API key is not kept.
  BatchExchange(std::filesystem::path dir, Endpoint endpoint,
                std::chrono::milliseconds wait = std::chrono::hours(24),
                std::chrono::milliseconds poll = std::chrono::milliseconds(1000));

  // Writes the request (once) and waits for its answer. Throws LlmError: Http when the answer's
  // status is not 200 or it carries an error, or its result is errored, canceled or expired (a
  // failed call: the request is answered, asking again would get the same); BadResponse when its
  // body is not a chat completion or Messages response; Unanswered after `wait` or a cancel().
  // Throws InputError naming the file and line for what no batch API writes: a .jsonl that is not
  // a regular file (a FIFO, a link to a device) or is over 1 GiB, a line over 64 MiB or nested past
  // 64 levels, an answer line of the wrong shape ("status_code": "200", a result with no type),
  // two different answers to one request (naming both places).
  ChatResponse chat(const ChatRequest& request, int sample = 0) const override;
  std::string model() const override { return model_; }
  void cancel() const override { cancelled_ = true; }

  // Called while requests wait for answers: after `every` of waiting, then at most once per
  // `every` whatever the number of requests waiting (from the threads that wait; set it before the
  // first chat()).
  void on_waiting(std::function<void(const BatchWaiting&)> report,
                  std::chrono::milliseconds every = std::chrono::seconds(60)) const {
    report_ = std::move(report);
    report_every_ = every;
  }

  // "kf-" and 24 hex digits of the hash of the request's body with the sample (a valid custom_id
  // for both APIs: Anthropic's are ^[a-zA-Z0-9_-]{1,64}$).
  std::string custom_id(const ChatRequest& request, int sample) const;
  const std::filesystem::path& requests_file() const { return requests_; }
  // Requests in requests.jsonl with no answer in the folder yet.
  int unanswered() const;

 private:
  nlohmann::json body(const ChatRequest& request) const;  // the request's body as the line holds it
  std::optional<nlohmann::json> find_answer(const std::string& id) const;
  void append_request(const std::string& line) const;
  std::filesystem::path dir_, requests_;
  Endpoint endpoint_;  // its api_key cleared: nothing here needs it
  std::string model_;
  std::chrono::milliseconds wait_, poll_;
  mutable std::atomic<bool> cancelled_{false};
  mutable std::function<void(const BatchWaiting&)> report_;
  mutable std::chrono::milliseconds report_every_{60000};
  mutable std::atomic<int64_t> last_report_ms_{-1};  // steady clock, ms; -1 never
  mutable std::mutex mutex_;
  mutable std::set<std::string> written_;  // custom_ids in requests.jsonl
  mutable std::set<std::string> warned_;   // "file:line" of malformed output lines, said once
};

}  // namespace kforge::evolve
