// The GPU workers' wire (worker_pool.h): one JSON object per line over a stream socket. Shared by
// the pool (the parent's side) and serve_gpu_jobs (the worker's side).
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <string>

namespace kforge::evolve {

// Writes the whole line and its newline, or returns false (the peer is gone).
inline bool send_line(int fd, const std::string& line) {
  std::string data = line + "\n";
  for (size_t done = 0; done < data.size();) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace kforge::evolve
