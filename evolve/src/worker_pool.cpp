#include "kforge/evolve/worker_pool.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "kforge/common/error.h"
#include "kforge/common/process.h"
#include "json_lines.h"

namespace kforge::evolve {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::string random_token() {
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (int i = 0; i < 32; ++i) t += hex[rd() % 16];
  return t;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

struct WorkerPool::Impl {
  struct Job {
    int64_t id = 0;
    json body;
    std::chrono::milliseconds deadline{0};
    int attempts = 0;
    std::promise<JobResult> promise;
  };
  struct Worker {
    WorkerState state;
    Process process;  // when this pool started it
    int fd = -1;
    std::string buffer;
    std::shared_ptr<Job> job;  // the job it holds
    Clock::time_point due;
    Clock::time_point given{};  // when it was last given a job
  };

  WorkerPoolOptions options;
  std::string token = random_token();
  int listen_fd = -1;
  int wake[2] = {-1, -1};  // submit() and the destructor wake the scheduler through it
  std::string address;
  mutable std::mutex mutex;
  std::vector<Worker> workers;
  std::deque<std::shared_ptr<Job>> queue;
  int64_t next_id = 1;
  bool stopping = false;
  std::thread scheduler;

  void listen_on(const std::string& host) {
    listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = 0;
    if (listen_fd < 0 || ::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1 ||
        ::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd, 64) != 0)
      throw Error("the worker pool cannot listen on " + host + ": " + std::strerror(errno));
    socklen_t len = sizeof a;
    ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&a), &len);
    address = host + ":" + std::to_string(ntohs(a.sin_port));
  }

  void take_out(Worker& w, const std::string& why) {
    if (!w.state.alive) return;
    w.state.alive = false;
    w.state.out_reason = why;
    close_fd(w.fd);
    if (w.process.running()) w.process.kill();
    if (std::shared_ptr<Job> job = std::move(w.job)) {
      w.job.reset();
      if (job->attempts >= options.max_attempts)
        job->promise.set_value({nullptr, "no answer: " + std::to_string(job->attempts) + " worker(s) failed on this job (the last: " + why + ")",
                                w.state.index, job->attempts});
      else
        queue.push_front(job);  // first in line again
    }
  }

  // Reads what the worker sent; handles whole lines.
  void read_from(Worker& w) {
    char buf[65536];
    ssize_t n = ::recv(w.fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      std::string why = "its connection closed";
      if (w.process.pid() > 0)
        if (auto status = w.process.wait_exit(std::chrono::milliseconds(200))) why = "it ended (" + describe_exit(*status) + ")";
      take_out(w, why);
      return;
    }
    w.buffer.append(buf, static_cast<size_t>(n));
    for (size_t nl; w.state.alive && (nl = w.buffer.find('\n')) != std::string::npos;) {
      std::string line = w.buffer.substr(0, nl);
      w.buffer.erase(0, nl + 1);
      json msg = json::parse(line, nullptr, false);
      if (msg.is_discarded() || !msg.is_object() || msg.value("op", "") != "result" || !w.job || msg.value("id", int64_t{-1}) != w.job->id) {
        take_out(w, "it sent what the protocol does not allow: " + line.substr(0, 200));
        return;
      }
      std::shared_ptr<Job> job = std::move(w.job);
      w.job.reset();
      ++w.state.jobs_done;
      job->promise.set_value({msg.contains("answer") ? msg["answer"] : json(nullptr), std::nullopt, w.state.index, job->attempts});
    }
  }

  // Gives queued jobs to idle workers, each to the one idle longest since its last job (so that
  // every worker gets work even when fewer jobs than workers are ever queued at once).
  void dispatch() {
    while (!queue.empty()) {
      Worker* idle = nullptr;
      for (Worker& w : workers)
        if (w.state.alive && !w.job && (!idle || w.given < idle->given)) idle = &w;
      if (!idle) return;
      std::shared_ptr<Job> job = queue.front();
      queue.pop_front();
      ++job->attempts;
      idle->job = job;
      idle->given = Clock::now();
      idle->due = idle->given + job->deadline;
      if (!send_line(idle->fd, json{{"op", "job"}, {"id", job->id}, {"job", job->body}}.dump()))
        take_out(*idle, "its connection closed");
    }
  }

  void fail_queue_if_no_worker() {
    for (const Worker& w : workers)
      if (w.state.alive) return;
    for (auto& job : queue) job->promise.set_value({nullptr, "no answer: no worker is left", -1, job->attempts});
    queue.clear();
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      dispatch();
      fail_queue_if_no_worker();
      std::vector<pollfd> fds = {{wake[0], POLLIN, 0}};
      std::vector<Worker*> polled;
      int wait_ms = 1000;
      for (Worker& w : workers) {
        if (!w.state.alive) continue;
        fds.push_back({w.fd, POLLIN, 0});
        polled.push_back(&w);
        if (w.job) {
          auto left = std::chrono::duration_cast<std::chrono::milliseconds>(w.due - Clock::now()).count();
          wait_ms = std::max<int>(0, std::min<int64_t>(wait_ms, left + 1));
        }
      }
      lock.unlock();
      ::poll(fds.data(), fds.size(), wait_ms);
      lock.lock();
      if (fds[0].revents & POLLIN) {
        char drain[64];
        while (::read(wake[0], drain, sizeof drain) > 0) {
        }
      }
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(*polled[i - 1]);
      for (Worker& w : workers)
        if (w.state.alive && w.job && Clock::now() > w.due)
          take_out(w, "it overran a job's deadline of " + std::to_string(w.job->deadline.count()) + " ms (hung)");
    }
  }

  // Accepts connections until every worker said hello or the time is up.
  void await_hellos() {
    const auto until = Clock::now() + options.connect_timeout;
    std::vector<std::pair<int, std::string>> pending;  // accepted, hello not yet read whole
    auto waiting = [&] {
      for (const Worker& w : workers)
        if (w.fd < 0 && w.state.out_reason.empty()) return true;
      return false;
    };
    while (waiting() && Clock::now() < until) {
      std::vector<pollfd> fds = {{listen_fd, POLLIN, 0}};
      for (auto& [fd, buf] : pending) fds.push_back({fd, POLLIN, 0});
      ::poll(fds.data(), fds.size(), 100);
      if (fds[0].revents & POLLIN) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) pending.push_back({fd, ""});
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto& [fd, buf] = pending[i - 1];
        char chunk[4096];
        ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n > 0) buf.append(chunk, static_cast<size_t>(n));
        size_t nl = buf.find('\n');
        if (n > 0 && nl == std::string::npos && buf.size() < 65536) continue;
        json hello = nl == std::string::npos ? json() : json::parse(buf.substr(0, nl), nullptr, false);
        int index = hello.is_object() ? hello.value("worker", -1) : -1;
        bool ok = hello.is_object() && hello.value("op", "") == "hello" && hello.value("token", "") == token && index >= 0 &&
                  index < options.workers && workers[index].fd < 0 && workers[index].state.out_reason.empty();
        if (ok) {
          Worker& w = workers[index];
          w.fd = fd;
          w.buffer = buf.substr(nl + 1);
          hello.erase("token");
          w.state.hello = hello;
          w.state.alive = true;
        } else {
          ::close(fd);  // not one of ours (a wrong token), or a second hello for one index
        }
        fd = -1;
      }
      std::erase_if(pending, [](const auto& p) { return p.first < 0; });
      for (Worker& w : workers)  // a local worker that ended before its hello
        if (w.fd < 0 && w.state.out_reason.empty() && w.process.pid() > 0)
          if (auto status = w.process.wait_exit(std::chrono::milliseconds(0)))
            w.state.out_reason = "it ended before it said hello (" + describe_exit(*status) + ")";
    }
    for (auto& [fd, buf] : pending) ::close(fd);
    for (Worker& w : workers)
      if (w.fd < 0 && w.state.out_reason.empty()) {
        w.state.out_reason = "it did not connect within " + std::to_string(options.connect_timeout.count()) + " ms";
        w.process.kill();
      }
  }
};

WorkerPool::WorkerPool(WorkerPoolOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  p.options = std::move(options);
  if (p.options.workers < 1) throw UsageError("the worker pool needs at least one worker");
  if (p.options.command.empty()) throw UsageError("the worker pool needs a worker command");
  p.listen_on(p.options.host);
  if (::pipe2(p.wake, O_CLOEXEC | O_NONBLOCK) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  p.workers.resize(static_cast<size_t>(p.options.workers));
  for (int i = 0; i < p.options.workers; ++i) {
    Impl::Worker& w = p.workers[i];
    w.state.index = i;
    SpawnOptions s;
    for (const std::string& arg : p.options.command)
      s.argv.push_back(replace_all(replace_all(replace_all(arg, "{address}", p.address), "{worker}", std::to_string(i)), "{token}", p.token));
    s.env = p.options.env;
    s.env.push_back("KFORGE_WORKER_TOKEN=" + p.token);
    s.own_process_group = true;  // a launcher (srun, ssh) and what it starts go together
    try {
      w.process = Process::spawn(s);
    } catch (const std::exception& e) {
      w.state.out_reason = std::string("it could not be started: ") + e.what();
    }
  }
  p.await_hellos();
  if (alive() == 0) {
    std::string why;
    for (const Impl::Worker& w : p.workers) why += "\n  worker " + std::to_string(w.state.index) + ": " + w.state.out_reason;
    close_fd(p.listen_fd);
    throw Error("no worker of the pool started (" + p.address + "):" + why);
  }
  p.scheduler = std::thread([&p] { p.run(); });
}

WorkerPool::~WorkerPool() {
  Impl& p = *impl_;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    p.stopping = true;
  }
  if (p.wake[1] >= 0) (void)!::write(p.wake[1], "x", 1);
  if (p.scheduler.joinable()) p.scheduler.join();
  for (Impl::Worker& w : p.workers) {
    if (w.job) w.job->promise.set_value({nullptr, "no answer: the pool was shut down", w.state.index, w.job->attempts});
    close_fd(w.fd);  // a worker ends when its connection closes; the rest are killed
    if (w.process.pid() > 0 && !w.process.wait_exit(std::chrono::milliseconds(500))) w.process.kill();
  }
  for (auto& job : p.queue) job->promise.set_value({nullptr, "no answer: the pool was shut down", -1, job->attempts});
  close_fd(p.listen_fd);
  close_fd(p.wake[0]);
  close_fd(p.wake[1]);
}

std::future<JobResult> WorkerPool::submit(nlohmann::json job, std::chrono::milliseconds deadline) {
  auto j = std::make_shared<Impl::Job>();
  j->body = std::move(job);
  j->deadline = deadline;
  std::future<JobResult> f = j->promise.get_future();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    j->id = impl_->next_id++;
    impl_->queue.push_back(j);
  }
  (void)!::write(impl_->wake[1], "x", 1);
  return f;
}

std::vector<WorkerState> WorkerPool::workers() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<WorkerState> out;
  for (const Impl::Worker& w : impl_->workers) out.push_back(w.state);
  return out;
}

int WorkerPool::alive() const {
  int n = 0;
  for (const WorkerState& w : workers()) n += w.alive;
  return n;
}

std::string WorkerPool::address() const { return impl_->address; }

}  // namespace kforge::evolve
