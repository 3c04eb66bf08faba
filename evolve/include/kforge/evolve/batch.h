// The batch exchange (`--model batch:DIR`, docs/evolve.md): requests are written to
// DIR/requests.jsonl in the OpenAI Batch API's input format (custom_id, method, url, body), and
// answers are read from any other *.jsonl file in DIR in its output format (custom_id, response:
// status_code and body, error), whenever they appear. For batch APIs at a lower price, air-gapped
// machines, or any client that can read and write files. The custom_id is a hash of the request
// and its sample index, so a resumed run asks again for what is still unanswered and reads what
// was answered: the folder is the record.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>

#include "kforge/evolve/llm.h"

namespace kforge::evolve {

class BatchExchange : public ChatModel {
 public:
  // `model`: the body's "model" and the name recorded with each candidate. `wait`: how long a
  // request waits for its answer before the run pauses (LlmError, Unanswered: `kforge evolve
  // --resume` goes on once it is answered); `poll`: how often DIR is read.
  BatchExchange(std::filesystem::path dir, std::string model,
                std::chrono::milliseconds wait = std::chrono::hours(24),
                std::chrono::milliseconds poll = std::chrono::milliseconds(1000));
  // Requests shaped for `endpoint` (its provider, model and WireOptions; never streamed): an
  // Anthropic endpoint's are Anthropic Message Batches request lines (custom_id, params), read
  // back from its results format (custom_id, result: succeeded/errored/canceled/expired).
  BatchExchange(std::filesystem::path dir, Endpoint endpoint,
                std::chrono::milliseconds wait = std::chrono::hours(24),
                std::chrono::milliseconds poll = std::chrono::milliseconds(1000));

  // Writes the request (once) and waits for its answer. Throws LlmError: Http when the answer's
  // status is not 200 or it carries an error, BadResponse when its body is not a chat completion,
  // Unanswered after `wait` or a cancel(). Throws InputError naming the file and line for what no
  // batch API writes: a .jsonl that is not a regular file (a FIFO, a link to a device) or is over
  // 1 GiB, a line over 64 MiB or nested past 64 levels, an answer line of the wrong shape
  // ("status_code": "200"), two different answers to one request (naming both places).
  ChatResponse chat(const ChatRequest& request, int sample = 0) const override;
  std::string model() const override { return model_; }
  void cancel() const override { cancelled_ = true; }

  // "kf-" and 24 hex digits of the request's hash with the sample.
  std::string custom_id(const ChatRequest& request, int sample) const;
  const std::filesystem::path& requests_file() const { return requests_; }
  // Requests in requests.jsonl with no answer in the folder yet.
  int unanswered() const;

 private:
  std::optional<nlohmann::json> find_answer(const std::string& id) const;
  void append_request(const std::string& line) const;
  std::filesystem::path dir_, requests_;
  std::string model_;
  std::chrono::milliseconds wait_, poll_;
  mutable std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  mutable std::set<std::string> written_;  // custom_ids in requests.jsonl
  mutable std::set<std::string> warned_;   // "file:line" of malformed output lines, said once
};

}  // namespace kforge::evolve
