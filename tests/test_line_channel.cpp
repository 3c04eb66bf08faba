// The one line channel (common/line_channel.h) that every pair of kforge processes speaks: lines
// written whole, split under a cap with each byte scanned once, awaited until a deadline.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kforge/common/error.h"
#include "kforge/common/line_channel.h"
#include "kforge/common/process.h"

namespace {

using namespace kforge;
using namespace std::chrono_literals;
using Got = LineReader::Got;

Deadline in(std::chrono::milliseconds ms) {
  return std::chrono::steady_clock::now() + ms;
}

TEST(LineChannel, SplitsLinesHoweverTheyArriveAndStopsAtTheCap) {
  LineSplitter s(8);
  std::string text = "one\ntwo\n\nthree";
  for (char c : text) s.append(&c, 1);
  EXPECT_EQ(s.next(), "one");
  EXPECT_EQ(s.next(), "two");
  EXPECT_EQ(s.next(), "");
  EXPECT_EQ(s.next(), std::nullopt);  // "three" is not whole yet
  EXPECT_EQ(s.rest(), "three");
  s.append("\n", 1);
  EXPECT_EQ(s.next(), "three");
  s.append("12345678\n", 9);  // exactly the cap
  EXPECT_EQ(s.next(), "12345678");
  s.append("123456789", 9);  // over it, newline or not
  EXPECT_EQ(s.next(), std::nullopt);
  EXPECT_TRUE(s.over_limit());
  s.append("\nmore\n", 6);
  EXPECT_EQ(s.next(), std::nullopt) << "nothing comes out after a line over the cap";
  s.clear();
  s.append("again\n", 6);
  EXPECT_EQ(s.next(), "again");
}

TEST(LineChannel, WritesWholeLinesToPipesAndSockets) {
  Pipe p = make_pipe();
  ASSERT_TRUE(write_line(p.write.get(), R"({"a":1})"));
  auto [mine, theirs] = socket_pair();
  std::string big(1 << 20, 'x');  // more than a socket buffer: written in several pieces
  std::thread writer([&, fd = mine.get()] { EXPECT_TRUE(write_line(fd, big)); });
  LineReader from_pipe(p.read.get()), from_socket(theirs.get());
  std::string line;
  ASSERT_EQ(from_pipe.next(line, in(1000ms)), Got::Line);
  EXPECT_EQ(line, R"({"a":1})");
  ASSERT_EQ(from_socket.next(line, in(5000ms)), Got::Line);
  EXPECT_EQ(line.size(), big.size());
  writer.join();
  theirs.reset();  // a socket whose peer is gone: false, not SIGPIPE
  EXPECT_FALSE(write_line(mine.get(), "nobody listens"));
}

TEST(LineChannel, ReadsUntilTheDeadlineTheEndOrTheCap) {
  auto [a, b] = socket_pair();
  LineReader r(b.get(), 16);
  std::string line;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(r.next(line, in(100ms)), Got::Timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 90ms);
  ASSERT_TRUE(write_all(a.get(), "first\nsecond\npart"));
  EXPECT_EQ(r.next(line, in(1000ms)), Got::Line);
  EXPECT_EQ(line, "first");
  EXPECT_EQ(r.next(line, in(-1000ms)), Got::Line) << "a line received comes, past the deadline";
  EXPECT_EQ(line, "second");
  EXPECT_EQ(r.next(line, in(-1000ms)), Got::Timeout);
  ASSERT_TRUE(write_all(a.get(), "ial and far too long\n"));
  EXPECT_EQ(r.next(line, in(1000ms)), Got::TooLong);
  r.reset(b.get());
  ASSERT_TRUE(write_line(a.get(), "fresh"));
  EXPECT_EQ(r.next(line, in(1000ms)), Got::Line);
  EXPECT_EQ(line, "fresh");
  a.reset();
  EXPECT_EQ(r.next(line, in(1000ms)), Got::Closed);
  EXPECT_EQ(r.next(line), Got::Closed) << "no deadline: the end still ends it";
}

TEST(LineChannel, WaitsForReadableUntilTheDeadline) {
  Pipe p = make_pipe();
  EXPECT_EQ(wait_readable(p.read.get(), in(50ms)), Wait::Timeout);
  EXPECT_EQ(wait_readable(p.read.get(), in(-1ms)), Wait::Timeout);
  ASSERT_TRUE(write_all(p.write.get(), "x"));
  EXPECT_EQ(wait_readable(p.read.get(), in(1000ms)), Wait::Ready);
  EXPECT_EQ(wait_readable(p.read.get(), std::nullopt), Wait::Ready);
}

}  // namespace
