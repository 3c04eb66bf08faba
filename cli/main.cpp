#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstring>
#include <iostream>

#include "command_list.h"
#include "commands.h"
#include "json_output.h"
#include "kforge/archive/error.h"
#include "kforge/common/error.h"
#include "kforge/common/secrets.h"
#include "kforge/common/strings.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/memory.h"
#include "subcommands.h"

namespace {

// A crash of kforge itself (never of a candidate: those run in kforge-runner) says so on stderr
// with where it happened before the process dies of its signal, so a report can say where: the
// faulting instruction, the return address on top of the stack (the caller, when a bad pointer was
// called) and a backtrace. Only async-signal-safe calls in the handler; backtrace() is called once
// beforehand so that it has loaded its library. kforge-core's own frames show as offsets
// (kforge-core(+0x...)): `addr2line -fCe kforge-core OFFSET` names them.
void say(const char* text) {
  (void)!::write(2, text, std::strlen(text));
}

void report_crash(int sig, siginfo_t* info, void* context) {
  say("kforge: crashed (");
  say(sig == SIGSEGV  ? "SIGSEGV"
      : sig == SIGBUS ? "SIGBUS"
      : sig == SIGFPE ? "SIGFPE"
      : sig == SIGILL ? "SIGILL"
                      : "SIGABRT");
  say("), a kforge bug; please report it with what follows:\n");
  void* frames[64];
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  void* pc = reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
  void* const* sp = reinterpret_cast<void* const*>(uc->uc_mcontext.gregs[REG_RSP]);
  say("at the faulting instruction, then the word on top of its stack:\n");
  frames[0] = pc;
  frames[1] = sp ? *sp : nullptr;
  ::backtrace_symbols_fd(frames, 2, 2);
#else
  (void)context;
#endif
  if (sig == SIGSEGV || sig == SIGBUS) {
    say("address accessed: ");
    frames[0] = info ? info->si_addr : nullptr;
    ::backtrace_symbols_fd(frames, 1, 2);
  }
  say("backtrace:\n");
  ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), 2);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_crash_report() {
  void* frame[1];
  ::backtrace(frame, 1);
  struct sigaction action = {};
  action.sa_sigaction = report_crash;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &action, nullptr);
}

bool g_json = false;  // --json given: a refusal is also JSON on stdout (json_refusal.h)

// An error said once, after the command it stopped ("kforge archive show: no candidate 7"); a
// message that already starts with its command's name ("kforge corpus: ...") is said as it is.
int fail(const CLI::App& app, const std::string& what, int code) {
  std::string message = kforge::printable(kforge::redact_secrets(what));
  std::string command = kforge::cli::command_path(kforge::cli::parsed_command(app));
  std::string said = message.rfind("kforge ", 0) != 0 && message.rfind("kforge:", 0) != 0
                         ? command + ": " + message
                         : message;
  std::cerr << said << "\n";
  if (g_json) {
    if (message.rfind(command + ": ", 0) == 0) message.erase(0, command.size() + 2);
    kforge::cli::print_json_refusal(command, message, code);
  }
  return code;
}

// CLI11's "The following argument was not expected" after a command name reads "the following...".
std::string lower_first(std::string text) {
  auto upper = [&](size_t i) { return std::isupper(static_cast<unsigned char>(text[i])); };
  if (!text.empty() && upper(0) && !(text.size() > 1 && upper(1)))  // "GPU ..." stays
    text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  install_crash_report();
  kforge::verify::keep_large_cached_blocks_whole();
  g_json = kforge::cli::json_requested(argc, argv);
  CLI::App app{"kforge: evolves CUDA kernels faster than PyTorch, and verifies them honestly",
               "kforge"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kforge ") + KFORGE_VERSION);
  int exit_code = kforge::cli::kExitOk;
  kforge::cli::add_doctor_command(app, exit_code);
  kforge::cli::add_tasks_command(app, exit_code);
  kforge::cli::add_compile_command(app, exit_code);
  kforge::cli::add_verify_command(app, exit_code);
  kforge::cli::add_baseline_command(app, exit_code);
  kforge::cli::add_corpus_command(app, exit_code);
  kforge::cli::add_evolve_command(app, exit_code);
  kforge::cli::add_archive_command(app, exit_code);
  kforge::cli::add_export_command(app, exit_code);
  kforge::cli::add_model_command(app, exit_code);
  kforge::cli::add_serve_command(app, exit_code);
  kforge::cli::add_gpu_worker_command(app, exit_code);
  kforge::cli::add_llm_command(app, exit_code);
  kforge::cli::add_prompt_command(app, exit_code);
  kforge::cli::add_reference_command(app, exit_code);
  for (const kforge::cli::CommandInfo& c : kforge::cli::kCommands)
    app.get_subcommand(std::string(c.name))->footer("Examples:\n" + std::string(c.examples));
  if (std::optional<int> rc = kforge::cli::guide_subcommands(app, argc, argv)) return *rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return fail(app,
                lower_first(e.what()) + "\nRun '" +
                    kforge::cli::command_path(kforge::cli::parsed_command(app)) +
                    " --help' for its options.",
                kforge::cli::kExitUsage);
  } catch (const kforge::verify::CudaError& e) {
    return fail(app, e.what(), kforge::cli::kExitNoGpu);
  } catch (const kforge::archive::ArchiveMissing& e) {  // like a task that does not exist
    return fail(app, e.what(), kforge::cli::kExitUsage);
  } catch (const kforge::archive::ArchiveError& e) {
    return fail(app, e.what(), kforge::cli::kExitFindings);
  } catch (const kforge::UsageError& e) {
    return fail(app, e.what(), kforge::cli::kExitUsage);
  } catch (const kforge::Error& e) {  // a kforge bug, or the machine failing under it
    return fail(app, e.what(), kforge::cli::kExitInternal);
  } catch (const std::exception& e) {
    return fail(app, std::string("internal error (a kforge bug; please report it): ") + e.what(),
                kforge::cli::kExitInternal);
  }
  return exit_code;
}
