// `kforge serve`: the archive as web pages and a JSON API, read-only (docs/browse.md).
#pragma once

#include <httplib.h>

#include <string>

namespace kforge::browse {

// Every route of the web view on `server`: GET pages and their JSON twins under /api/, each request
// on its own read-only connection to the SQLite file at `db_path` (a running `kforge evolve` may be
// writing it). Any other method is refused with 405: there are no write routes.
void add_routes(httplib::Server& server, const std::string& db_path);

// True for 127.0.0.0/8, ::1 and "localhost": the addresses `kforge serve` binds without --public.
bool is_loopback(const std::string& host);

}  // namespace kforge::browse
