#include "kforge/browse/server.h"

#include <functional>

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
      res.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'");
      res.set_header("X-Content-Type-Options", "nosniff");
      if (api)
        res.set_content(v.data.dump(2, ' ', false, json::error_handler_t::replace), "application/json");
      else
        res.set_content(v.html, "text/html; charset=utf-8");
    };
  };
  server.Get(path, handle(false));
  server.Get("/api" + (path == "/" ? std::string("/overview") : path), handle(true));
}

}  // namespace

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

void add_routes(httplib::Server& server, const std::string& db_path) {
  route(server, db_path, "/", [](archive::Archive& ar, const httplib::Request&) { return overview(ar); });
  route(server, db_path, "/leaderboard", [](archive::Archive& ar, const httplib::Request& r) {
    return leaderboard(ar, r.get_param_value("suite"), r.get_param_value("device"), r.get_param_value("tag"));
  });
  route(server, db_path, "/tasks", [](archive::Archive& ar, const httplib::Request&) { return task_list(ar); });
  route(server, db_path, "/task", [](archive::Archive& ar, const httplib::Request& r) { return task_page(ar, r.get_param_value("id")); });
  route(server, db_path, R"(/candidate/(\d{1,18}))",
        [](archive::Archive& ar, const httplib::Request& r) { return candidate_page(ar, std::stoll(r.matches[1].str())); });
  route(server, db_path, "/search", [](archive::Archive& ar, const httplib::Request& r) { return search_page(ar, r.get_param_value("q")); });
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
