#include "problem_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace kforge::tasks {

namespace {
constexpr size_t kReadPerCall = size_t{4} << 20;
}

ProblemOutput::ProblemOutput(UniqueFd read_end, std::string idle, Show show)
    : fd_(std::move(read_end)), idle_(std::move(idle)), who_(idle_), show_(std::move(show)) {
  if (fd_) ::fcntl(fd_.get(), F_SETFL, ::fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
}

void ProblemOutput::read_available() {
  char chunk[65536];
  for (size_t got = 0; fd_ && got < kReadPerCall;) {
    ssize_t n = ::read(fd_.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // every writer closed it (or it failed): nothing more will come
      fd_.reset();
      return;
    }
    take(chunk, static_cast<size_t>(n));
    got += static_cast<size_t>(n);
  }
}

void ProblemOutput::begin(const std::string& who) {
  end();
  who_ = who;
}

void ProblemOutput::end() {
  if (!line_.empty() || cut_bytes_ > 0) show_line();
  if (lines_hidden_ > 0)
    show_(who_, "(" + std::to_string(lines_hidden_) + " more line(s) not shown)");
  who_ = idle_;
  lines_shown_ = lines_hidden_ = 0;
}

void ProblemOutput::take(const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(data[i]);
    if (c == '\n') {
      show_line();
    } else if (line_.size() >= kShownLineBytes) {
      ++cut_bytes_;
    } else {  // a terminal's escape sequences and carriage returns stay the problem's
      line_ += (c < 0x20 && c != '\t') || c == 0x7f ? '?' : static_cast<char>(c);
    }
  }
}

void ProblemOutput::show_line() {
  if (lines_shown_ < kShownLines) {
    ++lines_shown_;
    show_(who_,
          cut_bytes_ > 0 ? line_ + " ... (" + std::to_string(cut_bytes_) + " bytes cut)" : line_);
  } else {
    ++lines_hidden_;
  }
  line_.clear();
  cut_bytes_ = 0;
}

}  // namespace kforge::tasks
