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

#include "json_lines.h"
#include "kforge/common/error.h"
#include "kforge/common/json_limits.h"
#include "kforge/common/process.h"
#include "kforge/common/strings.h"

namespace kforge::evolve {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using wire::quoted;

// Connections accepted that have not said hello yet; past it, the oldest is closed.
constexpr size_t kMaxPendingConnections = 128;
// Hellos with the token that name no worker, kept for the error when none starts.
constexpr size_t kMaxStrayNotes = 5;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
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

// Compares in time that does not depend on where they differ (the length is no secret).
bool same_token(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// A line as a reason quotes it: printable, cut at 120 bytes.
std::string shown(std::string_view line) {
  return printable(line.substr(0, 120)) + (line.size() > 120 ? "..." : "");
}

// msg[key], or the problem "key: missing".
const json* member(const json& msg, const char* key, std::string& problem) {
  auto it = msg.find(key);
  if (it != msg.end()) return &*it;
  problem = std::string(key) + ": missing";
  return nullptr;
}

// `check(value)`, or the problem when the check itself failed (it must not throw).
std::string checked(const WorkerCheck& check, const json& value) {
  if (!check) return "";
  try {
    return check(value);
  } catch (const std::exception& e) {
    return std::string("its check failed: ") + e.what();
  }
}

}  // namespace

HelloLine read_hello(std::string_view line, const std::string& token, int workers) {
  HelloLine h;
  json msg;
  try {
    msg = parse_json_bounded(line, "hello", kMaxJsonDepth, kMaxHelloBytes);
  } catch (const InputError& e) {
    h.problem = e.problem();
    return h;
  }
  auto t = msg.is_object() ? msg.find("token") : msg.end();
  if (!msg.is_object() || t == msg.end() || !t->is_string() ||
      !same_token(t->get_ref<const std::string&>(), token)) {
    h.problem = "not a hello with the pool's token";
    return h;
  }
  h.has_token = true;
  msg.erase("token");
  const json* op = member(msg, "op", h.problem);
  if (op && *op != "hello") h.problem = "op: " + quoted(*op) + " is not \"hello\"";
  std::string worker_problem;
  if (const json* w = member(msg, "worker", worker_problem)) {
    if (w->is_number_unsigned() && w->get<uint64_t>() < static_cast<uint64_t>(workers))
      h.worker = static_cast<int>(w->get<uint64_t>());
    else
      worker_problem = "worker: " + quoted(*w) + " is not a worker index (0 to " +
                       std::to_string(workers - 1) + ")";
  }
  if (h.problem.empty()) h.problem = worker_problem;
  h.hello = std::move(msg);
  return h;
}

ResultLine read_result(std::string_view line, int64_t id) {
  ResultLine r;
  json msg;
  try {
    msg = parse_json_bounded(line, "result", kMaxJsonDepth, kMaxLineBytes);
  } catch (const InputError& e) {
    r.problem = e.problem();
    return r;
  }
  if (!msg.is_object()) {
    r.problem = "not a JSON object";
    return r;
  }
  const json* op = member(msg, "op", r.problem);
  if (!op) return r;
  if (*op != "result") {
    r.problem = "op: " + quoted(*op) + " is not \"result\"";
    return r;
  }
  const json* got = member(msg, "id", r.problem);
  if (!got) return r;
  if (!got->is_number_integer() ||
      (got->is_number_unsigned() && got->get<uint64_t>() > INT64_MAX) ||
      got->get<int64_t>() != id) {
    r.problem =
        "id: " + quoted(*got) + " is not " + std::to_string(id) + ", the id of the job it holds";
    return r;
  }
  if (member(msg, "answer", r.problem)) r.answer = std::move(msg["answer"]);
  return r;
}

struct WorkerPool::Impl {
  struct Job {
    int64_t id = 0;
    std::string line;  // {"op":"job",...}, written in submit()
    std::chrono::milliseconds deadline{0};
    WorkerCheck check;
    int attempts = 0;
    std::promise<JobResult> promise;
  };
  struct Worker {
    WorkerState state;
    Process process;  // when this pool started it
    int fd = -1;
    LineSplitter lines{kMaxLineBytes};
    std::shared_ptr<Job> job;  // the job it holds
    Clock::time_point due;
    Clock::time_point given{};  // when it was last given a job
  };
  // A connection that has not said hello yet.
  struct Pending {
    int fd = -1;
    LineSplitter lines{kMaxHelloBytes};
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
  std::vector<std::string> strays;  // hellos with the token that named no worker waiting for one
  int closed_without_token = 0;     // connections closed before a hello with the token

  void listen_on(const std::string& host) {
    listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = 0;
    if (listen_fd < 0 || ::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1 ||
        ::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd, 64) != 0)
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
        job->promise.set_value({nullptr,
                                "no answer: " + std::to_string(job->attempts) +
                                    " worker(s) failed on this job (the last: " + why + ")",
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
        if (auto status = w.process.wait_exit(std::chrono::milliseconds(200)))
          why = "it ended (" + describe_exit(*status) + ")";
      take_out(w, why);
      return;
    }
    w.lines.append(buf, static_cast<size_t>(n));
    while (w.state.alive)
      if (std::optional<std::string> line = w.lines.next())
        answer_from(w, *line);
      else
        break;
    if (w.state.alive && w.lines.over_limit())
      take_out(w, "it sent what the protocol does not allow: a line longer than " +
                      std::to_string(w.lines.max_bytes()) + " bytes");
  }

  // One line from worker `w`: the answer to the job it holds, or it is taken out.
  void answer_from(Worker& w, const std::string& line) {
    if (!w.job)
      return take_out(w, "it sent what the protocol does not allow: " + shown(line) +
                             ": a line while it held no job");
    ResultLine r = read_result(line, w.job->id);
    if (r.problem.empty()) r.problem = checked(w.job->check, r.answer);
    if (!r.problem.empty())
      return take_out(
          w, "it sent what the protocol does not allow: " + shown(line) + ": " + r.problem);
    std::shared_ptr<Job> job = std::move(w.job);
    w.job.reset();
    ++w.state.jobs_done;
    job->promise.set_value({std::move(r.answer), std::nullopt, w.state.index, job->attempts});
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
      if (!write_line(idle->fd, job->line)) take_out(*idle, "its connection closed");
    }
  }

  void fail_queue_if_no_worker() {
    for (const Worker& w : workers)
      if (w.state.alive) return;
    for (auto& job : queue)
      job->promise.set_value({nullptr, "no answer: no worker is left", -1, job->attempts});
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
          auto left =
              std::chrono::duration_cast<std::chrono::milliseconds>(w.due - Clock::now()).count();
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
          take_out(w, "it overran a job's deadline of " + std::to_string(w.job->deadline.count()) +
                          " ms (hung)");
    }
  }

  // A worker that will not be: `why` is its reason; one this pool started is killed.
  void refuse(Worker& w, const std::string& why) {
    w.state.out_reason = why;
    if (w.process.running()) w.process.kill();
  }

  bool waiting_for_hello(const Worker& w) const { return w.fd < 0 && w.state.out_reason.empty(); }

  // A connection's first line: the hello of a worker waiting for one, or the connection is closed.
  // Only a hello with the token is heard further: it may take out the worker it names, or be noted.
  void hear_hello(int fd, const std::string& line, const std::string& rest) {
    HelloLine h = read_hello(line, token, options.workers);
    Worker* w = h.worker >= 0 ? &workers[static_cast<size_t>(h.worker)] : nullptr;
    if (h.problem.empty() && !waiting_for_hello(*w))
      h.problem = "a second hello for worker " + std::to_string(h.worker);
    if (h.problem.empty()) h.problem = checked(options.check_hello, h.hello);
    if (!h.problem.empty()) {
      ::close(fd);
      if (!h.has_token) {  // an outsider's, or garbage
        ++closed_without_token;
        return;
      }
      if (w && waiting_for_hello(*w))
        refuse(*w, "its hello: " + h.problem);
      else if (strays.size() < kMaxStrayNotes)
        strays.push_back("a connection with the pool's token: its hello: " + h.problem);
      return;
    }
    w->fd = fd;
    w->lines.append(rest.data(), rest.size());
    w->state.hello = std::move(h.hello);
    w->state.alive = true;
  }

  // Reads from a connection that has not said hello; false once it is closed or a worker's.
  bool read_pending(Pending& p) {
    char chunk[4096];
    ssize_t n = ::recv(p.fd, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n > 0) p.lines.append(chunk, static_cast<size_t>(n));
    std::optional<std::string> line = n > 0 ? p.lines.next() : std::nullopt;
    if (!line) {
      if (n > 0 && !p.lines.over_limit()) return true;
      if (n > 0 || !p.lines.rest().empty())
        ++closed_without_token;  // it sent more than a hello without a newline
      close_fd(p.fd);            // or it closed
      return false;
    }
    hear_hello(p.fd, *line, p.lines.rest());
    p.fd = -1;
    return false;
  }

  // Accepts connections until every worker said hello or the time is up.
  void await_hellos() {
    const auto until = Clock::now() + options.connect_timeout;
    std::deque<Pending> pending;
    auto waiting = [&] {
      for (const Worker& w : workers)
        if (waiting_for_hello(w)) return true;
      return false;
    };
    while (waiting() && Clock::now() < until) {
      std::vector<pollfd> fds = {{listen_fd, POLLIN, 0}};
      for (const Pending& p : pending) fds.push_back({p.fd, POLLIN, 0});
      ::poll(fds.data(), fds.size(), 100);
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_pending(pending[i - 1]);
      std::erase_if(pending, [](const Pending& p) { return p.fd < 0; });
      if (fds[0].revents & POLLIN) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          if (pending.size() >= kMaxPendingConnections) {
            close_fd(pending.front().fd);
            pending.pop_front();
          }
          pending.push_back({fd, LineSplitter(kMaxHelloBytes)});
        }
      }
      for (Worker& w : workers)  // a local worker that ended before its hello
        if (waiting_for_hello(w) && w.process.pid() > 0)
          if (auto status = w.process.wait_exit(std::chrono::milliseconds(0)))
            w.state.out_reason = "it ended before it said hello (" + describe_exit(*status) + ")";
    }
    for (Pending& p : pending) close_fd(p.fd);
    for (Worker& w : workers)
      if (waiting_for_hello(w))
        refuse(w, "no hello with the pool's token came from it within " +
                      std::to_string(options.connect_timeout.count()) + " ms" +
                      (closed_without_token
                           ? " (" + std::to_string(closed_without_token) +
                                 " connection(s) were closed for a first line that was not a hello "
                                 "with the token: over 64 KiB, not JSON, or without the token as a "
                                 "string)"
                           : ""));
  }
};

WorkerPool::WorkerPool(WorkerPoolOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  p.options = std::move(options);
  if (p.options.workers < 1) throw UsageError("the worker pool needs at least one worker");
  if (p.options.command.empty()) throw UsageError("the worker pool needs a worker command");
  p.listen_on(p.options.host);
  if (::pipe2(p.wake, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error(std::string("pipe: ") + std::strerror(errno));
  p.workers.resize(static_cast<size_t>(p.options.workers));
  for (int i = 0; i < p.options.workers; ++i) {
    Impl::Worker& w = p.workers[i];
    w.state.index = i;
    SpawnOptions s;
    for (const std::string& arg : p.options.command)
      s.argv.push_back(replace_all(
          replace_all(replace_all(arg, "{address}", p.address), "{worker}", std::to_string(i)),
          "{token}", p.token));
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
  close_fd(p.listen_fd);  // every worker said hello or was taken out: nothing more may connect
  if (alive() == 0) {
    std::string why;
    for (const Impl::Worker& w : p.workers)
      why += "\n  worker " + std::to_string(w.state.index) + ": " + w.state.out_reason;
    for (const std::string& stray : p.strays) why += "\n  " + stray;
    throw WorkerError("no worker of the pool started (" + p.address + "):" + why);
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
    if (w.job)
      w.job->promise.set_value(
          {nullptr, "no answer: the pool was shut down", w.state.index, w.job->attempts});
    close_fd(w.fd);  // a worker ends when its connection closes; the rest are killed
    if (w.process.pid() > 0 && !w.process.wait_exit(std::chrono::milliseconds(500)))
      w.process.kill();
  }
  for (auto& job : p.queue)
    job->promise.set_value({nullptr, "no answer: the pool was shut down", -1, job->attempts});
  close_fd(p.listen_fd);
  close_fd(p.wake[0]);
  close_fd(p.wake[1]);
}

std::future<JobResult> WorkerPool::submit(nlohmann::json job, std::chrono::milliseconds deadline,
                                          WorkerCheck check_answer) {
  auto j = std::make_shared<Impl::Job>();
  j->deadline = deadline;
  j->check = std::move(check_answer);
  std::future<JobResult> f = j->promise.get_future();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    j->id = impl_->next_id++;
  }
  // Written here: a job that cannot be (a string that is not UTF-8) is the caller's exception, not
  // the scheduler's.
  j->line = json{{"op", "job"}, {"id", j->id}, {"job", std::move(job)}}.dump();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
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

std::string WorkerPool::address() const {
  return impl_->address;
}

}  // namespace kforge::evolve
