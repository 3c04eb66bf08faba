// Files kforge reads from a path or a folder that someone else controls (LLM and run configs, a
// batch folder's answer files): only regular files (after symbolic links), of a bounded size,
// opened without blocking. A FIFO named like an input hung the read for ever and a link to
// /dev/zero never ended; here both are an InputError naming the file.
//
//   std::string text = read_input_file(path, kMaxConfigBytes);      // the whole file
//   InputFile f(path, kMaxBytes);                                   // or line by line, bounded
//   for (std::string line; f.next_line(line, kMaxLineBytes);) ...   // f.line() is its number
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "kforge/common/error.h"

namespace kforge {

class InputFile {
 public:
  // Throws InputError(path, nullopt, "", problem) when `path` cannot be opened, is not a regular
  // file (a folder, a FIFO, a device, also behind a symbolic link) or holds more than max_bytes.
  InputFile(std::string path, int64_t max_bytes) : path_(std::move(path)), max_bytes_(max_bytes) {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) fail("cannot read: " + std::string(std::strerror(errno)));
    check(st);  // before open(): opening a device can itself do something
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) fail("cannot read: " + std::string(std::strerror(errno)));
    if (::fstat(fd_, &st) != 0) fail("cannot read: " + std::string(std::strerror(errno)));
    check(st);  // what was opened, if the path changed in between
  }
  ~InputFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  int line() const { return line_; }  // the number of the line next_line returned last (1-based)

  // The next line without its '\n' (a last line without one too); false at the end. Throws
  // InputError(path, line, "", ...) for a line longer than max_line_bytes, or when the file grew
  // past max_bytes while it was read.
  bool next_line(std::string& out, size_t max_line_bytes) {
    out.clear();
    for (;;) {
      if (pos_ == end_ && !fill()) {
        if (out.empty() && !partial_) return false;
        partial_ = false;
        ++line_;
        return true;
      }
      const char* start = buf_ + pos_;
      const void* nl = std::memchr(start, '\n', end_ - pos_);
      size_t take = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) : end_ - pos_;
      if (out.size() + take > max_line_bytes)
        throw InputError(path_, line_ + 1, "",
                         "a line of more than " + std::to_string(max_line_bytes) + " bytes");
      out.append(start, take);
      pos_ += take;
      if (nl) {
        ++pos_;
        ++line_;
        partial_ = false;
        return true;
      }
      partial_ = true;
    }
  }

  // Whether the file has nothing more to read (a last line without a '\n' may be one still being
  // written).
  bool at_end() { return pos_ == end_ && !fill(); }

  // The rest of the file.
  std::string read_all() {
    std::string out(buf_ + pos_, end_ - pos_);
    pos_ = end_;
    while (fill()) out.append(buf_, end_), pos_ = end_;
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(path_, std::nullopt, "", problem);
  }

  void check(const struct stat& st) const {
    if (S_ISDIR(st.st_mode)) fail("a folder, not a file");
    if (S_ISFIFO(st.st_mode)) fail("a FIFO (named pipe), not a regular file");
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) fail("a device, not a regular file");
    if (!S_ISREG(st.st_mode)) fail("not a regular file");
    if (st.st_size > max_bytes_)
      fail(std::to_string(st.st_size) + " bytes; the limit is " + std::to_string(max_bytes_));
  }

  bool fill() {
    pos_ = end_ = 0;
    for (;;) {
      ssize_t n = ::read(fd_, buf_, sizeof buf_);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("cannot read: " + std::string(std::strerror(errno)));
      if (n == 0) return false;
      read_ += n;
      if (read_ > max_bytes_)
        fail("more than " + std::to_string(max_bytes_) + " bytes (it grew while read)");
      end_ = static_cast<size_t>(n);
      return true;
    }
  }

  std::string path_;
  int64_t max_bytes_;
  int fd_ = -1;
  char buf_[1 << 16];
  size_t pos_ = 0, end_ = 0;
  int64_t read_ = 0;
  int line_ = 0;
  bool partial_ = false;
};

// The whole of a regular file of at most max_bytes; InputError naming the file otherwise.
inline std::string read_input_file(const std::string& path, int64_t max_bytes) {
  InputFile f(path, max_bytes);
  return f.read_all();
}

}  // namespace kforge
