// Every kforge command in README.md's, docs/*.md's and examples/README.md's code blocks runs as
// written on a machine without a GPU, or stops the one way its kind of command may stop there
// (docs/decisions.md, "The docs' commands are tested"):
//
// - exit 0;
// - exit 3 saying it "needs an NVIDIA GPU" (verify, corpus, baseline, tasks check --device cuda);
// - exit 2 naming a file of the command line that is not there (the user's: ~/KernelBench,
//   llm.toml, answer.py), an archive or run that an earlier GPU command would have made ("no
//   archive here yet", "no run N"), or an API key that is not set.
//
// A flag a command no longer has, a suite or task that was renamed, an example file that moved:
// each fails here. `kforge evolve` runs with --dry-run added (what it checks without a GPU);
// `kforge serve` (which serves until stopped) and lines with placeholders (SUITE, ID, `a | b`,
// [--db PATH]) are syntax, not examples, and are skipped. The commands run in the order the files
// give them, in a scratch folder that links the checkout's folders (so what they write stays
// there), with their own HOME and archive; "/tmp/" in a command is the scratch folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "kforge/common/strings.h"
#include "test_util.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using test::source_dir;
using test::TempDir;

struct DocCommand {
  std::string where;  // README.md:91
  std::string text;   // the command line, without its comment
};

// The line without a trailing "# comment" (a '#' after a space, outside quotes).
std::string without_comment(const std::string& line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#' && i > 0 && line[i - 1] == ' ') {
      return trim(line.substr(0, i));
    }
  }
  return trim(line);
}

bool is_kforge(const std::string& line) {
  return line.rfind("build/kforge ", 0) == 0 || line.rfind("kforge ", 0) == 0;
}

// The kforge command lines of one markdown file's code (fenced or indented), continuation lines
// joined, `a && b` split.
std::vector<DocCommand> commands_in(const fs::path& file, const std::string& name) {
  std::vector<DocCommand> out;
  std::ifstream in(file);
  std::string line;
  bool fenced = false;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (!fenced && line.rfind("    ", 0) != 0) continue;
    std::string text = trim(line);
    if (!is_kforge(text)) continue;
    int first = number;
    while (!text.empty() && text.back() == '\\' && std::getline(in, line)) {
      ++number;
      text = trim(text.substr(0, text.size() - 1)) + " " + trim(line);
    }
    text = without_comment(text);
    for (size_t at = 0; at != std::string::npos;) {
      size_t next = text.find(" && ", at);
      std::string part = trim(text.substr(at, next == std::string::npos ? next : next - at));
      if (is_kforge(part)) out.push_back({name + ":" + std::to_string(first), part});
      at = next == std::string::npos ? next : next + 4;
    }
  }
  return out;
}

// Syntax lines: a placeholder word (SUITE, ID, FILE), alternatives or optional parts.
bool is_syntax(const std::string& text) {
  static const std::regex placeholder(R"((^|[\s=])[A-Z][A-Z_]+(\s|$))");
  return std::regex_search(text, placeholder) || text.find(" | ") != std::string::npos ||
         text.find(" [") != std::string::npos || text.find("...") != std::string::npos;
}

// The words of a command line that name files or folders (a '/' or a file suffix), as the shell
// would see them from `cwd` with HOME=`home`.
std::vector<fs::path> path_words(const std::string& text, const fs::path& cwd,
                                 const fs::path& home) {
  std::vector<fs::path> out;
  static const std::regex word(R"([^\s'"=]+)");
  static const std::regex file_suffix(R"(\.(md|py|toml|json|jsonl|gz|cu|db)$)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), word); it != std::sregex_iterator();
       ++it) {
    std::string w = it->str();
    if (w.rfind("--", 0) == 0 || w.rfind("build/kforge", 0) == 0 ||
        w.find(':') != std::string::npos)
      continue;
    bool looks = w.find('/') != std::string::npos || std::regex_search(w, file_suffix);
    if (!looks) continue;
    if (w.rfind("~/", 0) == 0)
      out.push_back(home / w.substr(2));
    else
      out.push_back(w[0] == '/' ? fs::path(w) : cwd / w);
  }
  return out;
}

struct Counts {
  size_t ran = 0, skipped = 0;
};

// Runs `commands` in order in a scratch folder of their own (see the top of the file).
Counts check_commands(const std::vector<DocCommand>& commands) {
  Counts n;
  TempDir scratch;
  const fs::path cwd = scratch.path() / "work", home = scratch.path() / "home";
  fs::create_directories(cwd);
  fs::create_directories(home);
  // kforge's build folder, wherever this test's binary was built, as the docs' build/.
  fs::create_symlink(fs::path(KFORGE_BINARY).parent_path(), cwd / "build");
  for (const char* dir : {"tasks", "tests", "docs", "examples", "prompts", "scripts"})
    fs::create_directory_symlink(source_dir() / dir, cwd / dir);
  const std::string env = "cd '" + cwd.string() +
                          "' && env -u OPENAI_API_KEY -u ANTHROPIC_API_KEY " +
                          "-u KFORGE_DB -u KFORGE_MODEL -u KFORGE_LLM_CONFIG HOME='" +
                          home.string() + "' XDG_DATA_HOME='" + (home / "data").string() +
                          "' XDG_CACHE_HOME='" + (home / "cache").string() + "' COLUMNS=200 ";
  // Suites a documented KernelBench import (of the reader's checkout) would have written.
  std::vector<std::string> imported;
  static const std::regex suite_flag(R"(import-kernelbench .*--suite (\S+))");
  static const std::regex no_run("no run [0-9]+");
  for (const DocCommand& c : commands) {
    std::string text = c.text;
    if (is_syntax(text) || text.find(" serve") != std::string::npos) {
      ++n.skipped;
      continue;
    }
    std::smatch m;
    if (std::regex_search(text, m, suite_flag)) imported.push_back(m[1]);
    for (size_t at = 0; (at = text.find("/tmp/", at)) != std::string::npos;) {
      text.replace(at, 5, scratch.path().string() + "/");
      at += scratch.path().string().size() + 1;
    }
    if (text.rfind("kforge ", 0) == 0) text = "build/" + text;
    if (text.find("build/kforge evolve") == 0 && text.find("--dry-run") == std::string::npos)
      text += " --dry-run";
    auto t0 = std::chrono::steady_clock::now();
    test::CliResult r = test::run_command(env + "timeout 300 " + text);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= 10) std::cout << "[ docs ] " << c.where << ": " << int(s) << " s\n";
    ++n.ran;
    SCOPED_TRACE(c.where + ": " + text + "\n" +
                 r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0));
    if (r.code == 0) continue;
    if (r.code == 3) {
      EXPECT_NE(r.out.find("needs an NVIDIA GPU"), std::string::npos)
          << "exit 3 without saying why";
      continue;
    }
    EXPECT_EQ(r.code, 2) << "a documented command failed";
    if (r.code != 2) continue;
    bool missing_file = false;
    for (const fs::path& p : path_words(text, cwd, home))
      if (!fs::exists(p) && (r.out.find(p.filename().string()) != std::string::npos))
        missing_file = true;
    bool needs_state =
        r.out.find("no archive here yet") != std::string::npos || std::regex_search(r.out, no_run);
    for (const std::string& suite : imported)
      if (r.out.find("no task or suite named '" + suite + "'") != std::string::npos)
        needs_state = true;
    bool needs_key = r.out.find("_API_KEY") != std::string::npos;
    EXPECT_TRUE(missing_file || needs_state || needs_key)
        << "exit 2 for a reason other than a file, archive, suite or key the reader supplies";
  }
  return n;
}

TEST(DocsCommands, EveryDocumentedCommandRunsOrSaysWhatItNeeds) {
  // README.md with examples/README.md, and docs/: two sequences, run side by side.
  std::vector<DocCommand> readme, docs;
  for (const char* f : {"README.md", "examples/README.md"})
    for (DocCommand& c : commands_in(source_dir() / f, f)) readme.push_back(std::move(c));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(source_dir() / "docs"))
    if (e.path().extension() == ".md") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files)
    for (DocCommand& c : commands_in(f, fs::relative(f, source_dir()).string()))
      docs.push_back(std::move(c));
  ASSERT_GE(readme.size(), 30u) << "README.md's commands were not found";
  ASSERT_GE(docs.size(), 20u) << "docs/'s commands were not found";
  Counts a, b;
  std::thread other([&] { b = check_commands(docs); });
  a = check_commands(readme);
  other.join();
  std::cout << "[ docs ] " << a.ran + b.ran << " command(s) run, " << a.skipped + b.skipped
            << " syntax or serve line(s) skipped\n";
  EXPECT_GE(a.ran + b.ran, 60u);
}

}  // namespace
}  // namespace kforge
