// `kforge serve` against slow and greedy clients (issue 34, docs/security.md "The web view"), over
// real sockets on loopback: a request head has a deadline for the whole of it (a client that sends
// a header line every so often, or nothing, is cut), one client address is served a bounded number
// of connections at once (the others wait their turn, a bounded number of them; past that they are
// answered 503), other addresses are answered meanwhile, a request head's size is bounded, and
// "loopback" is decided by the address the host resolves to, not by how its name begins.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include "kforge/archive/archive.h"
#include "kforge/browse/server.h"
#include "test_util.h"

namespace kforge {
namespace {

using test::TempDir;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A TCP connection to 127.0.0.1:`port` from `source` (any 127.x.y.z address: Linux routes the whole
// 127/8 to loopback, so each is another client address). -1 when it fails.
int connect_from(const std::string& source, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& s) {
  for (size_t at = 0; at < s.size();) {
    ssize_t n = ::send(fd, s.data() + at, s.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

// Whatever the server sends within `wait`, up to its closing the connection: (bytes, closed).
std::pair<std::string, bool> receive(int fd, std::chrono::milliseconds wait) {
  std::string got;
  auto end = Clock::now() + wait;
  for (;;) {  // polls at least once, also when `wait` is 0
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0))) <= 0) {
      if (left <= 0) return {got, false};
      continue;
    }
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {got, true};  // closed (or reset)
    got.append(buf, static_cast<size_t>(n));
  }
}

// The status of GET /api/overview from `source`, answered within `wait`; nothing when it is not.
std::optional<int> status_of_get(const std::string& source, int port,
                                 std::chrono::milliseconds wait) {
  int fd = connect_from(source, port);
  if (fd < 0) return std::nullopt;
  send_all(fd, "GET /api/overview HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  auto [text, closed] = receive(fd, wait);
  ::close(fd);
  if (text.rfind("HTTP/1.1 ", 0) != 0 || !closed) return std::nullopt;
  return std::stoi(text.substr(9, 3));
}

// A server of the routes on an empty archive, on 127.0.0.1, listening until it is destroyed.
class Serving {
 public:
  explicit Serving(const browse::ServeLimits& limits) : server_(limits) {
    db_ = (dir_.path() / "archive.db").string();
    archive::Archive::open(db_);
    browse::add_routes(server_, db_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(5ms);
  }
  ~Serving() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  TempDir dir_;
  std::string db_;
  browse::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// A header line every 250 ms (httplib's read timeout is per read: each line restarted it, so the
// connection held a worker for as long as the client liked), and a connection that sends nothing:
// both are closed at the request deadline.
TEST(ServeLimits, SlowAndIdleConnectionsAreCutAtTheDeadline) {
  browse::ServeLimits limits;
  limits.request_deadline = 1500ms;
  Serving s(limits);
  int slow = connect_from("127.0.0.1", s.port()), idle = connect_from("127.0.0.1", s.port());
  ASSERT_GE(slow, 0);
  ASSERT_GE(idle, 0);
  ASSERT_TRUE(send_all(slow, "GET /api/overview HTTP/1.1\r\nHost: x\r\n"));
  auto t0 = Clock::now();
  std::optional<double> slow_closed, idle_closed;
  for (int tick = 0; Clock::now() - t0 < 6s && !(slow_closed && idle_closed); ++tick) {
    double at = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!slow_closed &&
        (!send_all(slow, "X-a" + std::to_string(tick) + ": b\r\n") || receive(slow, 0ms).second))
      slow_closed = at;
    if (!idle_closed && receive(idle, 0ms).second) idle_closed = at;
    std::this_thread::sleep_for(250ms);
  }
  ::close(slow);
  ::close(idle);
  ASSERT_TRUE(slow_closed) << "a head that never ends was not cut in 6 s";
  EXPECT_LT(*slow_closed, 3.0) << "cut at the 1.5 s deadline";
  ASSERT_TRUE(idle_closed) << "a connection that sends nothing was not closed in 6 s";
  EXPECT_LT(*idle_closed, 3.0);
  EXPECT_EQ(status_of_get("127.0.0.1", s.port(), 2000ms), 200);
}

// The repro: eight slow connections stopped `kforge serve` (httplib's eight workers);
// twelve leave it answering.
TEST(ServeLimits, SlowConnectionsLeaveTheServerAnswering) {
  Serving s(browse::ServeLimits{});
  std::vector<int> slow;
  for (int i = 0; i < 12; ++i) {
    slow.push_back(connect_from("127.0.0.1", s.port()));
    ASSERT_GE(slow.back(), 0);
    send_all(slow.back(), "GET / HTTP/1.1\r\nHost: x\r\n");
  }
  std::this_thread::sleep_for(300ms);
  auto t0 = Clock::now();
  EXPECT_EQ(status_of_get("127.0.0.1", s.port(), 2000ms), 200)
      << "twelve slow connections stopped the server";
  EXPECT_LT(Clock::now() - t0, 1500ms);
  for (int fd : slow) ::close(fd);
}

// One address gets `per_client` connections served at once: the next ones wait their turn (up to
// `waiting_per_client`, then 503 at once), and another address is answered meanwhile.
TEST(ServeLimits, OneAddressWaitsItsTurnOthersAreAnswered) {
  browse::ServeLimits limits;
  limits.request_deadline = 2000ms;
  limits.per_client = 2;
  limits.waiting_per_client = 2;
  Serving s(limits);
  std::vector<int> held;
  for (int i = 0; i < 2; ++i) {  // both of 127.0.0.2's turns, held by slow heads
    held.push_back(connect_from("127.0.0.2", s.port()));
    ASSERT_GE(held.back(), 0);
    send_all(held.back(), "GET / HTTP/1.1\r\nHost: x\r\n");
    std::this_thread::sleep_for(100ms);
  }
  int waiting = connect_from("127.0.0.2", s.port());  // a whole request: it waits for a turn
  ASSERT_GE(waiting, 0);
  send_all(waiting, "GET /api/overview HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::this_thread::sleep_for(100ms);
  held.push_back(connect_from("127.0.0.2", s.port()));  // the second that may wait
  std::this_thread::sleep_for(100ms);
  auto t0 = Clock::now();
  int refused = connect_from("127.0.0.2", s.port());  // one too many
  ASSERT_GE(refused, 0);
  auto [refusal, refusal_closed] = receive(refused, 1000ms);
  EXPECT_EQ(refusal.substr(0, 12), "HTTP/1.1 503") << refusal;
  EXPECT_TRUE(refusal_closed);
  ::close(refused);
  EXPECT_EQ(status_of_get("127.0.0.3", s.port(), 1000ms), 200)
      << "another address waited for 127.0.0.2's";
  EXPECT_LT(Clock::now() - t0, 1500ms);
  auto [early, early_closed] = receive(waiting, 500ms);
  EXPECT_EQ(early, "") << "served while its address had no turn free";
  auto [late, late_closed] = receive(waiting, 4000ms);  // the held heads are cut at 2 s: its turn
  EXPECT_EQ(late.substr(0, 12), "HTTP/1.1 200") << late;
  ::close(waiting);
  for (int fd : held) ::close(fd);
}

// A request head of megabytes (many short header lines; httplib bounds each line, not their number)
// is refused once it passes the bound, not read to its end.
TEST(ServeLimits, RequestHeadSizeIsBounded) {
  Serving s(browse::ServeLimits{});
  int fd = connect_from("127.0.0.1", s.port());
  ASSERT_GE(fd, 0);
  std::string head = "GET /api/overview HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  std::string line = "X-Pad: 0123456789abcdef0123456789abcdef\r\n";
  while (head.size() < (4u << 20)) head += line;
  head += "\r\n";
  std::thread sender([&] {
    send_all(fd, head);
    ::shutdown(fd, SHUT_WR);
  });
  auto [answer, closed] = receive(fd, 10000ms);
  sender.join();
  ::close(fd);
  EXPECT_TRUE(closed);
  EXPECT_NE(answer.substr(0, 12), "HTTP/1.1 200")
      << "a 4 MB request head was read to its end and answered";
  EXPECT_EQ(status_of_get("127.0.0.1", s.port(), 2000ms), 200);
}

// "127.foo.invalid" began like a loopback address and was taken for one; the resolved address
// decides (a name that resolves to nothing is no loopback address).
TEST(ServeLimits, LoopbackIsTheResolvedAddress) {
  EXPECT_FALSE(browse::is_loopback("127.foo.invalid"));
  EXPECT_FALSE(browse::is_loopback("127.0.0.1.invalid"));
  EXPECT_FALSE(browse::is_loopback(""));
  EXPECT_TRUE(browse::is_loopback("127.0.0.1"));
  EXPECT_TRUE(browse::is_loopback("127.8.9.10"));
  EXPECT_TRUE(browse::is_loopback("localhost"));
  EXPECT_TRUE(browse::is_loopback("::1"));
  EXPECT_FALSE(browse::is_loopback("0.0.0.0"));
  EXPECT_FALSE(browse::is_loopback("::"));
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  archive::Archive::open(db);
  test::CliResult r = test::run_kforge("serve --db " + db + " --host 127.foo.invalid --port 18951");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("127.foo.invalid resolves to no address"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kforge
