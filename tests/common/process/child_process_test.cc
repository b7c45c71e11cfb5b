// ChildProcess and the file helpers beside it: exit codes, signals, output
// redirection, the PATH search and a log's tail.
#include "common/process/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/gradwire-process-",
                      getpid(), "-", name);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<std::unique_ptr<ChildProcess>> Shell(const std::string& script,
                                                    const std::string& out) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.stdout_path = options.stderr_path = out;
  options.extra_env = {"GRADWIRE_PROCESS_TEST=hello"};
  return ChildProcess::Spawn(options);
}

TEST(ChildProcessTest, ReportsExitCodeAndWritesOutputToTheLog) {
  const std::string log = TempPath("exit.log");
  auto child =
      Shell("echo out $GRADWIRE_PROCESS_TEST; echo err >&2; exit 3", log);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->Wait(), 3);
  EXPECT_EQ((*child)->exit_code(), 3);
  EXPECT_FALSE((*child)->running());
  EXPECT_EQ(Slurp(log), "out hello\nerr\n");
  std::remove(log.c_str());
}

TEST(ChildProcessTest, SignalEndsTheChildWith128PlusTheSignal) {
  const std::string log = TempPath("signal.log");
  auto child = Shell("exec sleep 30", log);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_TRUE((*child)->running());
  (*child)->Signal(SIGTERM);
  EXPECT_EQ((*child)->Wait(), 128 + SIGTERM);
  std::remove(log.c_str());
}

TEST(ChildProcessTest, MissingBinaryExitsWith127) {
  SpawnOptions options;
  options.argv = {"/nonexistent/gradwire-no-such-binary"};
  const std::string log = TempPath("missing.log");
  options.stdout_path = options.stderr_path = log;
  auto child = ChildProcess::Spawn(options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->Wait(), 127);
  std::remove(log.c_str());
}

// A command keeps its argv[0] as written while `program` names the file;
// unset_env hides a variable; stdout_fd takes the place of a log file.
TEST(ChildProcessTest, ProgramUnsetEnvAndOutputDescriptor) {
  setenv("GRADWIRE_PROCESS_TEST_HIDDEN", "visible", 1);
  int ends[2];
  ASSERT_EQ(pipe2(ends, O_CLOEXEC), 0);
  SpawnOptions options;
  options.program = "/bin/sh";
  options.argv = {"my-sh", "-c",
                  "echo \"$0 ${GRADWIRE_PROCESS_TEST_HIDDEN:-unset}\""};
  options.unset_env = {"GRADWIRE_PROCESS_TEST_HIDDEN"};
  options.stdout_fd = ends[1];
  auto child = ChildProcess::Spawn(options);
  close(ends[1]);
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out;
  char buffer[256];
  for (ssize_t n; (n = read(ends[0], buffer, sizeof(buffer))) > 0;) {
    out.append(buffer, static_cast<size_t>(n));
  }
  close(ends[0]);
  EXPECT_EQ((*child)->Wait(), 0);
  EXPECT_EQ(out, "my-sh unset\n");
  unsetenv("GRADWIRE_PROCESS_TEST_HIDDEN");
}

TEST(FindExecutableTest, SearchesPathAndKeepsPathsWithASlash) {
  auto sh = FindExecutable("sh");
  ASSERT_TRUE(sh.ok()) << sh.status();
  EXPECT_EQ(access(sh->c_str(), X_OK), 0) << *sh;
  EXPECT_EQ(*FindExecutable("/bin/sh"), "/bin/sh");
  EXPECT_EQ(FindExecutable("gradwire-no-such-program").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(FindExecutable("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TailOfFileTest, KeepsTheLastLines) {
  const std::string path = TempPath("tail.txt");
  std::ofstream(path) << "one\ntwo\nthree\nfour\n";
  EXPECT_EQ(TailOfFile(path, 2), "three\nfour");
  EXPECT_EQ(TailOfFile(path + ".missing", 2), "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gradwire
