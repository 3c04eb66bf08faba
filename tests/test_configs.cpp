// Issue 34, second round: the LLM config, the run config and the batch folder are input someone
// else may have written. Integers are range-checked before they are narrowed, NaN and infinities
// are errors, deep TOML never reaches toml++'s recursion, a batch folder's files are regular files
// of bounded size, and every problem is an InputError naming the file, key (and line) - never a
// hang, a signal or the "kforge bug" class (exit 4). Each case here failed before its fix.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "fuzz_util.h"
#include "kforge/common/error.h"
#include "kforge/evolve/batch.h"
#include "kforge/evolve/config.h"
#include "kforge/evolve/proposer.h"
#include "kforge/evolve/run.h"
#include "test_util.h"

namespace {

using kforge::InputError;
using kforge::test::TempDir;
using nlohmann::json;
namespace ev = kforge::evolve;

// Runs `f` in a forked child with `seconds` to finish: what it returned, or how it died (a
// segfault, a hang) - so a defect fails its test instead of the whole test binary.
std::string in_child(int seconds, const std::function<std::string()>& f) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(static_cast<unsigned>(seconds));
    std::string out;
    try {
      out = f();
    } catch (const std::exception& e) {
      out = std::string("escaped: ") + e.what();
    }
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    return std::string("died of signal ") + strsignal(WTERMSIG(status)) +
           (WTERMSIG(status) == SIGALRM ? " (a hang)" : "");
  return out;
}

// The InputError `f` throws, as "file|line|field|problem"; what else happened otherwise.
std::string input_error(const std::function<void()>& f) {
  try {
    f();
    return "no error";
  } catch (const InputError& e) {
    return e.file() + "|" + (e.line() ? std::to_string(*e.line()) : "-") + "|" + e.field() + "|" +
           e.problem();
  } catch (const std::exception& e) {
    return std::string("not an InputError: ") + e.what();
  }
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const char* kModel = "[[models]]\nmodel = \"openai:x\"\n";

// The docs' examples are configs users copy: every TOML block of docs/llm-config.md and the
// README's LLM example loads, and each model gets an endpoint of the API its provider names.
TEST(Configs, EveryLlmConfigExampleInTheDocsLoads) {
  TempDir dir;
  int examples = 0;
  for (const char* doc : {"docs/llm-config.md", "README.md"}) {
    std::ifstream in(kforge::test::source_dir() / doc);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t at = text.find("```toml\n"); at != std::string::npos;
         at = text.find("```toml\n", at + 1)) {
      size_t begin = at + 8, end = text.find("```", begin);
      std::string block = text.substr(begin, end - begin);
      if (block.find("[[models]]") == std::string::npos) continue;  // a run config, or a fragment
      ++examples;
      auto path = dir.write("example-" + std::to_string(examples) + ".toml", block).string();
      try {
        ev::LlmConfig cfg = ev::load_llm_config(path);
        for (const ev::ModelConfig& m : cfg.models) {
          ev::Endpoint e = cfg.endpoint(m);
          EXPECT_FALSE(e.model.empty()) << doc << ": " << m.spec;
          if (e.wire.thinking_budget > 0) {
            EXPECT_LT(e.wire.thinking_budget, m.max_tokens) << doc << ": " << m.spec;
          }
        }
      } catch (const kforge::Error& e) {
        ADD_FAILURE() << doc << ", the example at byte " << at << ": " << e.what() << "\n" << block;
      }
    }
  }
  EXPECT_GE(examples, 9) << "an example per provider (OpenAI, Anthropic, vLLM, SGLang, Ollama, "
                            "llama.cpp, OpenRouter, Gemini)";
}

TEST(Configs, LlmConfigIntegersAreRangeCheckedBeforeNarrowing) {
  TempDir dir;
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"[providers.openai]\nconcurrency = 4294967296\n" + std::string(kModel),
            "providers.openai.concurrency"},
           {"[providers.openai]\nconcurrency = 0\n" + std::string(kModel),
            "providers.openai.concurrency"},
           {"[providers.openai]\nconcurrency = 100000\n" + std::string(kModel),
            "providers.openai.concurrency"},
           {std::string(kModel) + "max_tokens = 2147483648\n", "models[0].max_tokens"},
           {std::string(kModel) + "max_tokens = 4294967297\n", "models[0].max_tokens"},
           {std::string(kModel) + "max_tokens = 1.5\n", "models[0].max_tokens"}}) {
    auto path = dir.write("llm.toml", text).string();
    std::string e = input_error([&] { ev::load_llm_config(path); });
    EXPECT_TRUE(has(e, path + "|") && has(e, "|" + field + "|must be a whole number"))
        << text << " -> " << e;
  }
  auto path = dir.write("llm.toml", "[providers.openai]\nconcurrency = 256\n" +
                                        std::string(kModel) + "max_tokens = 1048576\n");
  ev::LlmConfig cfg = ev::load_llm_config(path.string());
  EXPECT_EQ(cfg.providers.at("openai").concurrency, 256);
  EXPECT_EQ(cfg.models[0].max_tokens, 1048576);
}

TEST(Configs, LlmConfigNanAndInfinitiesAreErrorsNamingTheField) {
  TempDir dir;
  for (const char* bad : {"nan", "+nan", "-nan", "inf", "+inf", "-inf"}) {
    for (const auto& [line, field] : std::vector<std::pair<std::string, std::string>>{
             {"weight = ", "models[0].weight"},
             {"price = { input = ", "models[0].price.input"},
             {"price = { output = ", "models[0].price.output"},
             {"temperature = { repair = ", "models[0].temperature.repair"}}) {
      std::string text = std::string(kModel) + line + bad +
                         (line.back() == ' ' && line.find('{') != std::string::npos ? " }" : "") +
                         "\n";
      auto path = dir.write("llm.toml", text).string();
      std::string e = input_error([&] { ev::load_llm_config(path); });
      EXPECT_TRUE(has(e, path + "|3|" + field + "|must be")) << text << " -> " << e;
    }
  }
}

TEST(Configs, LlmConfigBaseUrlIsHttp) {
  TempDir dir;
  auto path = dir.write("llm.toml", "[providers.openai]\nbase_url = \"file:///etc/passwd#\"\n" +
                                        std::string(kModel))
                  .string();
  EXPECT_EQ(input_error([&] { ev::load_llm_config(path); }),
            path + "|2|providers.openai.base_url|must be an http:// or https:// URL");
}

// Issue 35: endpoints as they are in 2026. Providers of any name with their API and request shape,
// reasoning and thinking models, cache prices, one temperature for every role.
TEST(Configs, LlmConfigProvidersOfAnyNameCarryTheirApiAndRequestShape) {
  TempDir dir;
  setenv("KFORGE_TEST_VLLM_KEY", "vllm-key-0123", 1);
  auto path = dir.write("llm.toml", R"([providers.vllm]
api = "openai"
base_url = "http://gpu-box:8000/v1/"
api_key_env = "KFORGE_TEST_VLLM_KEY"
token_limit_field = "max_tokens"
stream = false
tokens_per_minute = 200000
concurrency = 16
timeout = 600

[providers.anthropic]
api_key = "sk-ant-test"
prompt_cache = false
tokens_per_minute = 30000

[providers.openai]
api = "openai"

[[models]]
model = "vllm:Qwen/Qwen3-Coder-30B-A3B-Instruct"
temperature = 0.6

[[models]]
model = "anthropic:claude-sonnet-4-5"
max_tokens = 32000
thinking_budget = 16000
price = { input = 3.0, output = 15.0 }

[[models]]
model = "openai:gpt-5"
reasoning_effort = "minimal"
temperature = { repair = 0.2 }
)");
  ev::LlmConfig cfg = ev::load_llm_config(path.string());
  ASSERT_EQ(cfg.models.size(), 3u);

  const ev::ModelConfig& qwen = cfg.models[0];
  for (const char* role : {"translate", "optimize", "crossover", "repair", "ideas"})
    EXPECT_EQ(qwen.temperature_for(role), 0.6)
        << role << ": one number is every role's temperature";
  ev::Endpoint e = cfg.endpoint(qwen);
  EXPECT_EQ(e.provider, ev::Provider::OpenAI);
  EXPECT_EQ(e.base_url, "http://gpu-box:8000/v1");
  EXPECT_EQ(e.model, "Qwen/Qwen3-Coder-30B-A3B-Instruct");
  EXPECT_EQ(e.api_key, "vllm-key-0123");
  EXPECT_EQ(e.wire.token_limit_field, "max_tokens");
  EXPECT_FALSE(e.wire.stream);
  EXPECT_EQ(e.wire.reasoning_effort, "");
  EXPECT_EQ(e.wire.thinking_budget, 0);
  EXPECT_EQ(cfg.providers.at("vllm").tokens_per_minute, 200000);
  EXPECT_EQ(cfg.providers.at("vllm").concurrency, 16);
  EXPECT_EQ(cfg.policy(qwen).total_timeout, std::chrono::milliseconds(600000));

  const ev::ModelConfig& claude = cfg.models[1];
  EXPECT_EQ(claude.thinking_budget, 16000);
  EXPECT_FALSE(claude.temperature_for("optimize")) << "none configured: none sent";
  e = cfg.endpoint(claude);
  EXPECT_EQ(e.provider, ev::Provider::Anthropic);
  EXPECT_EQ(e.base_url, "https://api.anthropic.com");
  EXPECT_EQ(e.api_key, "sk-ant-test");
  EXPECT_FALSE(e.wire.cache_prompt);
  EXPECT_EQ(e.wire.thinking_budget, 16000);
  EXPECT_FALSE(e.wire.thinking_adaptive);
  EXPECT_EQ(cfg.providers.at("anthropic").api, ev::Provider::Anthropic);

  {  // adaptive thinking, for the models that take no budget
    auto adaptive =
        dir.write("adaptive.toml",
                  "[[models]]\nmodel = \"anthropic:claude-opus-4-7\"\nthinking = \"adaptive\"\n");
    ev::LlmConfig a = ev::load_llm_config(adaptive.string());
    EXPECT_TRUE(a.endpoint(a.models[0]).wire.thinking_adaptive);
  }

  const ev::ModelConfig& gpt = cfg.models[2];
  EXPECT_EQ(gpt.temperature_for("repair"), 0.2);
  EXPECT_FALSE(gpt.temperature_for("translate"));
  e = cfg.endpoint(gpt);
  EXPECT_EQ(e.provider, ev::Provider::OpenAI);
  EXPECT_EQ(e.wire.reasoning_effort, "minimal");
  EXPECT_EQ(e.wire.token_limit_field, "max_completion_tokens") << "the default";
  EXPECT_TRUE(e.wire.stream) << "the default";
  EXPECT_EQ(cfg.providers.at("openai").tokens_per_minute, 0);
}

// Every bad value of the new keys is an InputError naming the file, the line and the field.
TEST(Configs, LlmConfigNewKeysAreCheckedNamingFileLineAndField) {
  TempDir dir;
  const std::string claude = "[[models]]\nmodel = \"anthropic:claude-x\"\n";
  const std::string custom = "[[models]]\nmodel = \"vllm:m\"\n";
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           // [providers.NAME]
           {"[providers.vllm]\nbase_url = \"http://h:8000/v1\"\n" + custom,
            "|1|providers.vllm.api|missing"},
           {"[providers.vllm]\napi = \"openai\"\n" + custom, "|1|providers.vllm.base_url|missing"},
           {"[providers.vllm]\napi = \"gemini\"\nbase_url = \"http://h/v1\"\n" + custom,
            "|2|providers.vllm.api|must be \"openai\" or \"anthropic\""},
           {"[providers.vllm]\napi = 1\nbase_url = \"http://h/v1\"\n" + custom,
            "|2|providers.vllm.api|must be"},
           {"[providers.openai]\napi = \"anthropic\"\n" + std::string(kModel),
            "|2|providers.openai.api|must be \"openai\""},
           {"[providers.anthropic]\ntoken_limit_field = \"max_tokens\"\n" + claude,
            "|2|providers.anthropic.token_limit_field|only for api = \"openai\""},
           {"[providers.openai]\ntoken_limit_field = \"max_output_tokens\"\n" + std::string(kModel),
            "|2|providers.openai.token_limit_field|must be \"max_completion_tokens\" or "
            "\"max_tokens\""},
           {"[providers.openai]\nprompt_cache = true\n" + std::string(kModel),
            "|2|providers.openai.prompt_cache|only for api = \"anthropic\""},
           {"[providers.openai]\nstream = \"yes\"\n" + std::string(kModel),
            "|2|providers.openai.stream|must be true or false"},
           {"[providers.openai]\ntokens_per_minute = 0\n" + std::string(kModel),
            "|2|providers.openai.tokens_per_minute|must be a whole number of tokens from 1 to "
            "1000000000"},
           {"[providers.openai]\ntokens_per_minute = 1000000001\n" + std::string(kModel),
            "|2|providers.openai.tokens_per_minute|must be a whole number"},
           {"[providers.openai]\ntokens_per_minute = 1.5\n" + std::string(kModel),
            "|2|providers.openai.tokens_per_minute|must be a whole number"},
           // [[models]]
           {"[[models]]\nmodel = \"mistral:large\"\n",
            "|2|models[0].model|unknown provider 'mistral'"},
           {"[[models]]\nmodel = \"vllm:\"\n[providers.vllm]\napi = \"openai\"\nbase_url = "
            "\"http://h/v1\"\n",
            "|2|models[0].model|not PROVIDER:MODEL"},
           {claude + "thinking_budget = 1000\n", "|3|models[0].thinking_budget|at least 1024"},
           {claude + "thinking_budget = 8192\n",
            "|3|models[0].thinking_budget|below max_tokens (8192)"},
           {claude + "max_tokens = 4000\nthinking_budget = 4000\n",
            "|4|models[0].thinking_budget|below max_tokens (4000)"},
           {claude + "thinking_budget = 2048.5\n", "|3|models[0].thinking_budget|whole number"},
           {claude + "thinking_budget = 2048\ntemperature = 0.5\n",
            "|4|models[0].temperature|thinking"},
           {claude + "thinking_budget = 2048\ntemperature = { repair = 0.2 }\n",
            "|4|models[0].temperature|thinking"},
           {std::string(kModel) + "thinking_budget = 2048\n",
            "|3|models[0].thinking_budget|only for api = \"anthropic\""},
           {claude + "reasoning_effort = \"high\"\n",
            "|3|models[0].reasoning_effort|only for api = \"openai\""},
           {claude + "thinking = \"enabled\"\n", "|3|models[0].thinking|adaptive"},
           {claude + "thinking = \"adaptive\"\nthinking_budget = 2048\n",
            "|3|models[0].thinking|not both"},
           {claude + "thinking = \"adaptive\"\ntemperature = 0.3\n",
            "|4|models[0].temperature|thinking"},
           {std::string(kModel) + "thinking = \"adaptive\"\n",
            "|3|models[0].thinking|only for api = \"anthropic\""},
           {std::string(kModel) + "reasoning_effort = \"extreme\"\n",
            "|3|models[0].reasoning_effort|must be one of none, minimal, low, medium, high, xhigh"},
           {std::string(kModel) + "reasoning_effort = 3\n",
            "|3|models[0].reasoning_effort|must be one of"},
           {std::string(kModel) + "temperature = 2.5\n",
            "|3|models[0].temperature|must be a number in [0, 2]"},
           {std::string(kModel) + "temperature = \"hot\"\n",
            "|3|models[0].temperature|must be a number"},
           {std::string(kModel) + "price = { cached_input = -1 }\n",
            "|3|models[0].price.cached_input|non-negative"},
           {std::string(kModel) + "price = { cache_write = nan }\n",
            "|3|models[0].price.cache_write|non-negative"},
           {std::string(kModel) + "price = { cache_read = 1 }\n",
            "|3|models[0].price.cache_read|unknown key"}}) {
    auto path = dir.write("llm.toml", text).string();
    std::string e = input_error([&] { ev::load_llm_config(path); });
    size_t problem = want.rfind('|') + 1;  // "|line|field|" then a part of the problem
    EXPECT_TRUE(has(e, path + want.substr(0, problem)) && has(e, want.substr(problem)))
        << text << "\n -> " << e;
  }
}

// Cache prices default as each API's provider charges them: Anthropic reads at 0.1x and writes
// (5-minute cache) at 1.25x the input price; OpenAI-compatible reads at the input price (no
// discount assumed: a local server has none, OpenAI's varies by model) and writes, reported only
// by OpenAI's GPT-5.6 family and OpenRouter, at 1.25x. What the file sets wins.
TEST(Configs, LlmConfigCachePricesDefaultPerProviderAndCostCountsThem) {
  TempDir dir;
  auto path = dir.write("llm.toml", R"([providers.vllm]
api = "openai"
base_url = "http://127.0.0.1:8000/v1"

[[models]]
model = "anthropic:claude-sonnet-4-5"
price = { input = 3.0, output = 15.0 }

[[models]]
model = "openai:gpt-5"
price = { input = 1.25, output = 10.0 }

[[models]]
model = "vllm:m"
price = { input = 0.4, output = 1.6, cached_input = 0.04, cache_write = 0.0 }
)");
  ev::LlmConfig cfg = ev::load_llm_config(path.string());
  const ev::ModelConfig &claude = cfg.models[0], &gpt = cfg.models[1], &local = cfg.models[2];
  EXPECT_DOUBLE_EQ(claude.price_cached_input_per_mtok, 0.3);
  EXPECT_DOUBLE_EQ(claude.price_cache_write_per_mtok, 3.75);
  EXPECT_DOUBLE_EQ(gpt.price_cached_input_per_mtok, 1.25);
  EXPECT_DOUBLE_EQ(gpt.price_cache_write_per_mtok, 1.5625);
  EXPECT_DOUBLE_EQ(local.price_cached_input_per_mtok, 0.04);
  EXPECT_DOUBLE_EQ(local.price_cache_write_per_mtok, 0.0);
  // tokens_in counts the cached ones: 1M in of which 600k read and 200k written, 100k out.
  EXPECT_NEAR(claude.cost_usd(1'000'000, 100'000, 600'000, 200'000),
              0.2 * 3 + 0.6 * 0.3 + 0.2 * 3.75 + 0.1 * 15, 1e-12);
  EXPECT_NEAR(gpt.cost_usd(1'000'000, 100'000, 600'000), 1.25 + 0.1 * 10, 1e-12);
  EXPECT_NEAR(local.cost_usd(1'000'000, 0, 1'000'000), 0.04, 1e-12);
  EXPECT_NEAR(claude.cost_usd(1'000'000, 0), 3.0, 1e-12)
      << "no cache counts: every input token at the input price";
  // Counts an endpoint got wrong (more cached than sent) never make a negative or inflated price.
  EXPECT_NEAR(claude.cost_usd(100, 0, 1000, 1000), 100 * 0.3 / 1e6, 1e-15);
  EXPECT_EQ(claude.cost_usd(-5, -5, -5, -5), 0.0);
}

// The prompt cache's tokens are summed like the other counts: saturating, never wrapping.
TEST(Configs, LlmSpentSumsCacheTokensSaturating) {
  ev::LlmSpent total, one;
  one.tokens_in = 1000, one.tokens_cache_read = 600, one.tokens_cache_write = 200;
  total.add(one);
  total.add(one);
  EXPECT_EQ(total.tokens_cache_read, 1200);
  EXPECT_EQ(total.tokens_cache_write, 400);
  one.tokens_cache_read = one.tokens_cache_write = INT64_MAX;
  total.add(one);
  EXPECT_EQ(total.tokens_cache_read, INT64_MAX);
  EXPECT_EQ(total.tokens_cache_write, INT64_MAX);
}

// --batch-model names the body's model and format of --model batch:DIR; it is checked before the
// GPU check (exit 2 naming the flag), so this runs without a GPU.
TEST(Configs, EvolveBatchModelIsCheckedBeforeAnyWork) {
  TempDir dir;
  std::string db = (dir.path() / "flags.db").string();
  std::string batch = (dir.path() / "batch").string();
  for (auto [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--llm none --batch-model anthropic:claude-x",
            "--batch-model: only with --model batch:DIR"},
           {"--model openai:gpt-5 --batch-model anthropic:claude-x",
            "--batch-model: only with --model batch:DIR"},
           {"--model batch:" + batch + " --batch-model mistral:large",
            "--batch-model: unknown provider 'mistral'"},
           {"--model batch:" + batch + " --batch-model claude",
            "--batch-model: 'claude' is not PROVIDER:MODEL"}}) {
    kforge::test::CliResult r =
        kforge::test::run_kforge("evolve smoke/relu --db " + db + " " + flags);
    EXPECT_EQ(r.code, 2) << flags << ": " << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << flags << ": " << r.out;
  }
}

// toml++ recursed once per dotted part: a key a million parts deep was a segfault.
TEST(Configs, DeepTomlNeverReachesTheParser) {
  TempDir dir;
  std::string dotted = "[models]\n";
  for (int i = 0; i < 500000; ++i) dotted += "a.";  // 1 MB: within the size bound
  dotted += "b = 1\n";
  auto llm = dir.write("llm.toml", dotted).string();
  EXPECT_EQ(in_child(20, [&] { return input_error([&] { ev::load_llm_config(llm); }); }),
            llm + "|2||a key of more than 32 dotted parts");
  auto run = dir.write("run.toml", "x = " + std::string(200000, '[') + "\n").string();
  EXPECT_EQ(in_child(20, [&] { return input_error([&] { ev::load_run_config(run); }); }),
            run + "|1||nested more than 32 levels deep ([ and {)");
  auto header = dir.write("run2.toml", "[" + dotted.substr(9, 200000) + "b]\n").string();
  EXPECT_TRUE(has(in_child(20, [&] { return input_error([&] { ev::load_run_config(header); }); }),
                  "dotted parts"));
}

// A FIFO or a device named as a config hung the read.
TEST(Configs, ConfigsAreRegularFilesOfBoundedSize) {
  TempDir dir;
  std::string fifo = (dir.path() / "llm.toml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(in_child(10, [&] { return input_error([&] { ev::load_llm_config(fifo); }); }),
            fifo + "|-||a FIFO (named pipe), not a regular file");
  EXPECT_EQ(in_child(10, [&] { return input_error([&] { ev::load_run_config(fifo); }); }),
            fifo + "|-||a FIFO (named pipe), not a regular file");
  std::string zero = (dir.path() / "zero.toml").string();
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  EXPECT_EQ(in_child(10, [&] { return input_error([&] { ev::load_run_config(zero); }); }),
            zero + "|-||a device, not a regular file");
  auto big = dir.write("big.toml", "# " + std::string(2 << 20, 'x') + "\n").string();
  EXPECT_TRUE(has(input_error([&] { ev::load_llm_config(big); }),
                  big + "|-||2097155 bytes; the limit is 1048576"));
}

TEST(Configs, RunConfigIntegersAreBoundedNamingTheKey) {
  TempDir dir;
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"generations = 9223372036854775807\n", "generations"},
           {"generations = 10001\n", "generations"},
           {"children = 1000000000\ngenerations = 1\n", "children"},
           {"islands = 4611686018427387904\ngenerations = 1\n", "islands"},
           {"islands = 0\n", "islands"},
           {"judge_top = 2147483648\n", "judge_top"},
           {"migration_interval = 4294967296\n", "migration_interval"},
           {"seed = -1\n", "seed"},
           {"[llm]\nchildren = 4294967298\n", "llm.children"},
           {"[llm]\nrepair_attempts = 1000000\n", "llm.repair_attempts"},
           {"[llm]\nideas_count = 0\n", "llm.ideas_count"},
           {"[llm]\nideas_count = 2147483648\n", "llm.ideas_count"},
           {"[tuner]\nexhaustive_max = 9223372036854775807\n", "tuner.exhaustive_max"},
           {"[tuner]\nelite = -3\n", "tuner.elite"},
           {"[budget]\nevaluations = -1\n", "budget.evaluations"},
           {"[budget]\nllm_tokens = 1.5\n", "budget.llm_tokens"}}) {
    auto path = dir.write("run.toml", text).string();
    std::string e = input_error([&] { ev::load_run_config(path); });
    EXPECT_TRUE(has(e, path + "|-|" + field + "|must be a whole number from "))
        << text << " -> " << e;
  }
  // The archive's copy (--resume) is checked the same way, also past 64 bits.
  std::string e = input_error([] {
    ev::RunConfig::from_json({{"generations", 18446744073709551615ULL}});
  });
  EXPECT_TRUE(has(e, "|generations|must be a whole number from 0 to 10000")) << e;
  ev::RunConfig c;
  c.seed = 18446744073709551615ULL;  // --seed takes any 64-bit seed; the resumed run reads it back
  EXPECT_EQ(ev::RunConfig::from_json(c.to_json()).seed, c.seed);
  auto ok = dir.write("run.toml",
                      "generations = 10000\nchildren = 1000\nislands = 100\n[budget]\nevaluations "
                      "= 9223372036854775807\n");
  ev::RunConfig loaded = ev::load_run_config(ok.string());
  EXPECT_EQ(loaded.generations, 10000);
  EXPECT_EQ(loaded.children, 1000);
  EXPECT_EQ(loaded.islands, 100);
}

TEST(Configs, RunConfigNanAndInfinitiesAreErrorsNamingTheKey) {
  TempDir dir;
  for (const char* bad : {"nan", "inf", "-inf"}) {
    for (const auto& [section, key] :
         std::vector<std::pair<std::string, std::string>>{{"", "target_speedup"},
                                                          {"budget", "minutes"},
                                                          {"budget", "llm_dollars"},
                                                          {"llm", "optimize"},
                                                          {"selection", "best"},
                                                          {"tuner", "random_share"}}) {
      std::string text = (section.empty() ? "" : "[" + section + "]\n") + key + " = " + bad + "\n";
      auto path = dir.write("run.toml", text).string();
      std::string e = input_error([&] { ev::load_run_config(path); });
      std::string field = section.empty() ? key : section + "." + key;
      EXPECT_TRUE(
          has(e, path + "|-|" + field + "|must be a number, 0 or more (not NaN or infinite)"))
          << text << " -> " << e;
    }
  }
}

// --- The batch folder -------------------------------------------------------------------------

// A batch output line as the OpenAI Batch API writes it.
json answer_line(const std::string& id, const std::string& text, json status = 200) {
  json body = {
      {"model", "m"},
      {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text}}}}}},
      {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 3}}}};
  return {{"id", "batch_req_1"},
          {"custom_id", id},
          {"response", {{"status_code", status}, {"body", body}}},
          {"error", nullptr}};
}

struct Folder {
  TempDir dir;
  ev::BatchExchange ex{dir.path(), "batch", std::chrono::milliseconds(200),
                       std::chrono::milliseconds(10)};
  ev::ChatRequest request = [] {
    ev::ChatRequest r;
    r.user = "make it fast";
    return r;
  }();
  std::string id = ex.custom_id(request, 0);
  std::string write(const std::string& name, const std::string& text) const {
    return dir.write(name, text).string();
  }
  // chat()'s InputError, or what it did instead; in a child, so a hang fails the test.
  std::string chat_error() const {
    return in_child(20, [&] { return input_error([&] { ex.chat(request, 0); }); });
  }
};

// kforge evolve's flags that override run-config numbers keep those keys' bounds (the flags went
// around them), and say so before the GPU check: exit 2 naming the flag, here without a GPU.
TEST(Configs, EvolveFlagsKeepTheBoundsOfTheKeysTheyOverride) {
  TempDir dir;
  std::string db = (dir.path() / "flags.db").string();
  for (auto [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--generations 20000", "--generations: must be a whole number from 0 to 10000"},
           {"--budget-evaluations -3", "--budget-evaluations: must be a whole number from 0"},
           {"--target-speedup nan",
            "--target-speedup: must be a number, 0 or more (not NaN or infinite)"},
           {"--budget-minutes inf", "--budget-minutes: must be a number"}}) {
    kforge::test::CliResult r =
        kforge::test::run_kforge("evolve smoke/relu --llm none --db " + db + " " + flags);
    EXPECT_EQ(r.code, 2) << flags << ": " << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << flags << ": " << r.out;
  }
}

TEST(BatchFolder, FifosAndDeviceLinksAreErrorsNotHangs) {
  Folder f;
  f.write("answers.jsonl", answer_line(f.id, "fine").dump() + "\n");
  std::string fifo = (f.dir.path() / "pipe.jsonl").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(f.chat_error(), fifo + "|-||a FIFO (named pipe), not a regular file");
  ::unlink(fifo.c_str());
  std::string zero = (f.dir.path() / "zero.jsonl").string();
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  EXPECT_EQ(f.chat_error(), zero + "|-||a device, not a regular file");
  ::unlink(zero.c_str());
  ::mkdir((f.dir.path() / "sub.jsonl").c_str(), 0755);
  EXPECT_TRUE(has(f.chat_error(), "sub.jsonl|-||a folder, not a file"));
  ::rmdir((f.dir.path() / "sub.jsonl").c_str());
  // A link to a regular file is read like one; the answer comes back.
  ASSERT_EQ(
      ::symlink((f.dir.path() / "answers.jsonl").c_str(), (f.dir.path() / "linked.jsonl").c_str()),
      0);
  EXPECT_EQ(f.ex.chat(f.request, 0).text, "fine");
}

TEST(BatchFolder, AnOverlongLineIsAnErrorNamingFileAndLine) {
  Folder f;
  std::string big = f.write("big.jsonl", "{}\n" + std::string(65 << 20, 'x') + f.id + "\n");
  f.write("answers.jsonl", answer_line(f.id, "fine").dump() + "\n");
  EXPECT_EQ(f.chat_error(), big + "|2||a line of more than 67108864 bytes");
}

// "status_code": "200" was a JSON library exception: exit 4.
TEST(BatchFolder, AnswerTypeErrorsNameFileLineAndField) {
  for (
      const auto& [line, field] :
      std::vector<std::pair<std::function<json(const std::string&)>, std::string>>{
          {[](const std::string& id) { return answer_line(id, "x", "200"); },
           "response.status_code"},
          {[](const std::string& id) { return answer_line(id, "x", 2.5e10); },
           "response.status_code"},
          {[](const std::string& id) { return answer_line(id, "x", nullptr); },
           "response.status_code"},
          {[](const std::string& id) {
             return json{{"custom_id", id}};
           },
           "response"},
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"response", "x"}};
           },
           "response"},
          {[](const std::string& id) {
             return json{{"custom_id", id}, {"response", {{"status_code", 200}, {"body", "text"}}}};
           },
           "response.body"},
          {[](const std::string& id) {
             return json{{"custom_id", json::array({id})}, {"response", nullptr}};
           },
           "custom_id"}}) {
    Folder f;
    std::string path = f.write(
        "out.jsonl", answer_line("kf-other", "not this").dump() + "\n" + line(f.id).dump() + "\n");
    std::string e = f.chat_error();
    EXPECT_TRUE(has(e, path + "|2|" + field + "|")) << line(f.id).dump() << " -> " << e;
  }
  // What a batch API does write stays a failed call (LlmError), not an input error.
  Folder f;
  f.write("out.jsonl", answer_line(f.id, "x", 500).dump() + "\n");
  EXPECT_THROW(f.ex.chat(f.request, 0), ev::LlmError);
}

// The same custom_id answered differently in two files was taken by directory order, silently.
TEST(BatchFolder, ConflictingAnswersAreAnErrorNamingBothFiles) {
  Folder f;
  std::string a = f.write("a.jsonl", answer_line(f.id, "first answer").dump() + "\n");
  std::string b = f.write("b.jsonl", answer_line("kf-other", "x").dump() + "\n" +
                                         answer_line(f.id, "SECOND answer").dump() + "\n");
  std::string e = f.chat_error();
  EXPECT_TRUE(
      has(e, b + "|2|custom_id|" + f.id + " is answered differently here and in " + a + ":1"))
      << e;
  // The same answer twice (a file copied) is one answer.
  f.write("b.jsonl", answer_line(f.id, "first answer").dump() + "\n");
  EXPECT_EQ(f.ex.chat(f.request, 0).text, "first answer");
  // Within one file too.
  f.write("b.jsonl", answer_line(f.id, "first answer").dump() + "\n" +
                         answer_line(f.id, "third").dump() + "\n");
  EXPECT_TRUE(has(f.chat_error(), b + "|2|custom_id|")) << f.chat_error();
}

// A requests.jsonl that is a folder was "cannot append" (exit 4); a link sent the prompts
// elsewhere.
TEST(BatchFolder, RequestsFileIsAPlainFile) {
  TempDir dir;
  ::mkdir((dir.path() / "requests.jsonl").c_str(), 0755);
  EXPECT_EQ(input_error([&] { ev::BatchExchange(dir.path(), "batch"); }),
            (dir.path() / "requests.jsonl").string() +
                "|-||not a regular file (a link, folder, FIFO or device): kforge writes its "
                "requests only to a plain file");
  TempDir other;
  std::string target = other.write("victim", "untouched\n").string();
  ::rmdir((dir.path() / "requests.jsonl").c_str());
  ASSERT_EQ(::symlink(target.c_str(), (dir.path() / "requests.jsonl").c_str()), 0);
  EXPECT_TRUE(
      has(input_error([&] { ev::BatchExchange(dir.path(), "batch"); }), "|-||not a regular file"));
  EXPECT_EQ(*kforge::read_file(target), "untouched\n");
}

// --- scripts/batch-exchange.py ------------------------------------------------------------------

struct ScriptRun {
  int code;
  std::string out, err;
};
ScriptRun script(const std::string& args) {
  TempDir io;
  std::string cmd =
      "timeout 30 python3 " + (kforge::test::source_dir() / "scripts/batch-exchange.py").string() +
      " " + args + " >" + (io.path() / "out").string() + " 2>" + (io.path() / "err").string();
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128,
          *kforge::read_file((io.path() / "out").string()),
          *kforge::read_file((io.path() / "err").string())};
}

json request_line(const std::string& id) {
  return {{"custom_id", id},
          {"method", "POST"},
          {"url", "/v1/chat/completions"},
          {"body", {{"model", "batch"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}}};
}

// pending wrote <custom_id>.md wherever the id pointed.
TEST(BatchScript, PendingRefusesIdsThatArePaths) {
  TempDir dir, outside;
  std::string escape = (outside.path() / "owned").string();
  std::string climb = dir.path().filename().string() + "-owned";  // unique beside `dir`
  for (const std::string& id :
       {"../../" + climb, escape, std::string("kf-1/../../x"), std::string(""), std::string(".")}) {
    dir.write("requests.jsonl", request_line("kf-000000000000000000000001").dump() + "\n" +
                                    request_line(id).dump() + "\n");
    ScriptRun r = script("pending " + dir.path().string());
    EXPECT_EQ(r.code, 1) << id << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(has(r.err, "requests.jsonl:2: custom_id")) << r.err;
    EXPECT_FALSE(std::filesystem::exists(escape + ".md"));
    EXPECT_FALSE(std::filesystem::exists(dir.path().parent_path() / (climb + ".md")));
  }
  dir.write("requests.jsonl", request_line("kf-000000000000000000000001").dump() + "\n");
  ScriptRun ok = script("pending " + dir.path().string());
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "pending/kf-000000000000000000000001.md"));
}

// Malformed requests were Python tracebacks.
TEST(BatchScript, MalformedRequestsAreOneLineErrors) {
  TempDir dir;
  for (const std::string& line :
       {std::string("[1, 2]"), std::string("{\"custom_id\": 5}"),
        std::string("{\"custom_id\": \"kf-1\"}"),
        std::string("{\"custom_id\": \"kf-1\", \"body\": {\"messages\": 7}}"),
        std::string("{\"custom_id\": \"kf-1\", \"body\": {\"messages\": [{\"role\": \"user\"}]}}"),
        std::string("{\"custom_id\": \"kf-1\", \"body\": {\"messages\": [{\"role\": \"user\", "
                    "\"content\": [1]}]}}"),
        std::string("not json"), std::string(100000, '[')}) {
    dir.write("requests.jsonl", line + "\n");
    for (const char* cmd : {"pending ", "collect "}) {
      if (cmd[0] == 'c' && line != "not json") continue;  // collect reads requests the same way
      ScriptRun r = script(std::string(cmd) + dir.path().string());
      EXPECT_EQ(r.code, 1) << line.substr(0, 80) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_FALSE(has(r.err, "Traceback")) << r.err;
      EXPECT_TRUE(has(r.err, "requests.jsonl:1: ")) << r.err;
    }
  }
  // A FIFO among the answers is an error, not a hang.
  dir.write("requests.jsonl", request_line("kf-000000000000000000000001").dump() + "\n");
  ASSERT_EQ(::mkfifo((dir.path() / "pipe.jsonl").c_str(), 0600), 0);
  ScriptRun r = script("pending " + dir.path().string());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "pipe.jsonl: not a regular file")) << r.err;
}

}  // namespace

namespace {

using namespace kforge::test::fuzzing;

TEST(Fuzz, LlmConfigs) {
  TempDir dir;
  std::vector<std::string> seeds = {
      "[providers.openai]\nbase_url = \"http://localhost:8000/v1\"\napi_key_env = "
      "\"OPENAI_API_KEY\"\nconcurrency = 8\n"
      "timeout = 300\nconnect_timeout = 10\nmax_reply_bytes = "
      "16777216\n\n[providers.anthropic]\napi_key_env = "
      "\"ANTHROPIC_API_KEY\"\n\n[[models]]\nmodel = \"openai:Qwen/Qwen3-Coder-480B\"\nweight = "
      "3\nmax_tokens = 16384\n"
      "price = { input = 0.4, output = 1.6 }\ntemperature = { translate = 0.7, optimize = 1.0, "
      "crossover = 1.0, repair = "
      "0.3, ideas = 1.0 }\n\n[[models]]\nmodel = \"anthropic:claude-sonnet-4-5\"\nweight = "
      "1\nprice = { input = 3.0, output "
      "= 15.0 }\n",
      "[[models]]\nmodel = \"openai:x\"\n",
      // Issue 35's keys.
      "[providers.vllm]\napi = \"openai\"\nbase_url = "
      "\"http://localhost:8000/v1\"\ntoken_limit_field = \"max_tokens\"\n"
      "stream = false\ntokens_per_minute = 100000\n[providers.anthropic]\nprompt_cache = "
      "true\n[[models]]\nmodel = "
      "\"vllm:q\"\ntemperature = 0.7\nreasoning_effort = \"low\"\n[[models]]\nmodel = "
      "\"anthropic:c\"\nmax_tokens = "
      "4096\nthinking_budget = 2048\nprice = { input = 3, output = 15, cached_input = 0.3, "
      "cache_write = 3.75 }\n",
      "[providers.openai]\nconcurrency = 4\n[[models]]\nmodel = \"openai:a\"\nmax_tokens = "
      "8192\nweight = 0.5\n",
      // The hostile ones of issue 34 (a mutation mostly leaves their point intact).
      "[providers.openai]\nbase_url = \"http://127.0.0.1:18940/ok\"\nconcurrency = "
      "4294967296\n[[models]]\nmodel = \"openai:x\"\n",
      "[[models]]\nmodel = \"openai:x\"\nmax_tokens = 2147483648\n",
      "[[models]]\nmodel = \"openai:x\"\nprice = { input = nan, output = nan }\nweight = nan\n",
      "[[models]]\nmodel = \"openai:x\"\ntemperature = { repair = nan, ideas = inf }\n",
      "[models]\n" + std::string(200, 'a') + " = 1\n" + [] {
        std::string d;
        for (int i = 0; i < 400; ++i) d += "a.";
        return d + "b = 1\n";
      }()};
  std::string path = (dir.path() / "llm.toml").string();
  std::string failures = fuzz(seeds, 3000, 20, 34, [&](const std::string& text) -> std::string {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    ev::LlmConfig cfg;
    try {
      cfg = ev::load_llm_config(path);
    } catch (const std::exception& e) {
      return named(e, path);
    }
    for (const ev::ModelConfig& m : cfg.models) {
      if (!(m.weight > 0) || !std::isfinite(m.weight) || m.max_tokens < 1 ||
          !std::isfinite(m.price_input_per_mtok) || !std::isfinite(m.price_output_per_mtok) ||
          !(m.price_cached_input_per_mtok >= 0) || !(m.price_cache_write_per_mtok >= 0) ||
          !std::isfinite(m.price_cached_input_per_mtok) ||
          !std::isfinite(m.price_cache_write_per_mtok))
        return "accepted a bad model: " + m.spec;
      if (m.thinking_budget != 0 && (m.thinking_budget < 1024 || m.thinking_budget >= m.max_tokens))
        return "accepted thinking_budget " + std::to_string(m.thinking_budget);
      for (const auto& [role, t] : m.temperature)
        if (!(t >= 0 && t <= 2)) return "accepted temperature " + std::to_string(t);
    }
    for (const auto& [name, p] : cfg.providers)
      if (p.concurrency < 1) return "accepted concurrency " + std::to_string(p.concurrency);
    for (const auto& [name, p] : cfg.providers)
      if (p.tokens_per_minute < 0 || p.tokens_per_minute > 1'000'000'000)
        return "accepted tokens_per_minute " + std::to_string(p.tokens_per_minute);
    return "";
  });
  EXPECT_EQ(failures, "");
}

TEST(Fuzz, BatchFolders) {
  TempDir dir;
  ev::BatchExchange ex(dir.path(), "batch", std::chrono::milliseconds(0),
                       std::chrono::milliseconds(1));
  ev::ChatRequest request;
  request.user = "make it fast";
  std::string id = ex.custom_id(request, 0);
  std::string ok = answer_line(id, "```cuda\n__global__ void k() {}\n```").dump();
  json error = {{"id", "b"},
                {"custom_id", id},
                {"response", nullptr},
                {"error", {{"message", "expired"}, {"code", "x"}}}};
  std::vector<std::string> seeds = {
      ok + "\n", answer_line("kf-other", "x").dump() + "\n" + ok + "\n", error.dump() + "\n",
      answer_line(id, "1. vectorize\n2. unroll\n", 429).dump() + "\n" + ok,
      ok + "\n" + answer_line(id, "another").dump() + "\n",
      "{\"custom_id\": \"" + id +
          "\", \"response\": {\"status_code\": 200, \"body\": {\"choices\": [{\"message\": "
          "{\"content\": \"hi\"}}], \"usage\": {\"prompt_tokens\": 1, \"completion_tokens\": "
          "2}}}}\n",
      // The hostile ones of issue 34.
      answer_line(id, "x", "200").dump() + "\n",
      json{{"custom_id", id}, {"response", {{"status_code", 200}, {"body", "just text"}}}}.dump() +
          "\n",
      json{{"custom_id", id}}.dump() + "\n" +
          json{{"custom_id", json::array({id})}, {"response", "x"}}.dump() + "\n",
      "{\"custom_id\": \"" + id + "\", \"response\": " + std::string(300, '[') + "\n" + ok + "\n"};
  std::string path = (dir.path() / "answers.jsonl").string();
  std::string failures = fuzz(seeds, 1500, 20, 35, [&](const std::string& text) -> std::string {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    try {
      ev::ChatResponse r = ex.chat(request, 0);
      if (r.tokens_in < 0 || r.tokens_out < 0) return "negative token counts";
    } catch (const ev::LlmError&) {  // a failed or unanswered call: what a batch API may write
    } catch (const std::exception& e) {
      return named(e, path);
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
