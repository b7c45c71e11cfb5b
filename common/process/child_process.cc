#include "common/process/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace gradwire {
namespace {

// Owns a file descriptor opened in the parent for a child's output.
class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

absl::Status OpenOutput(const std::string& path, Descriptor* fd) {
  if (path.empty()) return absl::OkStatus();
  const int opened =
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (opened < 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  fd->reset(opened);
  return absl::OkStatus();
}

// The parent's environment without the variables named in `unset`, with
// `extra` ("NAME=value") replacing or adding entries.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::string>& extra,
    const std::vector<std::string>& unset) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const absl::string_view name =
        absl::string_view(*entry).substr(0, std::strcspn(*entry, "="));
    const bool replaced =
        std::any_of(extra.begin(), extra.end(), [name](const std::string& e) {
          return absl::StartsWith(e, absl::StrCat(name, "="));
        });
    const bool removed =
        std::find(unset.begin(), unset.end(), name) != unset.end();
    if (!replaced && !removed) env.push_back(*entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> NullTerminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Runs in the child between fork and exec: async-signal-safe calls only (the
// parent may have gRPC threads). Never returns.
[[noreturn]] void ExecChild(pid_t parent, int out, int err, const char* program,
                            char** argv, char** envp) {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(127);  // The parent died before prctl.
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  const int in = open("/dev/null", O_RDONLY);
  if (in < 0 || dup2(in, 0) < 0) _exit(127);
  if (out >= 0 && dup2(out, 1) < 0) _exit(127);
  if (err >= 0 && dup2(err, 2) < 0) _exit(127);
  execve(program, argv, envp);
  const char* reason = strerror(errno);
  const char prefix[] = "cannot execute ";
  (void)!write(2, prefix, sizeof(prefix) - 1);
  (void)!write(2, program, strlen(program));
  (void)!write(2, ": ", 2);
  (void)!write(2, reason, strlen(reason));
  (void)!write(2, "\n", 1);
  _exit(127);
}

// Why `path` is not a regular file (after symlinks) that this process may
// execute; empty when it is one.
std::string NotExecutableReason(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (access(path.c_str(), X_OK) != 0) return "not executable";
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("empty argv");
  Descriptor out, err;
  if (absl::Status s = OpenOutput(options.stdout_path, &out); !s.ok()) return s;
  if (options.stderr_path != options.stdout_path) {
    if (absl::Status s = OpenOutput(options.stderr_path, &err); !s.ok()) {
      return s;
    }
  }
  int err_fd =
      options.stderr_path == options.stdout_path ? out.get() : err.get();
  const int out_fd = options.stdout_fd >= 0 ? options.stdout_fd : out.get();
  if (options.stderr_fd >= 0) err_fd = options.stderr_fd;
  std::vector<std::string> args = options.argv;
  std::vector<std::string> env =
      ChildEnvironment(options.extra_env, options.unset_env);
  std::vector<char*> argv = NullTerminated(args);
  std::vector<char*> envp = NullTerminated(env);
  const std::string& program =
      options.program.empty() ? options.argv[0] : options.program;
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    ExecChild(parent, out_fd, err_fd, program.c_str(), argv.data(),
              envp.data());
  }
  // Also set here, so the group exists before the parent signals it.
  setpgid(pid, pid);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid));
}

ChildProcess::~ChildProcess() {
  if (exit_code_.has_value()) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

bool ChildProcess::Poll() {
  if (exit_code_.has_value()) return true;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid_) return false;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

int ChildProcess::Wait() {
  if (exit_code_.has_value()) return *exit_code_;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return *exit_code_;
}

void ChildProcess::Signal(int signal) {
  if (exit_code_.has_value()) return;
  // The group, and the child itself in case it has left its group.
  kill(-pid_, signal);
  kill(pid_, signal);
}

absl::StatusOr<std::string> SelfDirectory() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n < 0) return absl::ErrnoToStatus(errno, "readlink /proc/self/exe");
  const std::string exe(path, n);
  return exe.substr(0, exe.rfind('/'));
}

absl::StatusOr<std::string> FindExecutable(const std::string& program) {
  if (program.empty()) return absl::InvalidArgumentError("empty program name");
  if (absl::StrContains(program, '/')) {
    const std::string reason = NotExecutableReason(program);
    if (reason.empty()) return program;
    return absl::NotFoundError(absl::StrCat(program, ": ", reason));
  }
  // glibc's execvp uses confstr(_CS_PATH) when PATH is unset: /bin:/usr/bin.
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/bin:/usr/bin";
  for (absl::string_view dir : absl::StrSplit(dirs, ':')) {
    const std::string candidate =
        dir.empty() ? program : absl::StrCat(dir, "/", program);
    if (NotExecutableReason(candidate).empty()) {
      return dir.empty() ? absl::StrCat("./", program) : candidate;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("no executable file ", program, " in PATH (", dirs, ")"));
}

std::string TailOfFile(const std::string& path, int max_lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - (64 << 10));
  in.seekg(start);
  std::string text(std::istreambuf_iterator<char>(in), {});
  // A progress bar redraws with '\r'; keep only what the line ended with.
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    while (absl::ConsumeSuffix(&line, "\r")) {
    }
    const size_t cr = line.rfind('\r');
    if (cr != absl::string_view::npos) line.remove_prefix(cr + 1);
    lines.emplace_back(line);
  }
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // Partial.
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (static_cast<int>(lines.size()) > max_lines) {
    lines.erase(lines.begin(), lines.end() - max_lines);
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace gradwire
