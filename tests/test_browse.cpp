// `kforge serve`'s routes over HTTP on loopback, on a real archive file (the evolve run's export
// imported): every page and its JSON, escaping of archive strings, read-only, and browsing while a
// writer holds the database.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"
#include "kforge/browse/server.h"
#include "test_util.h"

namespace kforge {
namespace {

using nlohmann::json;
using test::source_dir;
using test::TempDir;

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class Browse : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = (dir_.path() / "archive.db").string();
    {
      archive::Archive ar = archive::Archive::open(db_);
      std::ifstream in(source_dir() / "docs/results/evolve-level1-level2-2026-12-03.jsonl.gz", std::ios::binary);
      archive::ImportOptions trust;
      trust.trust = true;
      ar.import_jsonl(in, "evolve-level1-level2-2026-12-03.jsonl.gz", trust);
    }
    browse::add_routes(server_, db_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  httplib::Result get(const std::string& path) {
    httplib::Client client("127.0.0.1", port_);
    return client.Get(path);
  }
  json api(const std::string& path) {
    httplib::Result r = get("/api" + path);
    EXPECT_TRUE(r) << path;
    if (!r) return nullptr;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    return json::parse(r->body);
  }
  std::string html(const std::string& path, int status = 200) {
    httplib::Result r = get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return "";
    EXPECT_EQ(r->status, status) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_NE(r->body.find("</html>"), std::string::npos) << path;
    return r->body;
  }
  int64_t first_winner() {
    archive::Archive ar = archive::Archive::open_read_only(db_);
    archive::Statement q = ar.db().prepare("SELECT c.id FROM candidates c JOIN evaluations e ON e.candidate_id = c.id WHERE " +
                                           archive::winner_condition() + " ORDER BY c.id LIMIT 1");
    return q.step() ? q.integer(0) : 0;
  }

  TempDir dir_;
  std::string db_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(Browse, EveryPageAndItsJsonAnswer) {
  json overview = api("/overview");
  EXPECT_GT(overview["candidates"].get<int64_t>(), 100);
  EXPECT_NE(html("/").find("candidates"), std::string::npos);

  json board = api("/leaderboard");
  ASSERT_GE(board["winners"].size(), 70u) << "the evolve run's level-1 and level-2 winners";
  std::string page = html("/leaderboard");
  size_t rows = 0;
  for (size_t at = page.find("<tr><td><a href=\"/task?id="); at != std::string::npos; at = page.find("<tr><td><a href=\"/task?id=", at + 1)) ++rows;
  EXPECT_EQ(rows, board["winners"].size()) << "one row per winner";
  json level2 = api("/leaderboard?suite=level2");
  EXPECT_EQ(level2["winners"].size(), 18u);
  for (const json& w : level2["winners"]) EXPECT_EQ(w["suite"], "level2");
  EXPECT_TRUE(api("/leaderboard?device=no-such-gpu")["winners"].empty());

  EXPECT_GE(api("/tasks")["tasks"].size(), 79u);
  EXPECT_NE(html("/tasks").find("level1/softmax"), std::string::npos);

  json task = api("/task?id=level1/softmax");
  ASSERT_FALSE(task["candidates"].empty());
  EXPECT_GT(task["outcomes"].value("correct", 0), 0);
  std::string task_page = html("/task?id=level1/softmax");
  EXPECT_NE(task_page.find("<polyline class=\"series\""), std::string::npos) << "the best-speedup plot has a line";
  EXPECT_EQ(task_page.find("no data"), std::string::npos);
  html("/task?id=level1/no_such_task", 404);

  int64_t id = first_winner();
  ASSERT_GT(id, 0);
  json c = api("/candidate/" + std::to_string(id));
  EXPECT_EQ(c["id"], id);
  EXPECT_FALSE(c["source"].get<std::string>().empty());
  EXPECT_TRUE(c["children"].is_array());
  EXPECT_FALSE(c["evaluations"].empty());
  std::string cpage = html("/candidate/" + std::to_string(id));
  EXPECT_NE(cpage.find("__global__"), std::string::npos) << "the source is shown";
  html("/candidate/999999999", 404);

  json hits = api("/search?q=softmax");
  EXPECT_FALSE(hits["kernels"].empty());
  EXPECT_NE(html("/search?q=softmax").find("/candidate/"), std::string::npos);
}

TEST_F(Browse, ArchiveStringsShowAsText) {
  const std::string evil = "</script><img src=x onerror=alert(1)>";
  {
    archive::Archive ar = archive::Archive::open(db_, false);
    archive::Statement up = ar.db().prepare("UPDATE candidates SET source = ?, model = ? WHERE id = (SELECT min(id) FROM candidates)");
    up.bind(1, "// " + evil + "\n__global__ void k() {}").bind(2, "<b onmouseover=x>model</b>").run();
    ar.db().prepare("UPDATE tasks SET summary = ? WHERE id = (SELECT min(id) FROM tasks)").bind(1, "<script>alert('t')</script>").run();
  }
  archive::Archive ar = archive::Archive::open_read_only(db_);
  archive::Statement q = ar.db().prepare("SELECT min(id) FROM candidates");
  ASSERT_TRUE(q.step());
  std::string page = html("/candidate/" + std::to_string(q.integer(0)));
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("<b onmouseover"), std::string::npos);
  EXPECT_NE(page.find("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(page.find("&lt;b onmouseover=x&gt;model&lt;/b&gt;"), std::string::npos);
  std::string tasks = html("/tasks");
  EXPECT_EQ(tasks.find("<script>"), std::string::npos);
  EXPECT_NE(tasks.find("&lt;script&gt;alert(&#39;t&#39;)&lt;/script&gt;"), std::string::npos);
  // The search box echoes the query as text too.
  EXPECT_EQ(html("/search?q=%3Cimg%20src%3Dx%3E").find("<img src=x>"), std::string::npos);
}

TEST_F(Browse, NothingWritesTheArchive) {
  const std::string before = file_bytes(db_);
  for (const char* path : {"/", "/leaderboard", "/tasks", "/task?id=level1/softmax", "/candidate/1", "/search?q=relu",
                           "/api/overview", "/api/leaderboard", "/api/tasks", "/api/task?id=level2/swiglu", "/api/candidate/2",
                           "/api/search?q=gemm"})
    EXPECT_TRUE(get(path)) << path;
  httplib::Client client("127.0.0.1", port_);
  for (const char* path : {"/", "/api/candidate/1", "/candidate/1", "/api/runs"}) {
    auto post = client.Post(path, "{\"source\": \"x\"}", "application/json");
    ASSERT_TRUE(post);
    EXPECT_EQ(post->status, 405) << path;
    EXPECT_EQ(client.Delete(path)->status, 405) << path;
    EXPECT_EQ(client.Put(path, "x", "text/plain")->status, 405) << path;
  }
  EXPECT_EQ(file_bytes(db_), before) << "the database file changed while it was browsed";
}

TEST_F(Browse, BrowsableWhileARunWrites) {
  archive::Archive writer = archive::Archive::open(db_, false);
  writer.db().exec("BEGIN IMMEDIATE");
  writer.db().exec("UPDATE candidates SET model = 'being written' WHERE id = 1");
  json c = api("/candidate/1");  // the reader sees the last committed state, without waiting
  EXPECT_NE(c["model"], "being written");
  EXPECT_EQ(get("/leaderboard")->status, 200);
  writer.db().exec("COMMIT");
  EXPECT_EQ(api("/candidate/1")["model"], "being written");
}

TEST(BrowseHost, OnlyLoopbackWithoutAFlag) {
  EXPECT_TRUE(browse::is_loopback("127.0.0.1"));
  EXPECT_TRUE(browse::is_loopback("localhost"));
  EXPECT_TRUE(browse::is_loopback("::1"));
  EXPECT_FALSE(browse::is_loopback("0.0.0.0"));
  EXPECT_FALSE(browse::is_loopback("192.168.1.5"));
}

}  // namespace
}  // namespace kforge
