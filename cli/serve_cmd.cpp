// `kforge serve`: the archive in a web browser, read-only (docs/browse.md).
#include <csignal>
#include <iostream>

#include "command_list.h"
#include "commands.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/location.h"
#include "kforge/browse/server.h"
#include "kforge/common/error.h"

namespace kforge::cli {
namespace {

struct ServeArgs {
  std::string db, host = "127.0.0.1";
  int port = 8737;
  bool allow_remote = false;
};

browse::Server* running = nullptr;

int run_serve(const ServeArgs& a) {
  std::string path = archive::database_path(a.db).string();
  archive::Archive::open_read_only(path);  // a missing or old archive: its error now, not per page
  // Decided on the address the host resolves to, and that address is the one bound: "127.x.invalid"
  // is a name like any other.
  std::string address = browse::resolve_host(a.host);
  if (address.empty())
    throw UsageError("kforge serve: --host " + a.host +
                     " resolves to no address (give an address of this machine, e.g. 127.0.0.1)");
  if (!browse::is_loopback(address)) {
    if (!a.allow_remote)
      throw UsageError("kforge serve: --host " + a.host +
                       " is not a loopback address; the archive holds kernel sources "
                       "and run configurations: pass --allow-remote to serve it to other machines");
    std::cerr << "kforge serve: WARNING: serving " << path << " on " << a.host
              << (address != a.host ? " (" + address + ")" : "")
              << ", reachable from other machines, without authentication\n";
  }
  browse::Server
      server;  // request deadlines and a bound per client (docs/security.md, "The web view")
  browse::add_routes(server, path);
  if (!server.bind_to_port(address, a.port))
    throw UsageError("kforge serve: cannot listen on " + a.host + ":" + std::to_string(a.port) +
                     " (in use, or not this machine's)");
  std::cout << "kforge serve: " << path << " (read-only) at http://"
            << (address.find(':') != std::string::npos ? "[" + address + "]" : address) << ":"
            << a.port << "/  (Ctrl-C stops)" << std::endl;
  running = &server;
  std::signal(SIGINT, [](int) { running->stop(); });
  std::signal(SIGTERM, [](int) { running->stop(); });
  server.listen_after_bind();
  running = nullptr;
  return kExitOk;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", command_description("serve"));
  cmd->add_option("--db", a->db,
                  "Archive database (default: $KFORGE_DB, then $XDG_DATA_HOME/kforge/archive.db)");
  cmd->add_option("--port", a->port, "Port to listen on")->check(CLI::Range(1, 65535));
  cmd->add_option("--host", a->host, "Address to listen on (loopback unless --allow-remote)");
  cmd->add_flag("--allow-remote", a->allow_remote,
                "Allow an address other machines can reach (prints a warning)");
  cmd->callback([a, &exit_code] { exit_code = run_serve(*a); });
}

}  // namespace kforge::cli
