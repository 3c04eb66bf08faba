// A loopback LLM endpoint for the tests: a real HTTP server (cpp-httplib) on 127.0.0.1 that answers
// OpenAI chat completions with whatever the test says, remembers what it was asked, and makes the
// LlmProposer that talks to it. Used by the loop's CPU tests (test_evolve.cpp) and its GPU test
// (gpu/test_loop_exploits.cpp).
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kforge/evolve/llm.h"
#include "kforge/evolve/proposer.h"
#include "test_util.h"

namespace kforge::test {

class LoopbackModel {
 public:
  // `answer` gets each request's prompt (its last message) and returns the model's answer, or
  // nullopt for an endpoint that is down (a 500). It runs on the server's threads.
  using Answer = std::function<std::optional<std::string>(const std::string& prompt)>;
  // The usage an answer reports (prompt tokens, completion tokens); without one, 1000 and 500.
  using Usage = std::function<std::pair<int64_t, int64_t>(const std::string& prompt,
                                                          const std::string& answer)>;

  explicit LoopbackModel(Answer answer, std::string model = "scripted", Usage usage = nullptr)
      : model_(std::move(model)) {
    server_.Post(".*", [this, answer = std::move(answer), usage = std::move(usage)](
                           const httplib::Request& req, httplib::Response& res) {
      std::string prompt =
          nlohmann::json::parse(req.body)["messages"].back()["content"].get<std::string>();
      std::optional<std::string> text = answer(prompt);
      if (!text) {
        res.status = 500;
        res.set_content("{\"error\": \"overloaded\"}", "application/json");
        return;
      }
      std::pair<int64_t, int64_t> tokens =
          usage ? usage(prompt, *text) : std::pair<int64_t, int64_t>{1000, 500};
      {
        std::lock_guard<std::mutex> lock(mutex_);
        prompts_.push_back(prompt);
        requests_.push_back(nlohmann::json::parse(req.body));
      }
      nlohmann::json reply = {
          {"model", model_},
          {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", *text}}}}}},
          {"usage", {{"prompt_tokens", tokens.first}, {"completion_tokens", tokens.second}}}};
      res.set_content(reply.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LoopbackModel() {
    server_.stop();
    thread_.join();
  }
  LoopbackModel(const LoopbackModel&) = delete;
  LoopbackModel& operator=(const LoopbackModel&) = delete;

  // The proposer over an LlmClient of this endpoint, its responses cached in folder `cache`.
  // `max_attempts`: 1 for a test where a retried request would be given another answer.
  std::unique_ptr<evolve::LlmProposer> proposer(const std::string& cache,
                                                int max_attempts = 2) const {
    evolve::Endpoint e;
    e.base_url = base_url();
    e.model = model_;
    e.api_key = "sk-test-not-a-real-key";
    evolve::RetryPolicy quick;
    quick.max_attempts = max_attempts;
    quick.base_delay = std::chrono::milliseconds(1);
    auto client = std::make_shared<const evolve::LlmClient>(
        e, quick, nullptr, nullptr, std::make_shared<evolve::ResponseCache>(cache));
    return std::make_unique<evolve::LlmProposer>(client, (source_dir() / "prompts").string(),
                                                 "a test GPU");
  }

  // The prompts answered so far (not those answered with a 500), and their whole requests.
  std::vector<std::string> prompts() {
    std::lock_guard<std::mutex> lock(mutex_);
    return prompts_;
  }
  std::vector<nlohmann::json> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

 private:
  std::string model_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::string> prompts_;
  std::vector<nlohmann::json> requests_;
};

}  // namespace kforge::test
