// Reading JSONL that may be gzip-compressed (the project ships its exports gzipped): recognised by
// the magic bytes 1f 8b at the start of the stream, whatever the file is called.
#pragma once

#include <zlib.h>

#include <array>
#include <istream>
#include <streambuf>
#include <string>

namespace kforge::archive::detail {

// Whether `in` starts with gzip's magic bytes; consumes nothing.
bool starts_with_gzip(std::istream& in);

// The decompressed bytes of a gzip stream (concatenated members too, as gunzip reads them). Damaged
// or truncated data is an InputError naming `source_name` that says how to check the file.
class GzipBuf : public std::streambuf {
 public:
  GzipBuf(std::streambuf* compressed, std::string source_name);
  ~GzipBuf() override;
  GzipBuf(const GzipBuf&) = delete;
  GzipBuf& operator=(const GzipBuf&) = delete;

 protected:
  int_type underflow() override;

 private:
  [[noreturn]] void fail(const std::string& problem) const;
  std::streambuf* compressed_;
  std::string source_name_;
  z_stream z_{};
  bool member_done_ = false;  // the current gzip member ended (another may follow)
  size_t produced_ = 0;       // decompressed bytes so far, for messages
  std::array<char, 1 << 16> in_{}, out_{};
};

}  // namespace kforge::archive::detail
