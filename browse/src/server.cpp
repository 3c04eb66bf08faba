#include "kforge/browse/server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include "html.h"
#include "kforge/common/error.h"
#include "pages.h"

namespace kforge::browse {
namespace {

using nlohmann::json;

// Serves one page at `path` and its data at /api`path`; `make` builds it from a fresh read-only
// connection (SQLite connections are not shared between the server's threads).
void route(httplib::Server& server, const std::string& db_path, const std::string& path,
           std::function<View(archive::Archive&, const httplib::Request&)> make) {
  auto handle = [db_path, make](bool api) {
    return [db_path, make, api](const httplib::Request& req, httplib::Response& res) {
      View v;
      try {
        archive::Archive ar = archive::Archive::open_read_only(db_path);
        v = make(ar, req);
      } catch (const std::exception& e) {
        v = {{{"error", e.what()}}, page("Error", "<p>" + escape(e.what()) + "</p>"), 500};
      }
      res.status = v.status;
      res.set_header(
          "Content-Security-Policy",
          "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'");
      res.set_header("X-Content-Type-Options", "nosniff");
      if (api)
        res.set_content(v.data.dump(2, ' ', false, json::error_handler_t::replace),
                        "application/json");
      else
        res.set_content(v.html, "text/html; charset=utf-8");
    };
  };
  server.Get(path, handle(false));
  server.Get("/api" + (path == "/" ? std::string("/overview") : path), handle(true));
}

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

// Each address `host` resolves to, as bind() would resolve it (a number, or a name).
std::vector<sockaddr_storage> resolve(const std::string& host) {
  std::vector<sockaddr_storage> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (host.empty() || ::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
  for (addrinfo* a = found; a; a = a->ai_next) {
    sockaddr_storage s{};
    std::memcpy(&s, a->ai_addr, std::min<size_t>(a->ai_addrlen, sizeof s));
    out.push_back(s);
  }
  ::freeaddrinfo(found);
  return out;
}

bool loopback(const sockaddr_storage& s) {
  if (s.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in&>(s).sin_addr.s_addr) >> 24) == 127;
  if (s.ss_family != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(s).sin6_addr;
  if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
  return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
}

std::string numeric(const sockaddr_storage& s) {
  char host[NI_MAXHOST];
  socklen_t len = s.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&s), len, host, sizeof host, nullptr, 0,
                    NI_NUMERICHOST) != 0)
    return "";
  return host;
}

// Whom a connection is counted against: its peer's address; for IPv6 its /64 (one host's usual
// share, whose addresses it may use freely); an IPv4-mapped peer as IPv4.
std::string client_of(socket_t sock) {
  sockaddr_storage s{};
  socklen_t len = sizeof s;
  if (::getpeername(sock, reinterpret_cast<sockaddr*>(&s), &len) != 0) return "?";
  if (s.ss_family == AF_INET6) {
    sockaddr_in6& a = reinterpret_cast<sockaddr_in6&>(s);
    if (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr)) {
      sockaddr_in v4{};
      v4.sin_family = AF_INET;
      std::memcpy(&v4.sin_addr, a.sin6_addr.s6_addr + 12, 4);
      sockaddr_storage mapped{};
      std::memcpy(&mapped, &v4, sizeof v4);
      return numeric(mapped);
    }
    std::memset(a.sin6_addr.s6_addr + 8, 0, 8);
    a.sin6_scope_id = 0;
    return numeric(s) + "/64";
  }
  return numeric(s);
}

// A connection as httplib's request parser reads and writes it: the whole request within its
// deadline and byte bound (httplib's own stream has a timeout per read, which each byte restarts),
// the whole answer within its deadline; every wait ends when the server stops.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, const ServeLimits& limits, const httplib::Server& server)
      : sock_(sock), limits_(limits), server_(server) {}

  // The next request may take until `from` + the request deadline; its answer is timed from its
  // first byte.
  void start_request(Clock::time_point from) {
    read_deadline_ = from + limits_.request_deadline;
    read_left_ = limits_.max_request_bytes;
    write_deadline_.reset();
  }
  // The request was cut: its deadline passed, it was too long, or the server is stopping.
  bool cut() const { return cut_; }

  bool is_readable() const override { return begin_ < end_ || wait(POLLIN, read_deadline_); }
  bool is_writable() const override { return wait(POLLOUT, write_deadline()); }
  ssize_t read(char* ptr, size_t size) override {
    if (read_left_ == 0) return cut_ = true, -1;
    if (begin_ == end_) {
      if (!wait(POLLIN, read_deadline_)) return cut_ = true, -1;
      ssize_t n = ::recv(sock_, buf_, sizeof buf_, 0);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    size_t n = std::min({size, end_ - begin_, read_left_});
    std::memcpy(ptr, buf_ + begin_, n);
    begin_ += n;
    read_left_ -= n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!write_deadline_) write_deadline_ = Clock::now() + limits_.response_deadline;
    if (!wait(POLLOUT, *write_deadline_)) return -1;
    return ::send(sock_, ptr, size, MSG_NOSIGNAL);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  Clock::time_point write_deadline() const {
    return write_deadline_.value_or(Clock::now() + limits_.response_deadline);
  }
  // Until `sock_` is ready for `events` (or closed); false at `deadline` or when the server stops.
  bool wait(short events, Clock::time_point deadline) const {
    for (;;) {
      if (!server_.is_running()) return false;
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{sock_, events, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 200)));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
  }
  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage s{};
    socklen_t len = sizeof s;
    ip.clear();
    port = 0;
    if (get(sock_, reinterpret_cast<sockaddr*>(&s), &len) != 0) return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&s), len, host, sizeof host, serv, sizeof serv,
                      NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(serv);
    }
  }

  socket_t sock_;
  const ServeLimits& limits_;
  const httplib::Server& server_;
  Clock::time_point read_deadline_;
  size_t read_left_ = 0;
  std::optional<Clock::time_point> write_deadline_;
  bool cut_ = false;
  char buf_[4096];
  size_t begin_ = 0, end_ = 0;
};

void close_socket(socket_t sock) {
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

// One connection too many from an address: 503 without reading it (never blocks), then closed.
void refuse(socket_t sock) {
  static const std::string body =
      "kforge serve: too many connections from your address; try again shortly\n";
  static const std::string answer =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 5\r\n"
      "Connection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  (void)!::send(sock, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close_socket(sock);
}

}  // namespace

Server::Server(ServeLimits limits) : limits_(limits) {
  new_task_queue = [threads = std::max<size_t>(limits.threads, 1)] {
    return new httplib::ThreadPool(threads);
  };
  set_payload_max_length(limits.max_request_bytes);
}

Server::~Server() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [who, client] : clients_)
    for (socket_t sock : client.waiting) close_socket(sock);
}

// Called by httplib's accept loop on one of its workers for each accepted connection.
bool Server::process_and_close_socket(socket_t sock) {
  const std::string who = client_of(sock);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Client& c = clients_[who];
    if (c.active >= std::max<size_t>(limits_.per_client, 1)) {
      if (c.waiting.size() >= limits_.waiting_per_client) {
        refuse(sock);
      } else {
        c.waiting.push_back(sock);  // served by this address's next free worker; this one returns
      }
      return true;
    }
    ++c.active;
  }
  for (;;) {
    serve(sock);
    std::lock_guard<std::mutex> lock(mutex_);
    Client& c = clients_[who];
    if (c.waiting.empty()) {
      if (--c.active == 0) clients_.erase(who);
      return true;
    }
    sock = c.waiting.front();
    c.waiting.erase(c.waiting.begin());
  }
}

void Server::serve(socket_t sock) {
  DeadlineStream strm(sock, limits_, *this);
  Clock::time_point free_since = Clock::now();
  for (size_t count = keep_alive_max_count_; count > 0 && is_running(); --count) {
    strm.start_request(free_since);
    if (!strm.is_readable()) break;  // nothing before the deadline: an idle connection
    bool closed = false;
    if (!process_request(strm, count == 1, closed, nullptr) || closed || strm.cut()) break;
    free_since = Clock::now();
  }
  close_socket(sock);
}

bool is_loopback(const std::string& host) {
  std::vector<sockaddr_storage> found = resolve(host);
  return !found.empty() && std::all_of(found.begin(), found.end(), loopback);
}

std::string resolve_host(const std::string& host) {
  std::vector<sockaddr_storage> found = resolve(host);
  return found.empty() ? "" : numeric(found.front());
}

void add_routes(httplib::Server& server, const std::string& db_path) {
  route(server, db_path, "/",
        [](archive::Archive& ar, const httplib::Request&) { return overview(ar); });
  route(server, db_path, "/leaderboard", [](archive::Archive& ar, const httplib::Request& r) {
    return leaderboard(ar, r.get_param_value("suite"), r.get_param_value("device"),
                       r.get_param_value("tag"));
  });
  route(server, db_path, "/tasks",
        [](archive::Archive& ar, const httplib::Request&) { return task_list(ar); });
  route(server, db_path, "/task", [](archive::Archive& ar, const httplib::Request& r) {
    return task_page(ar, r.get_param_value("id"));
  });
  route(server, db_path, R"(/candidate/(\d{1,18}))",
        [](archive::Archive& ar, const httplib::Request& r) {
          return candidate_page(ar, std::stoll(r.matches[1].str()));
        });
  route(server, db_path, "/search", [](archive::Archive& ar, const httplib::Request& r) {
    return search_page(ar, r.get_param_value("q"));
  });
  // No write routes: every other method is refused, whatever the path.
  auto refuse = [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content("kforge serve is read-only\n", "text/plain");
  };
  server.Post(".*", refuse);
  server.Put(".*", refuse);
  server.Patch(".*", refuse);
  server.Delete(".*", refuse);
}

}  // namespace kforge::browse
