// The relay of `gradwire run`'s worker output: whole lines behind the rank,
// on the stream the worker used, the last partial line at the end, very
// long lines in pieces, and the unprefixed log.
#include "cli/worker_output.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::cli {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::StartsWith;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteTo(int fd, const std::string& text) {
  ASSERT_EQ(write(fd, text.data(), text.size()),
            static_cast<ssize_t>(text.size()));
}

class WorkerOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/worker-output-", getpid());
    std::filesystem::create_directories(dir_);
    out_ = std::fopen((dir_ + "/out").c_str(), "w");
    err_ = std::fopen((dir_ + "/err").c_str(), "w");
  }
  void TearDown() override {
    std::fclose(out_);
    std::fclose(err_);
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::FILE* out_ = nullptr;
  std::FILE* err_ = nullptr;
};

TEST_F(WorkerOutputTest, PrefixesWholeLinesAndFlushesTheLastOne) {
  auto output =
      WorkerOutput::Create({dir_ + "/w0.log", dir_ + "/w1.log"}, out_, err_);
  ASSERT_TRUE(output.ok()) << output.status();
  (*output)->Start();
  WriteTo((*output)->stdout_write_end(1), "one\ntw");
  WriteTo((*output)->stderr_write_end(0), "oops\n");
  WriteTo((*output)->stdout_write_end(1), "o\nthree");
  (*output)->CloseWriteEnds(0);
  (*output)->CloseWriteEnds(1);
  (*output)->Finish(absl::Seconds(5));
  EXPECT_EQ(Slurp(dir_ + "/out"), "[1] one\n[1] two\n[1] three\n");
  EXPECT_EQ(Slurp(dir_ + "/err"), "[0] oops\n");
  EXPECT_EQ(Slurp(dir_ + "/w1.log"), "one\ntwo\nthree\n");
  EXPECT_EQ(Slurp(dir_ + "/w0.log"), "oops\n");
}

TEST_F(WorkerOutputTest, AVeryLongLineComesInPieces) {
  auto output = WorkerOutput::Create({dir_ + "/w0.log"}, out_, err_);
  ASSERT_TRUE(output.ok()) << output.status();
  (*output)->Start();
  const std::string bar(WorkerOutput::kMaxLineBytes * 2 + 10, '#');
  WriteTo((*output)->stdout_write_end(0), bar);
  (*output)->Finish(absl::Seconds(5));
  const std::vector<std::string> lines =
      absl::StrSplit(Slurp(dir_ + "/out"), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines, Each(StartsWith("[0] #")));
  EXPECT_EQ(lines[2], "[0] ##########");
}

// A process the worker left behind keeps the pipe open: Finish stops
// waiting for it after its drain time.
TEST_F(WorkerOutputTest, FinishStopsWaitingForAnOpenPipe) {
  auto output = WorkerOutput::Create({dir_ + "/w0.log"}, out_, err_);
  ASSERT_TRUE(output.ok()) << output.status();
  (*output)->Start();
  const int held = dup((*output)->stdout_write_end(0));
  WriteTo(held, "partial");
  const absl::Time start = absl::Now();
  (*output)->Finish(absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  close(held);
  EXPECT_EQ(Slurp(dir_ + "/out"), "[0] partial\n");
}

}  // namespace
}  // namespace gradwire::cli
