// GPU tests skip visibly, with the reason, where no GPU can be used.
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "kforge/verify/driver.h"

#define KFORGE_REQUIRE_GPU()                                                   \
  do {                                                                         \
    const auto& kforge_driver_ = kforge::verify::Driver::get();                \
    if (!kforge_driver_.available())                                           \
      GTEST_SKIP() << "no GPU: " << kforge_driver_.unavailable_reason();       \
    if (!torch::cuda::is_available())                                          \
      GTEST_SKIP() << "no GPU: this LibTorch (" TORCH_VERSION ") has no CUDA"; \
  } while (0)
