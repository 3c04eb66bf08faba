// The judge's buffers: device memory created with the VMM API and exported as a POSIX file
// descriptor, so a runner process can map it (inputs read-only) with unmapped gaps around it.
// The tensor sits at the end of its allocation, 256-byte aligned; the bytes around it (before it,
// and up to 255 after it) are slack, filled with canaries. The judge sees it all as LibTorch
// tensors; runners see only the mapping.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/verify/channel.h"
#include "kforge/verify/protocol.h"

namespace kforge::verify {

class SharedBuffer {
 public:
  // Needs a GPU (throws CudaError otherwise). `read_only`: how the runner maps it.
  SharedBuffer(std::string name, const std::vector<int64_t>& shape, torch::ScalarType dtype,
               bool read_only, int device);
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  torch::Tensor& tensor() { return tensor_; }  // the judge's writable view
  const torch::Tensor& tensor() const { return tensor_; }
  std::vector<torch::Tensor> slack() const;  // uint8 views: before and after the tensor
  BufferSpec spec() const { return spec_; }
  int fd() const { return fd_.get(); }

 private:
  void release();  // unmap and free; safe to call twice
  BufferSpec spec_;
  UniqueFd fd_;
  unsigned long long handle_ = 0;
  unsigned long long va_ = 0;
  torch::Tensor tensor_;
  int device_ = 0;
};

// VMM allocation granularity of `device` (2 MiB on the H200).
uint64_t allocation_granularity(int device);

// Where a tensor of `bytes` goes in its allocation: at the end, 256-byte aligned, after at least
// 256 slack bytes; the allocation a multiple of `granularity`. (Pure: tested without a GPU.)
BufferSpec buffer_layout(uint64_t bytes, uint64_t granularity);

}  // namespace kforge::verify
