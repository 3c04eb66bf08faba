// The math mode of references and eager baselines.
#pragma once

#include <ATen/Context.h>

namespace kforge::tasks {

// The math mode of eager baselines (docs/design.md, Verification 4): TF32 off for cuBLAS and cuDNN
// unless the task says allow_tf32. LibTorch's default lets cuDNN use TF32, which made fp32
// convolutions look 2-4x faster than what the tasks promise (seen on the H200, 2026-12-02).
class MathModeGuard {
 public:
  explicit MathModeGuard(bool allow_tf32)
      : cublas_(at::globalContext().allowTF32CuBLAS()),
        cudnn_(at::globalContext().allowTF32CuDNN()) {
    at::globalContext().setAllowTF32CuBLAS(allow_tf32);
    at::globalContext().setAllowTF32CuDNN(allow_tf32);
  }
  ~MathModeGuard() {
    at::globalContext().setAllowTF32CuBLAS(cublas_);
    at::globalContext().setAllowTF32CuDNN(cudnn_);
  }
  MathModeGuard(const MathModeGuard&) = delete;
  MathModeGuard& operator=(const MathModeGuard&) = delete;

 private:
  bool cublas_, cudnn_;
};

}  // namespace kforge::tasks
