// A stand-in GPU worker for the worker pool's tests (tests/test_worker_pool.cpp): connects to the
// pool, says hello with the token from $KFORGE_WORKER_TOKEN, and answers each job {"value": V} with
// {"double": 2V, "pid": its pid}, misbehaving on request:
//   --die-after N    exits (status 3) on receiving its Nth job, without answering
//   --hang-after N   never answers its Nth job (nor anything after)
//   --slow-ms M      takes M ms over each job
//   --bad-token      says hello with a wrong token
//   --garbage-after N  answers its Nth job with a line that is not JSON
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  std::string address;
  int worker = 0, die_after = 0, hang_after = 0, slow_ms = 0, garbage_after = 0;
  bool bad_token = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--connect")
      address = next();
    else if (a == "--worker")
      worker = std::stoi(next());
    else if (a == "--die-after")
      die_after = std::stoi(next());
    else if (a == "--hang-after")
      hang_after = std::stoi(next());
    else if (a == "--slow-ms")
      slow_ms = std::stoi(next());
    else if (a == "--garbage-after")
      garbage_after = std::stoi(next());
    else if (a == "--bad-token")
      bad_token = true;
  }
  size_t colon = address.rfind(':');
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &to.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return 2;
  const char* token = std::getenv("KFORGE_WORKER_TOKEN");
  auto say = [&](const std::string& line) {
    return send(fd, (line + "\n").data(), line.size() + 1, MSG_NOSIGNAL) > 0;
  };
  say(nlohmann::json{{"op", "hello"},
                     {"worker", worker},
                     {"token", bad_token ? "wrong"
                               : token   ? token
                                         : ""},
                     {"device", "fake GPU " + std::to_string(worker)}}
          .dump());
  std::string buffer;
  int jobs = 0;
  char chunk[4096];
  for (ssize_t n; (n = recv(fd, chunk, sizeof chunk, 0)) > 0;) {
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
      nlohmann::json job = nlohmann::json::parse(buffer.substr(0, nl));
      buffer.erase(0, nl + 1);
      ++jobs;
      if (jobs == die_after) std::_Exit(3);
      if (jobs == hang_after) std::this_thread::sleep_for(std::chrono::hours(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
      if (jobs == garbage_after) {
        say("this is not JSON");
        continue;
      }
      say(nlohmann::json{
          {"op", "result"},
          {"id", job["id"]},
          {"answer", {{"double", 2 * job["job"]["value"].get<int64_t>()}, {"pid", getpid()}}}}
              .dump());
    }
  }
  return 0;
}
