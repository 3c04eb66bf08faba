// A stand-in for kforge-runner on machines without a GPU: speaks the protocol and misbehaves on
// request, so the judge's watchdog and restart logic are tested for real
// (tests/test_runner_client.cpp). What a run does is chosen by its first launch's kernel index:
//   0 answer ok   1 hang   2 abort()   3 fault (answer, then exit 3)   4 launch error (lives on)
//   5 a line that is not JSON   6 answer ok with ms = number of buffers mapped
// Flags: --no-ready (never says ready), --protocol N (claims another protocol version).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "kforge/verify/channel.h"
#include "kforge/verify/protocol.h"

using namespace kforge::verify;

int main(int argc, char** argv) {
  int fd = -1, protocol = kProtocolVersion;
  bool ready = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--channel-fd")
      fd = std::stoi(argv[++i]);
    else if (a == "--protocol")
      protocol = std::stoi(argv[++i]);
    else if (a == "--no-ready")
      ready = false;
  }
  Channel ch{UniqueFd(fd)};
  if (!ready) std::this_thread::sleep_for(std::chrono::hours(1));
  ch.send({{"op", "ready"}, {"protocol", protocol}, {"pid", ::getpid()}});
  size_t mapped = 0;
  Message m;
  while (ch.receive(m, std::chrono::hours(1)) == Received::Message) {
    std::string op = m.body.value("op", "");
    if (op == "buffers") {
      mapped = m.fds.size();
      ch.send({{"op", "buffers"}, {"ok", m.fds.size() == m.body["buffers"].size()}});
    } else if (op == "module") {
      bool bad = m.body["kernels"].at(0) == "bad";
      nlohmann::json reply{{"op", "module"}, {"ok", !bad}};
      if (bad)
        reply["error"] = "CUDA_ERROR_NOT_FOUND",
        reply["message"] = "finding kernel bad: named symbol not found";
      ch.send(reply);
    } else if (op == "run") {
      RunRequest q = run_request_from_json(m.body);
      int behaviour = q.launches.empty() ? 0 : q.launches[0].kernel;
      RunReply r;
      r.ok = true;
      switch (behaviour) {
        case 1:
          std::this_thread::sleep_for(std::chrono::hours(1));
          break;
        case 2:
          std::abort();
        case 3:
          r = RunReply{false,
                       "sync",
                       -1,
                       "CUDA_ERROR_ILLEGAL_ADDRESS",
                       "waiting for the kernels: an illegal memory access",
                       0};
          ch.send(to_json(r));
          return 3;
        case 4:
          r = RunReply{
              false, "launch", 0, "CUDA_ERROR_INVALID_VALUE", "launching: invalid argument", 0};
          break;
        case 5: {
          std::string junk = "this is not json\n";
          (void)!::write(ch.fd(), junk.data(), junk.size());
          continue;
        }
        case 6:
          r.ms = static_cast<double>(mapped);
          break;
        default:
          break;
      }
      ch.send(to_json(r));
    } else if (op == "exit") {
      return 0;
    }
  }
  return 0;
}
