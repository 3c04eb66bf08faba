// Issue 17, the archive and tables as a new user meets them: `archive import` reads gzip (by its
// bytes, not its name) and a failed import leaves no empty archive behind; `archive top` and
// `archive tasks` say why nothing is listed; an unknown suite is a usage error; tables fit COLUMNS
// (or the terminal) and `--wide` prints them whole. The real `kforge` binary and real SQLite files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

#include "test_util.h"

namespace {

using kforge::test::TempDir;

// Runs a shell command line (the kforge binary is $K in it); standard error goes with standard
// output.
std::pair<int, std::string> sh(const std::string& line) {
  std::string out;
  FILE* p = popen(("K=" + std::string(KFORGE_BINARY) + "; " + line + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc), out};
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

std::string shipped_export() {
  return (kforge::test::source_dir() / "docs/results/seeds-2026-12-03.jsonl.gz").string();
}

// AI CUDA Engineer rows: the smallest lines an import accepts (retrieval text, never winners).
std::string rows(int from, int to) {
  std::string out;
  for (int i = from; i < to; ++i)
    out += R"({"Op_Name": "op)" + std::to_string(i) +
           R"(", "Level_ID": 1, "CUDA_Code": "__global__ void k)" + std::to_string(i) +
           "() {}\"}\n";
  return out;
}

// Display columns of a UTF-8 line.
size_t columns(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

TEST(ArchiveGzip, TheShippedGzippedExportImportsAsItIs) {
  TempDir dir;
  std::string db = (dir.path() / "seeds.db").string();
  auto [rc, out] = sh("$K archive import --trust " + shipped_export() + " --db " + db);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("imported 146 line(s)"), std::string::npos) << out;
  auto [rc2, table] = sh("$K archive results smoke --kind seed --db " + db);
  EXPECT_EQ(rc2, 0) << table;
  EXPECT_NE(table.find("| smoke/relu | "), std::string::npos) << table;
}

TEST(ArchiveGzip, GzipIsKnownByItsBytesAndEveryMemberIsRead) {
  TempDir dir;
  std::string a = dir.write("a.jsonl", rows(0, 3)).string(),
              b = dir.write("b.jsonl", rows(3, 5)).string();
  std::string blob = (dir.path() / "export.data").string();  // two gzip members, no .gz in the name
  ASSERT_EQ(sh("gzip -c " + a + " > " + blob + " && gzip -c " + b + " >> " + blob).first, 0);
  std::string db = (dir.path() / "a.db").string();
  auto [rc, out] = sh("$K archive import " + blob + " --db " + db);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("imported 5 line(s)"), std::string::npos) << out;
}

TEST(ArchiveGzip, DamagedGzipSaysHowToCheckItAndLeavesNoArchive) {
  TempDir dir;
  std::string cut = (dir.path() / "cut.jsonl.gz").string();
  ASSERT_EQ(sh("head -c 300000 " + shipped_export() + " > " + cut).first, 0);
  std::string db = (dir.path() / "a.db").string();
  auto [rc, out] = sh("$K archive import --trust " + cut + " --db " + db);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find(cut + ": gzip data ends early"), std::string::npos) << out;
  EXPECT_NE(out.find("gunzip it first"), std::string::npos) << out;
  // The lines before the cut were imported: that archive is not empty and stays.
  EXPECT_TRUE(exists(db)) << out;

  std::string garbage = (dir.path() / "garbage.gz").string();
  ASSERT_EQ(sh("printf '\\037\\213\\010\\000not deflate at all' > " + garbage).first, 0);
  std::string db2 = (dir.path() / "b.db").string();
  auto [rc2, out2] = sh("$K archive import " + garbage + " --db " + db2);
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("gunzip"), std::string::npos) << out2;
  EXPECT_FALSE(exists(db2)) << out2;
}

TEST(ArchiveImportCleanup, AFailedImportLeavesNoEmptyArchiveButNeverRemovesOne) {
  TempDir dir;
  std::string db = (dir.path() / "new.db").string();
  std::string bad = dir.write("bad.jsonl", "{not json\n").string();
  std::string empty = dir.write("empty.jsonl", "\n\n").string();
  for (const std::string& file :
       {bad, empty, (dir.path() / "missing.jsonl").string(), dir.path().string()}) {
    auto [rc, out] = sh("$K archive import " + file + " --db " + db);
    EXPECT_EQ(rc, 2) << file << ": " << out;
    EXPECT_FALSE(exists(db)) << file << ": " << out;
    EXPECT_FALSE(exists(db + "-wal")) << file;
    EXPECT_FALSE(exists(db + "-shm")) << file;
  }
  // An archive that was there before stays, whatever the import.
  std::string good = dir.write("good.jsonl", rows(0, 1)).string();
  ASSERT_EQ(sh("$K archive import " + good + " --db " + db).first, 0);
  for (const std::string& file : {bad, empty}) {
    EXPECT_EQ(sh("$K archive import " + file + " --db " + db).first, 2);
    EXPECT_TRUE(exists(db));
  }
  // So does an empty file someone made (it is not ours to remove).
  std::string theirs = dir.write("theirs.db", "").string();
  EXPECT_EQ(sh("$K archive import " + bad + " --db " + theirs).first, 2);
  EXPECT_TRUE(exists(theirs));
}

TEST(ArchiveTop, NoWinnersSaysWhyAndPointsAtTheSeedsTable) {
  TempDir dir;
  std::string db = (dir.path() / "seeds.db").string(),
              plain = (dir.path() / "seeds.jsonl").string();
  ASSERT_EQ(sh("gzip -dc " + shipped_export() + " > " + plain + " && $K archive import --trust " +
               plain + " --db " + db)
                .first,
            0);
  // The shipped seeds were judged without --admit: correct and timed, but no winners.
  auto [rc, out] = sh("$K archive top --suite level1 --db " + db);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("no candidate of these tasks has been admitted as a winner"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("`kforge archive results level1 --kind seed`"), std::string::npos) << out;
  auto [rc2, out2] = sh("$K archive tasks --db " + db);
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_NE(out2.find("level1/relu"), std::string::npos) << out2;
  EXPECT_NE(out2.find("no candidate of these tasks has been admitted as a winner"),
            std::string::npos)
      << out2;
  EXPECT_NE(out2.find("`kforge archive results SUITE --kind seed`"), std::string::npos) << out2;
  // The command it points at exists and lists the seeds.
  auto [rc3, out3] = sh("$K archive results level1 --kind seed --db " + db);
  EXPECT_EQ(rc3, 0) << out3;
  EXPECT_NE(out3.find("| level1/relu | "), std::string::npos) << out3;
}

TEST(ArchiveTop, AnUnknownSuiteIsAUsageErrorNamingIt) {
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  ASSERT_EQ(
      sh("$K archive import " + dir.write("a.jsonl", rows(0, 1)).string() + " --db " + db).first,
      0);
  auto [rc, out] = sh("$K archive top --suite levle1 --db " + db);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--suite: no suite 'levle1'"), std::string::npos) << out;
  EXPECT_NE(out.find("level1"), std::string::npos) << out;  // the suites there are
  auto [rc2, out2] = sh("$K archive results levle1 --db " + db);
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("no suite 'levle1'"), std::string::npos) << out2;
  // Suites of the tasks folder and suites only the archive has (imports) are known.
  EXPECT_EQ(sh("$K archive top --suite level1 --db " + db).first, 0);
  EXPECT_EQ(sh("$K archive top --suite imported_1 --db " + db).first, 0);
}

TEST(Tables, FitColumnsAndWidePrintsThemWhole) {
  std::string list =
      "$K tasks list level1 --tasks-dir " + (kforge::test::source_dir() / "tasks").string();
  auto [rc, fitted] = sh("COLUMNS=60 " + list);
  ASSERT_EQ(rc, 0) << fitted;
  std::istringstream lines(fitted);
  int cut = 0;
  for (std::string l; std::getline(lines, l);) {
    EXPECT_LE(columns(l), 60u) << l;
    cut += l.find("...") != std::string::npos;
  }
  EXPECT_GT(cut, 0) << fitted;
  EXPECT_NE(fitted.find("level1/relu "), std::string::npos) << fitted;  // what fits stays whole

  auto [rc2, wide] = sh("COLUMNS=60 " + list + " --wide");
  EXPECT_EQ(rc2, 0) << wide;
  EXPECT_EQ(wide.find("..."), std::string::npos) << wide;
  size_t longest = 0;
  std::istringstream wl(wide);
  for (std::string l; std::getline(wl, l);) longest = std::max(longest, columns(l));
  EXPECT_GT(longest, 60u) << wide;

  // A pipe without COLUMNS gets whole rows, as with --wide.
  auto [rc3, piped] = sh("env -u COLUMNS " + list);
  EXPECT_EQ(rc3, 0) << piped;
  EXPECT_EQ(piped, wide);
}

// On a terminal (a pseudo-terminal from util-linux's `script`) without COLUMNS: its width.
TEST(Tables, ATerminalsWidthIsUsed) {
  if (sh("command -v script").first != 0)
    GTEST_SKIP() << "no `script` (util-linux) to make a terminal";
  std::string list = std::string(KFORGE_BINARY) + " tasks list smoke --tasks-dir " +
                     (kforge::test::source_dir() / "tasks").string();
  auto [rc, out] = sh("env -u COLUMNS script -qec 'stty cols 50 && " + list + "' /dev/null");
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  int rows = 0;
  for (std::string l; std::getline(lines, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    EXPECT_LE(columns(l), 50u) << out;
    rows += l.rfind("smoke/", 0) == 0;
  }
  EXPECT_EQ(rows, 4) << out;
}

TEST(Tables, ArchiveTablesFitToo) {
  TempDir dir;
  std::string db = (dir.path() / "seeds.db").string();
  std::string long_name(80, 'x');
  ASSERT_EQ(
      sh("$K archive import " +
         dir.write("a.jsonl", R"({"Op_Name": ")" + long_name +
                                  R"(", "Level_ID": 1, "CUDA_Code": "__global__ void k() {}"})"
                                  "\n")
             .string() +
         " --db " + db)
          .first,
      0);
  auto [rc, out] = sh("COLUMNS=50 $K archive tasks --db " + db);
  EXPECT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l) && !l.empty();)
    EXPECT_LE(columns(l), 50u) << out;  // the table
  EXPECT_EQ(out.find(long_name), std::string::npos) << out;
  auto [rc2, wide] = sh("COLUMNS=50 $K archive tasks --wide --db " + db);
  EXPECT_EQ(rc2, 0) << wide;
  EXPECT_NE(wide.find("imported_1/" + long_name), std::string::npos) << wide;
}

}  // namespace
