// `kforge serve`: the archive as web pages and a JSON API, read-only (docs/browse.md).
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace kforge::browse {

// Every route of the web view on `server`: GET pages and their JSON twins under /api/, each request
// on its own read-only connection to the SQLite file at `db_path` (a running `kforge evolve` may be
// writing it). Any other method is refused with 405: there are no write routes.
void add_routes(httplib::Server& server, const std::string& db_path);

// What one client may cost the server (docs/security.md, "The web view").
struct ServeLimits {
  // The whole request (line, headers, any body) arrives within this, counted from when the
  // connection is free for it (accepted, or its previous answer sent): slow or idle clients are
  // cut.
  std::chrono::milliseconds request_deadline{5000};
  std::chrono::milliseconds response_deadline{30000};  // the whole answer is taken within this
  size_t max_request_bytes = 64 * 1024;  // a request's line, headers and body together
  size_t per_client = 16;          // connections of one address served at once; the next ones wait
  size_t waiting_per_client = 64;  // connections of one address waiting their turn; past it, 503
  size_t threads = 64;             // connections served at once in all
};

// httplib's server with ServeLimits: each connection is served by kforge's loop (a deadline for the
// whole request, not httplib's per-read timeout that each byte restarts), and connections are
// counted per client address.
class Server : public httplib::Server {
 public:
  explicit Server(ServeLimits limits = {});
  ~Server() override;

 private:
  struct Client {
    size_t active = 0;              // connections served now
    std::vector<socket_t> waiting;  // accepted, waiting their turn (oldest first)
  };
  bool process_and_close_socket(socket_t sock) override;
  void serve(socket_t sock);  // its requests, then closes it

  ServeLimits limits_;
  std::mutex mutex_;
  std::map<std::string, Client> clients_;  // by address
};

// True when `host` resolves (as bind() resolves it) to loopback addresses only: 127.0.0.0/8, ::1
// (or IPv4-mapped 127/8). A name that resolves to nothing is no loopback address.
bool is_loopback(const std::string& host);

// The numeric address `host` resolves to first (the one to bind, so that the address checked is the
// address served); "" when it resolves to nothing.
std::string resolve_host(const std::string& host);

}  // namespace kforge::browse
