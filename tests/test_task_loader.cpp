// The task file contract (docs/task-format.md): valid files load, and every malformed file gives
// an error naming the file, the line where known, the field and the problem.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "kforge/tasks/task.h"
#include "test_util.h"

namespace {

using kforge::InputError;
using kforge::tasks::Dtype;
using kforge::tasks::InitKind;
using kforge::tasks::load_task;
using kforge::test::TempDir;
using kforge::test::valid_task;

std::string replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "test bug: '" << from << "' not in the task";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(TaskLoader, LoadsAValidTask) {
  TempDir dir;
  auto t = load_task(dir.write("suite/t.toml", valid_task()));
  EXPECT_EQ(t.name, "t");
  EXPECT_EQ(t.suite, "suite");
  EXPECT_EQ(t.id(), "suite/t");
  EXPECT_EQ(t.dims.at("N"), 64);
  ASSERT_EQ(t.inputs.size(), 1u);
  EXPECT_EQ(t.inputs[0].dtype, Dtype::Float32);
  EXPECT_EQ(t.inputs[0].init.kind, InitKind::Randn);
  EXPECT_EQ(t.check_dims.size(), 2u);
  EXPECT_EQ(t.all_dims().size(), 3u);
  EXPECT_EQ(t.input_bytes(t.dims), 64 * 4);
  EXPECT_EQ(t.content_hash.size(), 32u);
}

TEST(TaskLoader, ContentHashChangesWithTheFile) {
  TempDir dir;
  auto a = load_task(dir.write("s/t.toml", valid_task()));
  auto b = load_task(
      dir.write("s2/t.toml", replace(valid_task(), "summary = \"relu\"", "summary = \"relu!\"")));
  EXPECT_NE(a.content_hash, b.content_hash);
}

TEST(TaskLoader, OptionalFields) {
  TempDir dir;
  std::string text = replace(valid_task(), "reference =", R"(deterministic = true
allow_tf32 = true
flops = "2 * N"
min_bytes = "8 * N"
constraints = ["N % 1 == 0"]
tags = ["a", "b"]
reference =)");
  text += R"(
[[outputs]]
name = "y"
dtype = "float32"
tolerance = 1e-3
shape = ["N - 2"]
)";
  auto t = load_task(dir.write("s/t.toml", text));
  EXPECT_TRUE(t.deterministic);
  EXPECT_TRUE(t.allow_tf32);
  EXPECT_EQ(t.flops->eval_int(t.dims), 128);
  EXPECT_EQ(t.min_bytes->eval_int(t.dims), 512);
  ASSERT_EQ(t.outputs.size(), 1u);
  EXPECT_EQ(t.outputs[0].name, "y");
  EXPECT_DOUBLE_EQ(*t.outputs[0].tolerance, 1e-3);
  ASSERT_EQ(t.outputs[0].shape.size(), 1u);
  EXPECT_EQ(t.outputs[0].shape[0].eval_int(t.dims), 62);
  EXPECT_EQ(t.tags.size(), 2u);
}

// Computed inputs (docs/task-format.md, issue 38): a transform, the draw's own dtype and further
// draws are read as written.
TEST(TaskLoader, ComputedInputs) {
  TempDir dir;
  std::string text = replace(valid_task(), "reference = \"\"\"\ndef forward(x: Tensor)",
                             "reference = \"\"\"\ndef forward(x: Tensor, t: Tensor)");
  text = replace(text, "init = \"randn\"\n", R"toml(init = "randn"
transform = "  (x * scale).softmax(dim=-1) + F.relu(offset)  "
[[inputs.draws]]
name = "scale"
shape = []
init = "rand"
[[inputs.draws]]
name = "offset"
dtype = "float64"
shape = ["2 * N"]
init = "normal(0, 0.5)"

[[inputs]]
name = "t"
dtype = "float32"
shape = ["N"]
init = "randint(0, 2)"
draw_dtype = "int64"
transform = "t.float() * 2 - 1"
)toml");
  auto t = load_task(dir.write("s/t.toml", text));
  ASSERT_EQ(t.inputs.size(), 2u);
  const auto& x = t.inputs[0];
  EXPECT_EQ(x.transform, "(x * scale).softmax(dim=-1) + F.relu(offset)");  // trimmed
  EXPECT_FALSE(x.draw_dtype.has_value());
  ASSERT_EQ(x.draws.size(), 2u);
  EXPECT_EQ(x.draws[0].name, "scale");
  EXPECT_EQ(x.draws[0].dtype, Dtype::Float32);  // the input's, by default
  EXPECT_TRUE(x.draws[0].shape.empty());
  EXPECT_EQ(x.draws[0].init.kind, InitKind::Rand);
  EXPECT_EQ(x.draws[1].dtype, Dtype::Float64);
  EXPECT_EQ(x.draws[1].shape.at(0).eval_int(t.dims), 128);
  EXPECT_EQ(x.draws[1].init.kind, InitKind::Normal);
  const auto& targets = t.inputs[1];
  EXPECT_EQ(targets.dtype, Dtype::Float32);
  EXPECT_EQ(targets.draw_dtype, Dtype::Int64);
  EXPECT_EQ(targets.drawn_dtype(), Dtype::Int64);
  EXPECT_EQ(targets.init.kind, InitKind::Randint);  // randint: it draws int64
  EXPECT_EQ(kforge::tasks::values_text(targets), "randint(0, 2) (int64), then t.float() * 2 - 1");
  EXPECT_EQ(kforge::tasks::values_text(x),
            "randn, then (x * scale).softmax(dim=-1) + F.relu(offset) (scale: rand float32 []; "
            "offset: normal(0, 0.5) float64 [2 * N])");
  // Draws are not inputs: their bytes do not count.
  EXPECT_EQ(t.input_bytes(t.dims), 2 * 64 * 4);
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

struct Malformed {
  const char* label;
  std::string text;
  std::string field;     // expected InputError::field() prefix ("" for file-level)
  std::string fragment;  // expected in the problem
  int line;              // expected line, 0 when none is expected
};

std::vector<Malformed> malformed_cases() {
  const std::string v = valid_task();
  // The valid task with more keys for its input, after its init line (line 15).
  auto after_init = [&](const std::string& keys) {
    return replace(v, "init = \"randn\"", "init = \"randn\"\n" + keys);
  };
  return {
      {"not TOML", v + "\n[dims\n", "", "not valid TOML", 20},
      {"unknown top-level key", replace(v, "summary =", "dim = 3\nsummary ="), "dim", "unknown key",
       2},
      {"missing name", replace(v, "name = \"t\"\n", ""), "name", "missing", 0},
      {"name differs from file", replace(v, "name = \"t\"", "name = \"other\""), "name",
       "must equal the file name", 1},
      {"missing summary", replace(v, "summary = \"relu\"\n", ""), "summary", "missing", 0},
      {"missing reference", replace(replace(v, "reference = \"\"\"", "x = \"\"\""), "x = ", "#"),
       "", "", 0},
      {"no dims", replace(v, "[dims]\nN = 64\n", ""), "dims", "missing", 0},
      {"non-positive dim", replace(v, "N = 64", "N = 0"), "dims.N", "at least 1", 9},
      {"string dim", replace(v, "N = 64", "N = \"64\""), "dims.N", "must be an integer", 9},
      {"unknown dtype", replace(v, "\"float32\"", "\"float31\""), "inputs[0] (x).dtype",
       "unknown dtype 'float31'", 13},
      {"shape names an undefined dim", replace(v, "[\"N\"]", "[\"N\", \"M\"]"),
       "inputs[0] (x).shape[1]", "'M' is not a dim", 14},
      {"shape not an array", replace(v, "[\"N\"]", "\"N\""), "inputs[0] (x).shape", "missing", 14},
      {"unknown init", replace(v, "\"randn\"", "\"gaussian\""), "inputs[0] (x).init",
       "unknown init 'gaussian'", 15},
      {"init arity", replace(v, "\"randn\"", "\"uniform(0)\""), "inputs[0] (x).init",
       "takes 2 argument(s)", 15},
      {"init bounds reversed", replace(v, "\"randn\"", "\"uniform(1, 0)\""), "inputs[0] (x).init",
       "lo must be below hi", 15},
      {"init for the wrong dtype", replace(v, "\"randn\"", "\"randint(0, 10)\""),
       "inputs[0] (x).init", "cannot draw float32", 15},
      {"randint bound names an undefined dim",
       replace(replace(v, "\"float32\"", "\"int64\""), "\"randn\"", "\"randint(0, C)\""),
       "inputs[0] (x).init", "'C' is not a dim", 15},
      {"bad init expression", replace(v, "\"randn\"", "\"normal(0, 1 +)\""), "inputs[0] (x).init",
       "ends too early", 15},
      {"duplicate input",
       v + "\n[[inputs]]\nname = \"x\"\ndtype = \"float32\"\nshape = [\"N\"]\ninit = \"randn\"\n",
       "inputs[1] (x).name", "duplicate input name", 21},
      {"unknown input key", after_init("layout = \"nchw\""), "inputs[0] (x).layout", "unknown key",
       16},
      {"check config misses a dim", replace(v, "{ N = 1 }", "{ M = 1 }"), "check.dims[0]",
       "missing dim 'N'", 18},
      {"constraint violated by a check config",
       replace(v, "reference =", "constraints = [\"N % 2 == 0\"]\nreference ="), "constraints[0]",
       "does not hold for check.dims[0]", 3},
      {"constraint names an unknown dim",
       replace(v, "reference =", "constraints = [\"K > 0\"]\nreference ="), "constraints[0]",
       "'K' is not a dim", 3},
      {"reference does not compile", replace(v, "torch.relu(x)", "torch.relu(x"), "reference",
       "does not compile", 0},
      {"forward arity", replace(v, "forward(x: Tensor)", "forward(x: Tensor, y: Tensor)"),
       "reference", "takes 2 argument(s) but the task declares 1", 0},
      {"forward argument not a Tensor",
       replace(v, "forward(x: Tensor) -> Tensor:\n    return torch.relu(x)",
               "forward(x: int) -> Tensor:\n    return torch.zeros([x])"),
       "reference", "must be a Tensor", 0},
      {"unknown F. function", replace(v, "torch.relu(x)", "F.frobnicate(x)"), "reference",
       "F.frobnicate is not in", 5},
      {"outputs count differs", v + "\n[[outputs]]\nname = \"a\"\n[[outputs]]\nname = \"b\"\n",
       "outputs", "declares 2 output(s) but forward() returns 1", 0},
      {"tolerance out of range", v + "\n[[outputs]]\nname = \"a\"\ntolerance = 2.0\n",
       "outputs[0].tolerance", "must be in (0, 1)", 22},
      {"output shape names an undefined dim",
       v + "\n[[outputs]]\nname = \"a\"\nshape = [\"N\", \"M\"]\n", "outputs[0].shape[1]",
       "'M' is not a dim", 22},
      {"batch_dim not a dim", replace(v, "reference =", "batch_dim = \"B\"\nreference ="),
       "batch_dim", "'B' is not one of the task's dims", 3},
      {"batch_dim not a string", replace(v, "reference =", "batch_dim = 1\nreference ="),
       "batch_dim", "must be a string naming a dim", 3},
      {"an input not led by the batch_dim",
       replace(replace(replace(v, "reference =", "batch_dim = \"B\"\nreference ="), "N = 64",
                       "N = 64\nB = 2"),
               "{ N = 1 }, { N = 37 }", "{ N = 1, B = 1 }"),
       "inputs[0] (x).shape", "must begin with the batch_dim 'B'", 16},
      {"bool with randn", replace(replace(v, "\"float32\"", "\"bool\""), "\"randn\"", "\"randn\""),
       "inputs[0] (x).init", "cannot draw bool", 15},
      {"shape evaluates to zero", replace(v, "[\"N\"]", "[\"N - 1\"]"), "inputs[0] (x).shape[0]",
       "sizes must be at least 1", 14},
      // Issue 16: deep or long input is an error naming the file, never a crash.
      {"key of 100000 dotted parts", v + "\na" + repeat(".a", 100000) + " = 1\n", "",
       "a key of more than 32 dotted parts", 20},
      {"table header of 100000 parts", v + "\n[a" + repeat(".a", 100000) + "]\n", "",
       "a key of more than 32 dotted parts", 20},
      {"arrays nested 100000 deep",
       v + "\nx = " + std::string(100000, '[') + std::string(100000, ']') + "\n", "",
       "nested more than 32 levels deep", 20},
      {"inline tables nested 100000 deep",
       v + "\nx = " + repeat("{a = ", 100000) + "1" + std::string(100000, '}') + "\n", "",
       "nested more than 32 levels deep", 20},
      {"expression nested 2000 deep",
       replace(v, "[\"N\"]", "[\"" + std::string(2000, '(') + "N" + std::string(2000, ')') + "\"]"),
       "inputs[0] (x).shape[0]", "nests more than 64 levels", 14},
      {"expression of 100000 terms", replace(v, "[\"N\"]", "[\"N" + repeat(" + N", 100000) + "\"]"),
       "inputs[0] (x).shape[0]", "an expression may have at most 4096", 14},
      {"input bytes overflow 64 bits",
       replace(replace(v, "N = 64", "N = 2147483648"), "[\"N\"]", "[\"N\", \"N\"]"), "inputs",
       "overflow 64 bits", 0},
      {"reference line of 10000 characters",
       replace(v, "torch.relu(x)", "torch.relu(x" + repeat(" + x", 2500) + ")"), "reference",
       "a line of 10024 characters; the limit is 1000", 5},
      {"reference of 40 KB",
       replace(v, "torch.relu(x)", "torch.relu(x" + repeat(" + x", 10000) + ")"), "reference",
       "40059 bytes; a reference may have at most 32768", 4},
      {"reference nested 100 deep",
       replace(v, "torch.relu(x)", std::string(100, '(') + "torch.relu(x)" + std::string(100, ')')),
       "reference", "brackets nested more than 32 levels deep", 5},
      // Computed inputs (issue 38): a transform over the draws, compiled when the file loads.
      {"transform does not compile", after_init("transform = \"torch.softmax(x,\""),
       "inputs[0] (x).transform", "does not compile as TorchScript", 16},
      {"transform reads an undeclared draw", after_init("transform = \"x * scale\""),
       "inputs[0] (x).transform", "scale", 16},
      {"transform that returns no Tensor", after_init("transform = \"x.sum().item()\""),
       "inputs[0] (x).transform", "does not compile as TorchScript", 16},
      {"transform not a string", after_init("transform = 3"), "inputs[0] (x).transform",
       "must be a string", 16},
      {"transform over two lines", after_init("transform = \"x\\n* 2\""), "inputs[0] (x).transform",
       "must be one line", 16},
      {"transform of 1201 characters",
       replace(v, "init = \"randn\"",
               "init = \"randn\"\ntransform = \"x" + repeat(" + x", 300) + "\""),
       "inputs[0] (x).transform", "1201 characters; a transform may have at most 1000", 16},
      {"unknown F. function in a transform", after_init("transform = \"F.frobnicate(x)\""),
       "inputs[0] (x).transform", "F.frobnicate is not in", 16},
      {"draw_dtype without a transform", after_init("draw_dtype = \"int64\""),
       "inputs[0] (x).draw_dtype", "only a computed input", 16},
      {"draws without a transform",
       replace(v, "init = \"randn\"",
               "init = \"randn\"\n[[inputs.draws]]\nname = \"s\"\nshape = []\ninit = \"rand\""),
       "inputs[0] (x).draws", "only a computed input", 0},
      {"init that cannot draw the draw_dtype",
       replace(v, "init = \"randn\"",
               "init = \"randn\"\ndraw_dtype = \"int64\"\ntransform = \"x.float()\""),
       "inputs[0] (x).init", "cannot draw int64", 15},
      {"draw named as its input",
       replace(
           v, "init = \"randn\"",
           "init = \"randn\"\ntransform = \"x * 2\"\n[[inputs.draws]]\nname = \"x\"\nshape = []\n"
           "init = \"rand\""),
       "inputs[0] (x).draws[0] (x).name", "is taken", 18},
      {"unknown draw key",
       replace(
           v, "init = \"randn\"",
           "init = \"randn\"\ntransform = \"x * s\"\n[[inputs.draws]]\nname = \"s\"\nshape = []\n"
           "init = \"rand\"\nlayout = \"nchw\""),
       "inputs[0] (x).draws[0] (s).layout", "unknown key", 21},
      {"draw shape names an undefined dim",
       replace(v, "init = \"randn\"",
               "init = \"randn\"\ntransform = \"x * s\"\n[[inputs.draws]]\nname = \"s\"\nshape = "
               "[\"M\"]\n"
               "init = \"rand\""),
       "inputs[0] (x).draws[0] (s).shape[0]", "'M' is not a dim", 19},
      {"draw init bounds reversed",
       replace(
           v, "init = \"randn\"",
           "init = \"randn\"\ntransform = \"x * s\"\n[[inputs.draws]]\nname = \"s\"\nshape = []\n"
           "init = \"uniform(1, 0)\""),
       "inputs[0] (x).draws[0] (s).init", "lo must be below hi", 20},
      {"nine draws",
       replace(v, "init = \"randn\"",
               "init = \"randn\"\ntransform = \"x\"\n" +
                   repeat("[[inputs.draws]]\nname = \"s\"\nshape = []\ninit = \"rand\"\n", 9)),
       "inputs[0] (x).draws", "9 draws; an input may have at most 8", 0},
      {"range_shift not an integer", after_init("range_shift = 0.5"), "inputs[0] (x).range_shift",
       "must be an integer from -40 to 40", 16},
      {"range_shift past float32", after_init("range_shift = 100"), "inputs[0] (x).range_shift",
       "must be an integer from -40 to 40", 16},
      {"range_shift on float16",
       replace(replace(v, "\"float32\"", "\"float16\""), "init = \"randn\"",
               "init = \"randn\"\nrange_shift = -16"),
       "inputs[0] (x).range_shift", "only a float32 input drawn as it is", 16},
      {"range_shift with a transform", after_init("transform = \"x * 2\"\nrange_shift = 8"),
       "inputs[0] (x).range_shift", "only a float32 input drawn as it is", 17},
      {"reference of 2000 lines",
       replace(v, "    return torch.relu(x)",
               repeat("    x = x + 1\n", 2000) + "    return torch.relu(x)"),
       "reference", "2002 lines; a reference may have at most 1000", 1004},
  };
}

class MalformedTask : public ::testing::TestWithParam<size_t> {};

TEST_P(MalformedTask, GivesAPreciseError) {
  const Malformed c = malformed_cases()[GetParam()];
  TempDir dir;
  auto file = dir.write("suite/t.toml", c.text);
  try {
    load_task(file);
    FAIL() << c.label << ": loaded without error";
  } catch (const InputError& e) {
    SCOPED_TRACE(std::string(c.label) + ": " + e.what());
    EXPECT_EQ(e.file(), file.string());
    EXPECT_EQ(e.field().rfind(c.field, 0), 0u) << "field was '" << e.field() << "'";
    EXPECT_NE(e.problem().find(c.fragment), std::string::npos);
    if (c.line) {
      ASSERT_TRUE(e.line().has_value());
      EXPECT_EQ(*e.line(), c.line);
    }
    // The message a user sees carries file, field and problem together.
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MalformedTask,
                         ::testing::Range<size_t>(0, malformed_cases().size()),
                         [](const auto& info) {
                           return kforge::test::test_name(malformed_cases()[info.param].label);
                         });

TEST(TaskLoader, ReferenceErrorPointsAtTheFileLine) {
  TempDir dir;
  std::string text = replace(valid_task(), "    return torch.relu(x)",
                             "    y = torch.relu(x)\n    return torch.nosuchop(y)");
  auto file = dir.write("suite/t.toml", text);
  try {
    load_task(file);
    FAIL();
  } catch (const InputError& e) {
    ASSERT_TRUE(e.line().has_value()) << e.what();
    EXPECT_EQ(*e.line(), 6) << e.what();
    EXPECT_NE(e.problem().find("nosuchop"), std::string::npos);
    EXPECT_NE(e.problem().find(file.string() + "\", line 6"), std::string::npos) << e.what();
  }
}

TEST(TaskLoader, ResolvesSpecs) {
  TempDir dir;
  dir.write("a/x.toml", valid_task("x"));
  dir.write("a/y.toml", valid_task("y"));
  dir.write("b/y.toml", valid_task("y"));
  using kforge::tasks::resolve_tasks;
  EXPECT_EQ(resolve_tasks("a", dir.path()).size(), 2u);
  EXPECT_EQ(resolve_tasks("a/x", dir.path()).size(), 1u);
  EXPECT_EQ(resolve_tasks("x", dir.path()).size(), 1u);
  EXPECT_EQ(resolve_tasks((dir.path() / "b/y.toml").string(), dir.path()).size(), 1u);
  EXPECT_THROW(resolve_tasks("y", dir.path()), kforge::Error);  // ambiguous
  EXPECT_THROW(resolve_tasks("zzz", dir.path()), kforge::Error);
}

// Issue 16: a symlink loop made std::filesystem throw, and kforge exit 4.
TEST(TaskLoader, ASymlinkLoopIsAnInputError) {
  TempDir dir;
  dir.write("a/x.toml", valid_task("x"));
  ASSERT_EQ(::symlink((dir.path() / "loop.toml").c_str(), (dir.path() / "loop.toml").c_str()), 0);
  ASSERT_EQ(::symlink((dir.path() / "b/y.toml").c_str(), (dir.path() / "b").c_str()), 0);
  using kforge::tasks::resolve_tasks;
  for (const std::string& spec : {(dir.path() / "loop.toml").string(), std::string("loop"),
                                  (dir.path() / "b/y.toml").string()}) {
    try {
      resolve_tasks(spec, dir.path());
      ADD_FAILURE() << spec << ": no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot read"), std::string::npos) << e.what();
    } catch (const kforge::Error& e) {
      ADD_FAILURE() << spec << ": " << e.what();  // "no task named ...": not the reason
    }
  }
  EXPECT_EQ(resolve_tasks("a/x", dir.path()).size(), 1u);
}

// Issue 34: a FIFO named like a task file hung the loader (it read from the pipe); now it is an
// InputError naming the file, and nothing is read. A writer feeds the FIFO a valid task for up to
// a second, so without the check the test fails (the task loads) instead of hanging.
TEST(TaskLoader, AFifoIsAnInputErrorNotARead) {
  TempDir dir;
  std::string fifo = (dir.path() / "pipe.toml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::string text = valid_task("pipe");
    for (int i = 0; i < 100; ++i) {
      int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) {
        (void)!::write(fd, text.data(), text.size());
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // ENXIO: no reader yet
    }
  });
  try {
    load_task(fifo);
    ADD_FAILURE() << "a FIFO loaded as a task";
  } catch (const InputError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(fifo), std::string::npos) << what;
    EXPECT_NE(what.find("FIFO"), std::string::npos) << what;
  }
  writer.join();
}

TEST(UnseenDims, SatisfyConstraintsDifferFromShownDimsAndRepeatPerSeed) {
  // Admission's dims: never the timed or a check configuration, within the constraints and bounds.
  for (const char* spec :
       {"smoke/relu", "smoke/softmax", "level1/matmul_square", "level1/conv2d"}) {
    auto files = kforge::tasks::resolve_tasks(spec, kforge::tasks::default_tasks_root());
    ASSERT_EQ(files.size(), 1u) << spec;
    kforge::tasks::Task t = load_task(files[0]);
    std::vector<kforge::tasks::Dims> drawn = kforge::tasks::draw_unseen_dims(t, 42, 3);
    ASSERT_EQ(drawn.size(), 3u) << spec;
    EXPECT_EQ(drawn, kforge::tasks::draw_unseen_dims(t, 42, 3))
        << spec << ": not deterministic in the seed";
    EXPECT_NE(drawn, kforge::tasks::draw_unseen_dims(t, 43, 3)) << spec;
    std::vector<kforge::tasks::Dims> shown = t.all_dims();
    for (const auto& d : drawn) {
      EXPECT_EQ(std::find(shown.begin(), shown.end(), d), shown.end())
          << spec << ": " << kforge::tasks::format_dims(d);
      for (const auto& c : t.constraints) EXPECT_TRUE(c.eval_bool(d)) << spec << ": " << c.text();
      EXPECT_LE(t.input_bytes(d), int64_t{256} << 20) << spec;
      for (const auto& [name, v] : d) {
        EXPECT_GE(v, 1);
        EXPECT_LE(v, t.dims.at(name)) << spec << " " << name;
      }
    }
  }
}

TEST(UnseenDims, NoneWhenTheConstraintsAllowOnlyWhatWasShown) {
  TempDir dir;
  auto path =
      dir.write("t.toml", replace(valid_task(), "[dims]",
                                  "constraints = [\"N == 64 || N == 1 || N == 37\"]\n\n[dims]"));
  kforge::tasks::Task t = load_task(path);
  EXPECT_TRUE(kforge::tasks::draw_unseen_dims(t, 1, 3).empty());
  auto odd = dir.write("t.toml", replace(valid_task(), "[dims]",
                                         "constraints = [\"N % 2 == 1 || N == 64\"]\n\n[dims]"));
  for (const auto& d : kforge::tasks::draw_unseen_dims(load_task(odd), 1, 3))
    EXPECT_EQ(d.at("N") % 2, 1);
}

}  // namespace
