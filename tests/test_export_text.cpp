// Text from a task file or the archive in an exported package (issue 34, docs/security.md "Export:
// task and archive text in generated code"): it reaches the generated C++ only inside comments and
// string literals, written by one rule, and names that the C++ uses as identifiers are refused,
// never escaped. A package generated from a hostile task summary is compared, token by token, with
// the one generated from the benign summary, and a program that includes its header runs nothing of
// the summary. The fuzz target (Fuzz.ExportText) does the same for mutated text in every field that
// reaches a generated file. A refused winner's reason is said whole.
#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>

#include "fuzz_util.h"
#include "kforge/common/baseline.h"
#include "kforge/common/expr.h"
#include "kforge/common/files.h"
#include "kforge/common/identity.h"
#include "kforge/common/strings.h"
#include "kforge/compile/module.h"
#include "kforge/compile/plan.h"
#include "kforge/export/exporter.h"
#include "kforge/tasks/task.h"
#include "test_util.h"

namespace {

using namespace kforge;
using kforge::test::source_dir;
const auto run = kforge::test::run_command;
using kforge::test::TempDir;
using nlohmann::json;

const std::string kKforge = KFORGE_BINARY;

// The tokens a C++ compiler sees in `in`, read the way most in favour of an attacker: trigraphs
// replaced (GCC does under -std=c++11), a lone CR a line end, line splices joined (also with blanks
// before the line end, as GCC allows); comments dropped; each string or character literal (raw ones
// too) one token "<lit>". A literal or comment left open is a token that says so.
std::vector<std::string> cpp_tokens(const std::string& in) {
  static const std::map<char, char> trigraph = {{'=', '#'}, {'/', '\\'}, {'\'', '^'},
                                                {'(', '['}, {')', ']'},  {'!', '|'},
                                                {'<', '{'}, {'>', '}'},  {'-', '~'}};
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '?' && i + 2 < in.size() && in[i + 1] == '?' && trigraph.count(in[i + 2])) {
      s += trigraph.at(in[i + 2]);
      i += 2;
    } else if (in[i] == '\r') {
      s += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s += in[i];
    }
  }
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      size_t j = i + 1;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j < s.size() && s[j] == '\n') {
        i = j;
        continue;
      }
    }
    t += s[i];
  }
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::vector<std::string> out;
  for (size_t i = 0; i < t.size();) {
    char c = t[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f') {
      ++i;
    } else if (t.compare(i, 2, "//") == 0) {
      i = t.find('\n', i);
      if (i == std::string::npos) break;
    } else if (t.compare(i, 2, "/*") == 0) {
      size_t end = t.find("*/", i + 2);
      if (end == std::string::npos) {
        out.push_back("<open comment>");
        break;
      }
      i = end + 2;
    } else if (ident(c)) {
      size_t b = i;
      while (i < t.size() && ident(t[i])) ++i;
      std::string word = t.substr(b, i - b);
      bool raw = i < t.size() && t[i] == '"' &&
                 (word == "R" || word == "u8R" || word == "uR" || word == "UR" || word == "LR");
      bool prefix = i < t.size() && (t[i] == '"' || t[i] == '\'') &&
                    (word == "u8" || word == "u" || word == "U" || word == "L");
      if (raw) {
        size_t open = t.find('(', i);
        if (open == std::string::npos) {
          out.push_back("<open literal>");
          break;
        }
        std::string close = ")" + t.substr(i + 1, open - i - 1) + "\"";
        size_t end = t.find(close, open);
        if (end == std::string::npos) {
          out.push_back("<open literal>");
          break;
        }
        out.push_back("<lit>");
        i = end + close.size();
      } else if (!prefix) {
        out.push_back(word);
      }
    } else if (c == '"' || c == '\'') {
      size_t j = i + 1;
      while (j < t.size() && t[j] != c && t[j] != '\n') j += t[j] == '\\' ? 2 : 1;
      if (j >= t.size() || t[j] != c) {
        out.push_back("<open literal>");
        i = j;
        continue;
      }
      out.push_back("<lit>");
      i = j + 1;
    } else {
      out.push_back(std::string(1, c));
      ++i;
    }
  }
  return out;
}

// The first tokens where two token lists differ, for a failure message.
std::string first_difference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  auto around = [&](const std::vector<std::string>& v) {
    std::string s;
    for (size_t k = i; k < v.size() && k < i + 12; ++k) s += v[k] + " ";
    return s;
  };
  return "token " + std::to_string(i) + ": [" + around(a) + "] vs [" + around(b) + "]";
}

// The generated C++ files of a package named `ns` under `pkg`.
std::vector<std::string> cpp_files(const std::filesystem::path& pkg, const std::string& ns) {
  return {"include/" + ns + "/" + ns + ".h", "src/" + ns + "_ops.cpp",
          "src/" + ns + "_images.cpp",       "torch/" + ns + "_torch.cpp",
          "src/" + ns + "_runtime.h",        "src/" + ns + "_runtime.cpp"};
}

// The first line of the evolve run's archive export: level1/argmax_dim's winner.
json argmax_line() {
  auto [rc, text] = run(
      "zcat " + (source_dir() / "docs/results/evolve-level1-level2-2026-12-03.jsonl.gz").string() +
      " | head -1");
  json line = json::parse(text);
  EXPECT_EQ(line["task"]["name"], "argmax_dim");
  return line;
}

// level1/argmax_dim.toml under `dir`/tasks with `summary` (TOML text of a basic string's inside),
// its winner's line pointed at that version, and `kforge export` of it into `dir`/`out`.
kforge::test::CliResult export_argmax(const TempDir& dir, const std::string& summary_toml,
                                      const std::string& out,
                                      const std::function<void(json&)>& edit = {}) {
  std::string toml = *read_file((source_dir() / "tasks/level1/argmax_dim.toml").string());
  size_t at = toml.find("summary = \""), end = toml.find('\n', at);
  toml.replace(at, end - at, "summary = \"" + summary_toml + "\"");
  std::filesystem::path file = dir.write("tasks-" + out + "/level1/argmax_dim.toml", toml);
  json line = argmax_line();
  line["task"]["version"] = tasks::load_task(file).content_hash;
  if (edit) edit(line);
  std::filesystem::path jsonl = dir.write(out + ".jsonl", line.dump() + "\n");
  return run(kKforge + " export --harness 2 --from " + jsonl.string() + " --tasks-dir " +
             (dir.path() / ("tasks-" + out)).string() +
             " --task level1/argmax_dim --name kfk --out " + (dir.path() / out).string());
}

// The repro of issue 34: a summary with line ends became C++ in the header; a program including it
// ran system(). Now the package's C++ is the benign summary's, token for token, and compiles.
TEST(ExportText, HostileSummaryStaysInsideComments) {
  TempDir dir;
  const std::string marker = (dir.path() / "PWNED_AT_LOAD").string();
  const std::string hostile =
      "Argmax\\n#include <cstdlib>\\nstatic int kforge_pwn = (std::system(\\\"touch " + marker +
      "\\\"), 0);\\n// ?\?/\\nint also_code = 1; \\\\\\nint spliced = 2;\\r#define CR_CODE 3\\n//";
  auto [rc, text] = export_argmax(dir, hostile, "hostile");
  ASSERT_EQ(rc, 0) << text;
  auto [benign_rc, benign_text] = export_argmax(dir, "Argmax over dim 1", "benign");
  ASSERT_EQ(benign_rc, 0) << benign_text;
  for (const std::string& f : cpp_files(dir.path() / "hostile", "kfk")) {
    std::vector<std::string> h = cpp_tokens(*read_file((dir.path() / "hostile" / f).string()));
    std::vector<std::string> b = cpp_tokens(*read_file((dir.path() / "benign" / f).string()));
    EXPECT_EQ(h, b) << f << ": the hostile summary is code: " << first_difference(h, b);
  }
  std::string header = *read_file((dir.path() / "hostile/include/kfk/kfk.h").string());
  EXPECT_NE(
      header.find("// level1/argmax_dim: Argmax\\012#include <cstdlib>\\012static int kforge_pwn"),
      std::string::npos)
      << "the summary, its line ends written as \\012:\n"
      << header.substr(0, 2000);
  // A program that includes the header (trigraphs on, as -std=c++11 has them) compiles and runs
  // nothing.
  std::string user =
      dir.write("user.cpp", "#include <kfk/kfk.h>\nint main() { return 0; }\n").string();
  auto [cc, cc_out] =
      run("c++ -std=c++17 -trigraphs -Wall -I" + (dir.path() / "hostile/include").string() + " -I" +
          compile::cuda_include_dir() + " " + user + " -o " + (dir.path() / "user").string() +
          " && " + (dir.path() / "user").string());
  EXPECT_EQ(cc, 0) << cc_out;
  EXPECT_FALSE(std::filesystem::exists(marker))
      << "including the exported header ran the task summary's system()";
  auto [ops, ops_out] =
      run("c++ -std=c++17 -trigraphs -fsyntax-only -Wall -I" +
          (dir.path() / "hostile/include").string() + " -I" +
          (dir.path() / "hostile/src").string() + " -I" + compile::cuda_include_dir() + " " +
          (dir.path() / "hostile/src/kfk_ops.cpp").string());
  EXPECT_EQ(ops, 0) << ops_out;
}

// A winner whose source kforge refuses is left out with the whole reason (it was cut at the first
// line end: "the source does not compile:" and nothing after).
TEST(ExportText, RefusedSourceSaysWhyInFull) {
  TempDir dir;
  auto [rc, text] = export_argmax(dir, "Argmax over dim 1", "refused", [](json& line) {
    std::string source =
        "#include \"/etc/passwd\"\n" + line["candidate"]["source"].get<std::string>();
    line["candidate"]["source"] = source;
    std::map<std::string, int64_t> tunables;
    for (const auto& [k, v] : line["candidate"]["tunables"].items()) tunables[k] = v.get<int64_t>();
    line["candidate"]["identity"] = candidate_identity(source, line["candidate"]["plan"], tunables);
    line["CUDA_Code"] = source;
  });
  EXPECT_EQ(rc, 1) << text;
  EXPECT_NE(text.find("level1/argmax_dim: not exported: its winner cannot be exported"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kforge did not compile this source"), std::string::npos) << text;
  EXPECT_NE(text.find("/etc/passwd"), std::string::npos) << "the refused include, named:\n" << text;
  EXPECT_NE(text.find("an absolute path"), std::string::npos) << "why it is refused:\n" << text;
  // Nothing left to export (issue 40): no package, and the last line says so.
  EXPECT_NE(text.find("0 op(s) exported, 1 task(s) left out: no package written"),
            std::string::npos)
      << text;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "refused"));
}

// A softmax op (smoke/softmax, a two-launch plan with a workspace) built without NVRTC, for the
// generators alone.
struct OpFixture {
  std::shared_ptr<tasks::Task> task;
  exporter::ExportResult result;
  static OpFixture make() {
    OpFixture f;
    f.task =
        std::make_shared<tasks::Task>(tasks::load_task(source_dir() / "tasks/smoke/softmax.toml"));
    exporter::Op op;
    op.op = "softmax";
    op.task = f.task;
    op.tensors = {{"x", tasks::Dtype::Float32, compile::TensorRole::Input},
                  {"out", tasks::Dtype::Float32, compile::TensorRole::Output}};
    op.output_shapes = {{Expr::parse("B"), Expr::parse("N")}};
    const std::string plan = R"json({
  "launch": [
    { "kernel": "partial<BLOCK>", "grid": ["ceil_div(B * N, BLOCK)"], "block": ["BLOCK"], "args": ["x", "part", "B * N"] },
    { "kernel": "finish", "grid": [1], "block": [32], "args": ["part", "out", "B", "N"] }
  ],
  "workspace": [ { "name": "part", "dtype": "float32", "count": "ceil_div(B * N, BLOCK)", "zero_init": true } ],
  "tune": { "BLOCK": [256, 512] },
  "constraints": ["BLOCK % 32 == 0"]
})json";
    std::vector<compile::TensorInfo> with_ws = op.tensors;
    op.plan = compile::parse_plan_text(plan, *f.task, op.tensors);
    op.tunables = {{"BLOCK", 256}};
    compile::ParamType ptr;
    ptr.kind = compile::ParamType::Kind::Pointer;
    compile::ParamType i64;
    i64.kind = compile::ParamType::Kind::Integer;
    i64.bits = 64;
    op.kernels = {{"partial<BLOCK>", "_Z7partialILi256EEvPKfPfx", "", {}, {ptr, ptr, i64}},
                  {"finish", "finish", "", {}, {ptr, ptr, i64, i64}}};
    op.images = {{"sm_90a", 90, false, "cubin"},
                 {"compute_90a", 90, true, std::string("ptx\0", 4)}};
    op.manifest = {{"candidate", {{"identity", "0123456789abcdef0123456789abcdef"}}},
                   {"judged",
                    {{"device", "NVIDIA H100"},
                     {"time_ms", 2.0},
                     {"baselines", {{"eager", 3.0}, {"compiled", 2.4}}},
                     {"speedup", {{"eager", 1.5}, {"compiled", 1.2}, {"best", 1.2}}},
                     {"best_baseline", "compiled"}}},
                   {"reference_torchscript", "def forward(x):\n  return x\n"}};
    exporter::Op fb = op;
    fb.op = "softmax_ref";
    fb.fallback = true;
    fb.images.clear();
    fb.kernels.clear();
    f.result.ops = {op, fb};
    f.result.missing = {{"smoke/relu", "no kernel"}};
    return f;
  }
};

std::string printf_fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// Each file of the package written for `r`, by name.
std::map<std::string, std::string> package_files(const exporter::ExportResult& r,
                                                 const std::filesystem::path& out) {
  exporter::ExportOptions o;
  o.out = out;
  o.name = "kfk";
  exporter::write_package(o, r);
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(out))
    if (e.is_regular_file())
      files[std::filesystem::relative(e.path(), out).string()] = *read_file(e.path().string());
  return files;
}

// The text fields of a task or the archive that reach generated files, all set to `text`.
exporter::ExportResult with_text(const OpFixture& f, const std::string& text) {
  exporter::ExportResult r = f.result;
  auto task = std::make_shared<tasks::Task>(*f.task);
  task->summary = text;
  task->suite = text;
  for (exporter::Op& op : r.ops) {
    op.task = task;
    op.manifest["candidate"]["identity"] = text;
    op.manifest["reference_torchscript"] = text;
    for (compile::LaunchSpec& l : op.plan.launches) l.kernel = text;
    for (compile::KernelReport& k : op.kernels) k.lowered = text;
  }
  r.missing[0].why = text;
  return r;
}

// What differs, as code, between the package for `text` and for a benign text: "" when nothing.
std::string code_difference(const OpFixture& f, const std::string& text,
                            const std::filesystem::path& dir,
                            const std::map<std::string, std::string>& benign) {
  std::map<std::string, std::string> files = package_files(with_text(f, text), dir);
  std::string problems;
  for (const auto& [name, content] : benign) {
    auto it = files.find(name);
    if (it == files.end()) {
      problems += name + ": missing; ";
      continue;
    }
    bool cpp = name.ends_with(".h") || name.ends_with(".cpp");
    if (cpp) {
      std::vector<std::string> a = cpp_tokens(it->second), b = cpp_tokens(content);
      if (a != b) problems += name + ": " + first_difference(a, b) + "; ";
    } else if (name.ends_with(".py") || name.ends_with(".txt") || name.ends_with(".toml")) {
      if (it->second != content)
        problems += name + ": differs from the benign text's; ";  // templates: no text put in
    }
  }
  return problems;
}

TEST(ExportText, EveryTextFieldStaysInsideCommentsAndLiterals) {
  TempDir dir;
  OpFixture f = OpFixture::make();
  std::map<std::string, std::string> benign =
      package_files(with_text(f, "benign text"), dir.path() / "benign");
  for (const std::string& text :
       {std::string("a\nint x = 1;"), std::string("a \\"), std::string("?\?/"),
        std::string("\"); system(\"x"), std::string("a\rint y;"), std::string("*/ int z; /*"),
        std::string("\\\nint w;"), std::string("a\0b", 3), std::string("\xe2\x80\xa8 \xff"),
        std::string("0123\\x41\\101")}) {
    EXPECT_EQ(code_difference(f, text, dir.path() / "hostile", benign), "") << printable(text);
  }
  // A literal holds the text itself: the reference, compiled at run time by a --fallback op.
  std::string torch = *read_file((dir.path() / "hostile/torch/kfk_torch.cpp").string());
  EXPECT_NE(torch.find("torch::jit::compile(\"0123\\134x41\\134101\")"), std::string::npos)
      << torch;
}

// The README's table has a column per kind of baseline (a kind added to baseline_kinds() too) and
// x best, read from the manifest's "speedup"; each op's Python docstring says the same, the best
// baseline named.
TEST(ExportText, TheSpeedupsOverEveryBaselineAndTheBestAreShown) {
  TempDir dir;
  OpFixture f = OpFixture::make();
  std::map<std::string, std::string> files = package_files(f.result, dir.path() / "pkg");
  const json& speedup = f.result.ops[0].manifest["judged"]["speedup"];
  std::string heading = "| op | task |", row = "| softmax | smoke/softmax |";
  for (const BaselineKindInfo& info : baseline_kinds()) {
    heading += " x " + std::string(info.label) + " |";
    const json x = speedup.value(std::string(info.name), json());
    row += " " + (x.is_number() ? printf_fixed(x.get<double>()) : std::string("-")) + " |";
  }
  heading += " x best | judged on |";
  row += " 1.20 | NVIDIA H100 |";
  const std::string& readme = files["README.md"];
  EXPECT_NE(readme.find(heading), std::string::npos) << readme;
  EXPECT_NE(readme.find(row), std::string::npos) << readme;
  EXPECT_NE(readme.find("| softmax_ref | smoke/softmax |"), std::string::npos) << readme;
  json manifest = json::parse(files["manifest.json"]);
  ASSERT_EQ(manifest["baseline_kinds"].size(), baseline_kinds().size());
  for (size_t i = 0; i < baseline_kinds().size(); ++i)
    EXPECT_EQ(manifest["baseline_kinds"][i]["label"], std::string(baseline_kinds()[i].label));
  // The docstring's words, from __init__.py's _speedups (torch is not needed for it).
  auto [rc, words] =
      run("python3 -c 'import ast, json, sys; tree = ast.parse(open(sys.argv[1]).read()); ns = "
          "{\"manifest\": json.load(open(sys.argv[2]))}; exec(compile(ast.Module([n for n in "
          "tree.body if isinstance(n, ast.FunctionDef) and n.name == \"_speedups\"], []), \"i\", "
          "\"exec\"), ns); print(ns[\"_speedups\"](ns[\"manifest\"][\"ops\"][0][\"judged\"]))' " +
          (dir.path() / "pkg/python/kfk/__init__.py").string() + " " +
          (dir.path() / "pkg/manifest.json").string());
  EXPECT_EQ(rc, 0) << words;
  EXPECT_EQ(words, "1.50x vs eager, 1.20x vs compile, 1.20x vs compile, the best baseline\n");
}

// Names that the generated C++ uses as identifiers (the op, tensors, dims, tunables, workspaces,
// the package) are refused with an error naming the task and field, never escaped.
TEST(ExportText, NamesAreRefusedNotEscaped) {
  TempDir dir;
  OpFixture f = OpFixture::make();
  auto refused =
      [&](const std::function<void(exporter::ExportResult&, exporter::ExportOptions&)>& edit,
          const std::string& says) {
        exporter::ExportResult r = f.result;
        exporter::ExportOptions o;
        o.out = dir.path() / "pkg";
        edit(r, o);
        try {
          exporter::write_package(o, r);
          ADD_FAILURE() << says << ": written";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
      };
  refused(
      [](exporter::ExportResult& r, exporter::ExportOptions&) {
        r.ops[0].tunables = {{"B=1;int x", 256}};
      },
      "smoke/softmax: tunables: 'B=1;int x' is not a C++ identifier");
  refused([](exporter::ExportResult& r, exporter::ExportOptions&) { r.ops[0].op = "a(){}int b"; },
          "smoke/softmax: op name");
  refused([](exporter::ExportResult& r,
             exporter::ExportOptions&) { r.ops[0].tensors[0].name = "x, int y"; },
          "smoke/softmax: tensors: 'x, int y'");
  refused([](exporter::ExportResult& r,
             exporter::ExportOptions&) { r.ops[0].plan.workspaces[0].name = "p\nq"; },
          "smoke/softmax: plan.workspace: 'p\\012q' is not a C++ identifier");
  refused([](exporter::ExportResult&, exporter::ExportOptions& o) { o.name = "k)\nexec(\"x\")#"; },
          "package name");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "pkg"))
      << "nothing is written when a name is refused";
}

}  // namespace

namespace {

using namespace kforge::test::fuzzing;

// Mutated task and archive text through every generator: the package's C++ is the benign text's,
// token for token (the text only inside comments and literals), and its CMake and Python files are
// the templates, whatever the text.
// A package is written (each file synced) for every case: on tmpfs where there is one.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string templ =
        ::access("/dev/shm", W_OK) == 0 ? "/dev/shm/kforge-fuzz-XXXXXX" : "/tmp/kforge-fuzz-XXXXXX";
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for " + templ);
    path = templ;
  }
  ~ScratchDir() {
    ::nftw(
        path.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
};

TEST(Fuzz, ExportText) {
  ScratchDir dir;
  OpFixture f = OpFixture::make();
  std::map<std::string, std::string> benign =
      package_files(with_text(f, "benign text"), std::filesystem::path(dir.path) / "benign");
  std::vector<std::string> seeds = {
      "Argmax (int64 indices) over dim 1 of a 3-D float32 tensor",
      "Argmax\n#include <cstdlib>\nstatic int p = (std::system(\"touch /tmp/x\"), 0);\n//",
      "partial<BLOCK, 4>",
      "_Z7partialILi256EEvPKfPfx",
      "0123456789abcdef0123456789abcdef",
      "def forward(x: Tensor) -> Tensor:\n    return torch.argmax(x, dim=1)\n",
      "?\?/ \\ */ \r \" '"};
  std::string failures = fuzz(seeds, 1000, 40, 34, [&](const std::string& text) -> std::string {
    return code_difference(f, text.substr(0, 16384), std::filesystem::path(dir.path) / "fuzzed",
                           benign);
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
