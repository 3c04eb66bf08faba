/* LD_PRELOAD'ed into a process under test on the GPU machine (scripts/gpu-export.sh): a crash prints
 * the native backtrace (Python's faulthandler shows only Python frames, none while an op runs with
 * the GIL released). Build: cc -shared -fPIC -o crash-report.so scripts/crash-report.c */
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void report(int sig) {
  static const char head[] = "crash-report: fatal signal, native backtrace:\n";
  void* frames[64];
  (void)!write(2, head, sizeof head - 1);
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Also callable (ctypes) to install the handler again after something else took the signals. */
void crash_report_install(void) {
  void* frame[1];
  backtrace(frame, 1);
  signal(SIGSEGV, report);
  signal(SIGBUS, report);
  signal(SIGABRT, report);
}

__attribute__((constructor)) static void install_at_load(void) { crash_report_install(); }
