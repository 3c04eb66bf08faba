// kforge-nvrtc-worker: compiles candidate sources for the parent kforge process, one JSON line in,
// one JSON line out (compile/compiler.h).
#include "kforge/compile/compiler.h"

int main(int argc, char** argv) {
  return kforge::compile::run_compile_worker(argc, argv);
}
