// `kforge serve`'s routes over HTTP on loopback, on a real archive file (the evolve run's export
// imported): every page and its JSON, escaping of archive strings, read-only, and browsing while a
// writer holds the database.
#include <gtest/gtest.h>
#include <httplib.h>

#include <zlib.h>
#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include <cstdlib>

#include "archive_sql.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"
#include "kforge/browse/server.h"
#include "kforge/common/baseline.h"
#include "kforge/common/process.h"
#include "kforge/common/sandbox.h"
#include "test_util.h"

namespace kforge {
namespace {

using nlohmann::json;
using test::ArchiveSql;
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
      std::ifstream in(source_dir() / "docs/results/evolve-level1-level2-2026-12-03.jsonl.gz",
                       std::ios::binary);
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
    ArchiveSql sql(db_, archive::Access::ReadOnly);
    archive::Statement q = sql.prepare(
        "SELECT c.id FROM candidates c JOIN evaluations e ON e.candidate_id = c.id WHERE " +
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
  ASSERT_EQ(overview["runs"].size(), 1u);
  const json& best = overview["runs"][0]["best"];
  ASSERT_GE(best.size(), 70u) << "the run's best kernel per task";
  for (size_t i = 1; i < best.size(); ++i)
    EXPECT_GE(best[i - 1]["speedup"].value("best", 0.0), best[i]["speedup"].value("best", 0.0))
        << "the largest speedup over the best baseline first";
  EXPECT_EQ(html("/").find("http-equiv=\"refresh\""), std::string::npos)
      << "a finished run's page does not reload";
  EXPECT_NE(html("/").find("candidates"), std::string::npos);

  json board = api("/leaderboard");
  ASSERT_GE(board["winners"].size(), 70u) << "the evolve run's level-1 and level-2 winners";
  std::string page = html("/leaderboard");
  size_t rows = 0;
  for (size_t at = page.find("<tr><td><a href=\"/task?id="); at != std::string::npos;
       at = page.find("<tr><td><a href=\"/task?id=", at + 1))
    ++rows;
  EXPECT_EQ(rows, board["winners"].size()) << "one row per winner";
  json losses = api("/leaderboard?tag=loss");
  ASSERT_EQ(losses["winners"].size(), 6u) << "level 1's six loss tasks carry the tag";
  std::set<std::string> loss_tasks;
  for (const json& w : losses["winners"]) loss_tasks.insert(w["task"]);
  EXPECT_EQ(loss_tasks, (std::set<std::string>{"level1/cross_entropy", "level1/hinge_loss",
                                               "level1/huber_loss", "level1/kl_div",
                                               "level1/mse_loss", "level1/triplet_margin_loss"}));
  EXPECT_TRUE(api("/leaderboard?tag=no-such-tag")["winners"].empty());
  json level2 = api("/leaderboard?suite=level2");
  EXPECT_EQ(level2["winners"].size(), 18u);
  for (const json& w : level2["winners"]) EXPECT_EQ(w["suite"], "level2");
  EXPECT_TRUE(api("/leaderboard?device=no-such-gpu")["winners"].empty());

  // A column per kind of baseline (a kind added to baseline_kinds() too), then x best: each
  // winner's speedup over the fastest kind measured, the smallest of its speedups.
  std::string heading = "<th>time</th>";
  for (const BaselineKindInfo& info : baseline_kinds())
    heading += "<th>x " + std::string(info.label) + "</th>";
  EXPECT_NE(page.find(heading + "<th>x best</th>"), std::string::npos) << page.substr(0, 3000);
  for (const json& w : board["winners"]) {
    BaselineTimes b = BaselineTimes::from_json(w["baselines"]);
    ASSERT_TRUE(w["time_ms"].is_number()) << w;
    double time = w["time_ms"].get<double>(), smallest = 1e300;
    for (const BaselineMs& m : b.items)
      if (m.ms) smallest = std::min(smallest, *m.ms / time);
    ASSERT_TRUE(b.best_speedup(time)) << w;
    EXPECT_DOUBLE_EQ(*b.best_speedup(time), smallest) << w;
    EXPECT_DOUBLE_EQ(w["speedup"]["best"].get<double>(), smallest) << w;
  }

  EXPECT_GE(api("/tasks")["tasks"].size(), 79u);
  EXPECT_NE(html("/tasks").find("level1/softmax"), std::string::npos);

  json task = api("/task?id=level1/softmax");
  ASSERT_FALSE(task["candidates"].empty());
  EXPECT_GT(task["outcomes"].value("correct", 0), 0);
  std::string task_page = html("/task?id=level1/softmax");
  EXPECT_NE(task_page.find("<polyline class=\"series\""), std::string::npos)
      << "the best-speedup plot has a line";
  EXPECT_EQ(task_page.find("no data"), std::string::npos);
  // The task itself above its candidates: summary, timed dims, the baselines and the reference.
  const json& info = task["info"];
  EXPECT_NE(info.value("summary", "").find("oftmax"), std::string::npos) << info.dump();
  EXPECT_NE(info.value("reference", "").find("def forward"), std::string::npos) << info.dump();
  EXPECT_TRUE(info["dims"].is_object() && !info["dims"].empty()) << info.dump();
  EXPECT_TRUE(info["baselines"]["eager"].is_number()) << info.dump();
  EXPECT_NE(info.value("device", "").find("H200"), std::string::npos) << info.dump();
  EXPECT_NE(task_page.find("<h2>Reference</h2>"), std::string::npos);
  EXPECT_NE(task_page.find("<td>eager</td><td class=\"n\">"), std::string::npos);
  EXPECT_NE(task_page.find("Timed at "), std::string::npos);
  html("/task?id=level1/no_such_task", 404);

  int64_t id = first_winner();
  ASSERT_GT(id, 0);
  json c = api("/candidate/" + std::to_string(id));
  EXPECT_EQ(c["id"], id);
  EXPECT_FALSE(c["source"].get<std::string>().empty());
  EXPECT_TRUE(c["children"].is_array());
  EXPECT_FALSE(c["evaluations"].empty());
  std::string cpage = html("/candidate/" + std::to_string(id));
  EXPECT_NE(cpage.find("<span class=\"q\">__global__</span>"), std::string::npos)
      << "the source is shown, highlighted";
  EXPECT_NE(cpage.find("<span class=\"k\">float</span>"), std::string::npos);
  html("/candidate/999999999", 404);

  // A candidate with a parent: its changes against the parent, as a diff.
  {
    ArchiveSql sql(db_, archive::Access::ReadOnly);
    archive::Statement q = sql.prepare(
        "SELECT candidate_id, parent_id FROM candidate_parents ORDER BY candidate_id LIMIT 1");
    ASSERT_TRUE(q.step()) << "the evolve archive has children";
    json child = api("/candidate/" + std::to_string(q.integer(0)));
    EXPECT_EQ(child["parents"][0], q.integer(1));
    EXPECT_EQ(api("/candidate/" + std::to_string(q.integer(1)))["children"].size() >= 1, true);
    std::string diff_page = html("/candidate/" + std::to_string(q.integer(0)));
    EXPECT_NE(
        diff_page.find("against its parent <a href=\"/candidate/" + std::to_string(q.integer(1))),
        std::string::npos);
    // Lineage as a tree: the parent among the child's ancestors, the child among the parent's
    // descendants.
    const std::string parent_item =
        "<ul class=\"tree\"><li><a href=\"/candidate/" + std::to_string(q.integer(1)) + "\">";
    size_t lineage = diff_page.find("<h2>Lineage</h2>"),
           descendants = diff_page.find("<p>descendants</p>", lineage);
    ASSERT_NE(lineage, std::string::npos);
    size_t at = diff_page.find(parent_item, lineage);
    EXPECT_TRUE(at != std::string::npos && at < descendants)
        << "the parent is listed as an ancestor";
    std::string parent_page = html("/candidate/" + std::to_string(q.integer(1)));
    size_t below = parent_page.find("<p>descendants</p>");
    ASSERT_NE(below, std::string::npos);
    EXPECT_NE(
        parent_page.find("<a href=\"/candidate/" + std::to_string(q.integer(0)) + "\">", below),
        std::string::npos)
        << "the child is listed as a descendant";
  }

  json hits = api("/search?q=softmax");
  EXPECT_FALSE(hits["kernels"].empty());
  bool softmax_task = false;
  for (const json& t : hits["tasks"]) softmax_task |= t["task"] == "level1/softmax";
  EXPECT_TRUE(softmax_task) << hits["tasks"];
  EXPECT_NE(html("/search?q=softmax").find("/candidate/"), std::string::npos);
}

TEST_F(Browse, ArchiveStringsShowAsText) {
  const std::string evil = "</script><img src=x onerror=alert(1)>";
  {
    ArchiveSql sql(db_);
    archive::Statement up = sql.prepare(
        "UPDATE candidates SET source = ?, model = ? WHERE id = (SELECT min(id) FROM candidates)");
    up.bind(1, "// " + evil + "\n__global__ void k() {}")
        .bind(2, "<b onmouseover=x>model</b>")
        .run();
    sql.prepare("UPDATE tasks SET summary = ? WHERE id = (SELECT min(id) FROM tasks)")
        .bind(1, "<script>alert('t')</script>")
        .run();
    sql.prepare("UPDATE tasks SET name = ? WHERE id = (SELECT max(id) FROM tasks)")
        .bind(1, "<img src=y onerror=alert(2)>")
        .run();
  }
  ArchiveSql sql(db_, archive::Access::ReadOnly);
  archive::Statement q = sql.prepare("SELECT min(id) FROM candidates");
  ASSERT_TRUE(q.step());
  std::string page = html("/candidate/" + std::to_string(q.integer(0)));
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("<b onmouseover"), std::string::npos);
  EXPECT_NE(page.find("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(page.find("&lt;b onmouseover=x&gt;model&lt;/b&gt;"), std::string::npos);
  std::string tasks = html("/tasks");
  EXPECT_EQ(tasks.find("<script>"), std::string::npos);
  EXPECT_NE(tasks.find("&lt;script&gt;alert(&#39;t&#39;)&lt;/script&gt;"), std::string::npos);
  // A task name with markup: text on the task list and the leaderboard, and percent-encoded in
  // links.
  EXPECT_EQ(tasks.find("<img src=y"), std::string::npos);
  EXPECT_NE(tasks.find("&lt;img src=y onerror=alert(2)&gt;"), std::string::npos);
  EXPECT_NE(tasks.find("/task?id=level2/%3Cimg%20src%3Dy%20onerror%3Dalert%282%29%3E"),
            std::string::npos);
  EXPECT_EQ(html("/leaderboard").find("<img src=y"), std::string::npos);
  // The search box echoes the query as text too.
  EXPECT_EQ(html("/search?q=%3Cimg%20src%3Dx%3E").find("<img src=x>"), std::string::npos);
}

TEST_F(Browse, NothingWritesTheArchive) {
  const std::string before = file_bytes(db_);
  for (const char* path : {"/", "/leaderboard", "/tasks", "/task?id=level1/softmax", "/candidate/1",
                           "/search?q=relu", "/api/overview", "/api/leaderboard", "/api/tasks",
                           "/api/task?id=level2/swiglu", "/api/candidate/2", "/api/search?q=gemm"})
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
  ArchiveSql writer(db_);  // a run's connection, in the middle of a transaction
  writer.exec("BEGIN IMMEDIATE");
  writer.exec("UPDATE candidates SET model = 'being written' WHERE id = 1");
  json c = api("/candidate/1");  // the reader sees the last committed state, without waiting
  EXPECT_NE(c["model"], "being written");
  EXPECT_EQ(get("/leaderboard")->status, 200);
  writer.exec("COMMIT");
  EXPECT_EQ(api("/candidate/1")["model"], "being written");
}

// A run in progress: the overview shows its newest candidates and reloads itself; candidates that
// were never judged show what happened to them (a failed compile, a screen) rather than nothing.
TEST_F(Browse, ARunInProgressIsShownLive) {
  int64_t failed = 0, screened = 0;
  std::string task_id;
  {
    ArchiveSql w(db_);
    w.exec("UPDATE runs SET status = 'running', finished_at = NULL");
    // Two never-judged candidates of one task (the tuner's points that were not chosen).
    archive::Statement q = w.prepare(
        "SELECT min(c.id), max(c.id), t.suite || '/' || t.name FROM candidates c JOIN tasks t ON "
        "t.id = c.task_id "
        "WHERE NOT EXISTS (SELECT 1 FROM evaluations e WHERE e.candidate_id = c.id) GROUP BY t.id "
        "HAVING count(*) >= 3 "
        "ORDER BY t.id LIMIT 1");
    ASSERT_TRUE(q.step());
    failed = q.integer(0);
    screened = q.integer(1);
    task_id = q.text(2);
    w.prepare(
         "INSERT INTO compiles (candidate_id, ok, stage, errors) VALUES (?, 0, 'nvrtc', "
         "'[\"error: x\"]')")
        .bind(1, failed)
        .run();
    w.prepare(
         "INSERT INTO screens (candidate_id, device_id, harness_version, outcome) "
         "VALUES (?, (SELECT min(id) FROM devices), 3, 'wrong_result')")
        .bind(1, screened)
        .run();
  }
  std::string page = html("/");
  EXPECT_NE(page.find("<meta http-equiv=\"refresh\" content=\"10\">"), std::string::npos);
  EXPECT_NE(page.find("in progress"), std::string::npos);
  json overview = api("/overview");
  ASSERT_EQ(overview["runs"][0]["newest"].size(), 10u) << "the run's ten newest candidates";
  json task = api("/task?id=" + task_id);
  std::map<int64_t, std::string> outcome;
  for (const json& c : task["candidates"]) outcome[c["id"]] = c["outcome"];
  EXPECT_EQ(outcome[failed], "compile_error");
  EXPECT_EQ(outcome[screened], "screened: wrong_result");
  EXPECT_GT(task["outcomes"].value("not judged", 0), 0) << "the rest were never looked at";
}

// `kforge evolve`'s loop (the real compiler and archive, a fake GPU: kforge-evolve-fake) writes a
// fresh archive in another process while the pages are read: every answer is whole, the run is seen
// in progress, and the candidates counted grow until the run ends.
TEST_F(Browse, BrowsableWhileKforgeEvolveWrites) {
  const std::string db = (dir_.path() / "live.db").string();
  httplib::Server live;
  browse::add_routes(live, db);
  int port = live.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { live.listen_after_bind(); });
  while (!live.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  SpawnOptions o;
  o.argv = {KFORGE_EVOLVE_FAKE, db, (source_dir() / "tasks").string(), "smoke/relu", "7", "6"};
  o.env = child_environment({{"KFORGE_CACHE_DIR", (dir_.path() / "cache").string()}});
  Process run = Process::spawn(o);
  httplib::Client client("127.0.0.1", port);
  std::vector<int64_t> counts;
  int answers = 0, seen_running = 0;
  std::optional<int> status;
  while (!(status = run.wait_exit(std::chrono::milliseconds(50)))) {
    if (::access(db.c_str(), F_OK) != 0) continue;
    httplib::Result r = client.Get("/api/overview");
    ASSERT_TRUE(r);
    if (r->status == 500) continue;  // the file exists, its schema not yet (the first instants)
    ASSERT_EQ(r->status, 200) << r->body;
    json o = json::parse(r->body);
    ++answers;
    if (!o["runs"].empty() && o["runs"][0]["status"] == "running") {
      ++seen_running;
      // The run may end between the two reads; the page must say "in progress" only if it was still
      // running after the page was read.
      bool page_says_so = client.Get("/")->body.find("in progress") != std::string::npos;
      bool still_running =
          json::parse(client.Get("/api/overview")->body)["runs"][0]["status"] == "running";
      EXPECT_TRUE(page_says_so || !still_running)
          << "a running run's overview page says it is in progress";
    }
    counts.push_back(o["candidates"]);
    EXPECT_EQ(client.Get("/task?id=smoke/relu")->status == 200 || o["candidates"] == 0, true);
  }
  live.stop();
  serving.join();
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << describe_exit(*status);
  EXPECT_GE(answers, 5) << "the pages were read while the run wrote";
  EXPECT_GT(seen_running, 0);
  ASSERT_FALSE(counts.empty());
  EXPECT_TRUE(std::is_sorted(counts.begin(), counts.end()))
      << "committed candidates only ever grow";
  archive::Archive ar = archive::Archive::open_read_only(db);
  EXPECT_GT(ar.stats().candidates, counts.front())
      << "the run went on writing while it was browsed";
}

// A PNG as Chromium writes it (8-bit RGB or RGBA, not interlaced), decoded: its size and pixels.
struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // 3 bytes a pixel
  size_t count(uint8_t r, uint8_t g, uint8_t b, int tolerance = 24) const {
    size_t n = 0;
    for (size_t i = 0; i + 2 < rgb.size(); i += 3)
      n += std::abs(rgb[i] - r) <= tolerance && std::abs(rgb[i + 1] - g) <= tolerance &&
           std::abs(rgb[i + 2] - b) <= tolerance;
    return n;
  }
};

Image read_png(const std::string& bytes) {
  auto be32 = [&](size_t at) {
    return uint32_t(uint8_t(bytes[at])) << 24 | uint32_t(uint8_t(bytes[at + 1])) << 16 |
           uint32_t(uint8_t(bytes[at + 2])) << 8 | uint8_t(bytes[at + 3]);
  };
  if (bytes.size() < 33 || bytes.compare(1, 3, "PNG") != 0) throw std::runtime_error("not a PNG");
  Image img{be32(16), be32(20), {}};
  const int depth = uint8_t(bytes[24]), colour = uint8_t(bytes[25]), interlace = uint8_t(bytes[28]);
  if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0)
    throw std::runtime_error("an unexpected PNG format");
  const size_t channels = colour == 6 ? 4 : 3, stride = img.width * channels;
  std::string idat;
  for (size_t at = 8; at + 8 <= bytes.size();) {
    uint32_t length = be32(at);
    if (bytes.compare(at + 4, 4, "IDAT") == 0) idat += bytes.substr(at + 8, length);
    at += 12 + length;
  }
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf size = raw.size();
  if (uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      size != raw.size())
    throw std::runtime_error("the PNG's image data does not inflate");
  std::vector<uint8_t> prev(stride, 0), line(stride);
  for (uint32_t y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    for (size_t x = 0; x < stride; ++x) {
      int a = x >= channels ? line[x - channels] : 0, b = prev[x],
          c = x >= channels ? prev[x - channels] : 0;
      int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
      int predicted = filter == 1   ? a
                      : filter == 2 ? b
                      : filter == 3 ? (a + b) / 2
                      : filter == 4 ? (pa <= pb && pa <= pc ? a
                                       : pb <= pc           ? b
                                                            : c)
                                    : 0;
      line[x] = uint8_t(in[x] + predicted);
    }
    for (uint32_t x = 0; x < img.width; ++x)
      for (size_t k = 0; k < 3; ++k) img.rgb.push_back(line[x * channels + k]);
    prev = line;
  }
  return img;
}

// Chromium (Debian's package) in headless mode; "" when this machine has none.
std::string chromium() {
  if (const char* c = std::getenv("KFORGE_CHROMIUM"); c && *c) return c;
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (::access(c, X_OK) == 0) return c;
  return "";
}

// Loads each page in a real browser: the screenshots are images with the page's pixels in them (a
// leaderboard row per winner, the plots' lines drawn, the source highlighted); they are kept in
// docs/ (docs/browse.md).
TEST_F(Browse, ChromiumRendersThePages) {
  const std::string browser = chromium();
  if (browser.empty())
    GTEST_SKIP()
        << "no Chromium here (apt install chromium; CI installs it): the browser test did not run";
  const std::string base = "http://127.0.0.1:" + std::to_string(port_);
  auto shoot = [&](const std::string& path, const std::string& png) {
    const std::string out = (dir_.path() / png).string();
    std::string cmd = "timeout 90 " + browser +
                      " --headless --no-sandbox --disable-gpu --hide-scrollbars "
                      "--window-size=1280,1600 --screenshot=" +
                      out + " '" + base + path + "' > " + (dir_.path() / "chromium.log").string() +
                      " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n"
                                           << file_bytes(dir_.path() / "chromium.log");
    return read_png(file_bytes(out));
  };
  auto dom = [&](const std::string& path) {
    std::string out = (dir_.path() / "dom.html").string();
    std::string cmd = "timeout 90 " + browser +
                      " --headless --no-sandbox --disable-gpu --dump-dom '" + base + path + "' > " +
                      out + " 2> /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return file_bytes(out);
  };
  // The leaderboard as the browser built it: a table row per winner.
  const size_t winners = api("/leaderboard")["winners"].size();
  std::string board = dom("/leaderboard");
  size_t rows = 0;
  for (size_t at = board.find("<tr><td><a href=\"/task?id="); at != std::string::npos;
       at = board.find("<tr><td><a href=\"/task?id=", at + 1))
    ++rows;
  EXPECT_EQ(rows, winners);
  Image leaderboard = shoot("/leaderboard", "leaderboard.png");
  EXPECT_EQ(leaderboard.width, 1280u);
  const size_t white = leaderboard.count(255, 255, 255, 0),
               pixels = size_t(leaderboard.width) * leaderboard.height;
  EXPECT_LT(white, pixels * 97 / 100) << "the leaderboard's screenshot is (nearly) blank";
  // The task page's plots: the first series' colour (#1f77b4) drawn as lines and points.
  Image task = shoot("/task?id=level1/argmax_dim", "task.png");  // two generations, two islands
  EXPECT_GT(task.count(0x1f, 0x77, 0xb4, 8), 150u)
      << "the best-speedup plot has no line in the screenshot";
  // A child's candidate page: the source highlighted (keywords in #d73a49), the lineage tree.
  int64_t child = 0;
  {
    ArchiveSql sql(db_, archive::Access::ReadOnly);
    archive::Statement q = sql.prepare("SELECT min(candidate_id) FROM candidate_parents");
    ASSERT_TRUE(q.step());
    child = q.integer(0);
  }
  EXPECT_NE(dom("/candidate/" + std::to_string(child)).find("<ul class=\"tree\">"),
            std::string::npos);
  Image candidate = shoot("/candidate/" + std::to_string(child), "candidate.png");
  EXPECT_GT(candidate.count(0xd7, 0x3a, 0x49, 16), 50u)
      << "no highlighted keyword in the candidate page's screenshot";
  if (std::getenv("KFORGE_BROWSE_SCREENSHOTS")) {  // scripts refresh docs/'s pictures with this
    for (const char* name : {"leaderboard", "task", "candidate"})
      std::filesystem::copy_file(dir_.path() / (std::string(name) + ".png"),
                                 source_dir() / ("docs/browse-" + std::string(name) + ".png"),
                                 std::filesystem::copy_options::overwrite_existing);
  }
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
