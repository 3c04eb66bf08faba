#include "gzip_input.h"

#include "kforge/common/error.h"

namespace kforge::archive::detail {

bool starts_with_gzip(std::istream& in) {
  std::streambuf* sb = in.rdbuf();
  if (sb->sgetc() != 0x1f) return false;
  sb->sbumpc();
  bool gzip = sb->sgetc() == 0x8b;
  sb->sungetc();  // one byte back: always possible right after sbumpc
  return gzip;
}

GzipBuf::GzipBuf(std::streambuf* compressed, std::string source_name)
    : compressed_(compressed), source_name_(std::move(source_name)) {
  if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK)  // 16: gzip wrapper only
    throw Error("zlib could not start decompressing " + source_name_ +
                (z_.msg ? std::string(": ") + z_.msg : ""));
  setg(out_.data(), out_.data(), out_.data());
}

GzipBuf::~GzipBuf() {
  inflateEnd(&z_);
}

void GzipBuf::fail(const std::string& problem) const {
  throw InputError(source_name_, std::nullopt, "",
                   "gzip data " + problem + " after " + std::to_string(produced_) +
                       " decompressed byte(s); `gunzip -t` checks the file (or gunzip it first and "
                       "import the .jsonl)");
}

GzipBuf::int_type GzipBuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  while (true) {
    if (z_.avail_in == 0) {
      std::streamsize n = compressed_->sgetn(in_.data(), static_cast<std::streamsize>(in_.size()));
      if (n <= 0) {
        if (member_done_) return traits_type::eof();
        fail("ends early (the file is truncated?)");
      }
      z_.next_in = reinterpret_cast<Bytef*>(in_.data());
      z_.avail_in = static_cast<uInt>(n);
    }
    if (member_done_) {  // more bytes after a complete member: the next member (as gunzip does)
      if (inflateReset(&z_) != Z_OK) fail("could not be read (zlib reset failed)");
      member_done_ = false;
    }
    z_.next_out = reinterpret_cast<Bytef*>(out_.data());
    z_.avail_out = static_cast<uInt>(out_.size());
    int rc = inflate(&z_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END)
      member_done_ = true;
    else if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_MEM_ERROR || rc == Z_STREAM_ERROR)
      fail(std::string("is damaged (zlib: ") + (z_.msg ? z_.msg : "error " + std::to_string(rc)) +
           ")");
    size_t got = out_.size() - z_.avail_out;
    if (got > 0) {
      produced_ += got;
      setg(out_.data(), out_.data(), out_.data() + got);
      return traits_type::to_int_type(*gptr());
    }
  }
}

}  // namespace kforge::archive::detail
