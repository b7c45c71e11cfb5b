#include "tests/integration/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"

namespace gradwire::testing {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(10);

std::vector<std::string> CommandLine(const std::string& binary,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> command = {binary};
  command.insert(command.end(), args.begin(), args.end());
  return command;
}

}  // namespace

// Only async-signal-safe calls run between fork and exec (the test process
// has gRPC threads).
absl::StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& args,
                                   const std::string& out_path,
                                   const std::string& err_path) {
  std::vector<char*> argv;
  for (const std::string& arg : args)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

absl::StatusOr<int> WaitForExit(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (r < 0 && errno != EINTR) return absl::ErrnoToStatus(errno, "waitpid");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("process ", pid, " still runs after ",
                       absl::FormatDuration(timeout)));
    }
    absl::SleepFor(kPollInterval);
  }
}

TempDir::TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr ? base : "/tmp", "/gradwire-it-XXXXXX");
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<std::string> ServerBinary() {
  const char* binary = std::getenv("GRADWIRE_SERVER_BIN");
  if (binary == nullptr || *binary == '\0') {
    return absl::FailedPreconditionError(
        "GRADWIRE_SERVER_BIN is not set; run the test through ctest");
  }
  return std::string(binary);
}

absl::StatusOr<ExitedProcess> RunServerToExit(
    const std::vector<std::string>& args, absl::Duration timeout) {
  absl::StatusOr<std::string> binary = ServerBinary();
  if (!binary.ok()) return binary.status();
  return RunToExit(*binary, args, timeout);
}

absl::StatusOr<ExitedProcess> RunToExit(const std::string& binary,
                                        const std::vector<std::string>& args,
                                        absl::Duration timeout) {
  TempDir dir;
  const std::string out = dir.path() + "/stdout", err = dir.path() + "/stderr";
  absl::StatusOr<pid_t> pid = SpawnProcess(CommandLine(binary, args), out, err);
  if (!pid.ok()) return pid.status();
  absl::StatusOr<int> code = WaitForExit(*pid, timeout);
  if (!code.ok()) {
    kill(*pid, SIGKILL);
    WaitForExit(*pid, absl::Seconds(10)).IgnoreError();
    return code.status();
  }
  return ExitedProcess{*code, ReadFileOrEmpty(out), ReadFileOrEmpty(err)};
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::vector<std::string>& args, absl::Duration timeout) {
  absl::StatusOr<std::string> binary = ServerBinary();
  if (!binary.ok()) return binary.status();
  std::unique_ptr<ServerProcess> process(new ServerProcess());
  std::vector<std::string> command = CommandLine(*binary, args);
  // A fixed --port from the caller (a restart on the same address) wins.
  const bool has_port = std::any_of(
      args.begin(), args.end(),
      [](const std::string& arg) { return absl::StartsWith(arg, "--port="); });
  if (!has_port) command.push_back("--port=0");
  command.push_back("--port-file=" + process->dir_.path() + "/port");
  absl::StatusOr<pid_t> pid =
      SpawnProcess(command, process->dir_.path() + "/stdout",
                   process->dir_.path() + "/stderr");
  if (!pid.ok()) return pid.status();
  process->pid_ = *pid;
  if (absl::Status s = process->WaitForPort(timeout); !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat(s.message(), "; command: ", absl::StrJoin(command, " "),
                     "; stderr:\n", process->Stderr()));
  }
  return process;
}

absl::Status ServerProcess::WaitForPort(absl::Duration timeout) {
  const std::string path = dir_.path() + "/port";
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileOrEmpty(path)),
                         &port_) &&
        port_ > 0) {
      return absl::OkStatus();
    }
    absl::StatusOr<int> code = WaitForExit(pid_, absl::ZeroDuration());
    if (code.ok()) {
      exit_code_ = *code;
      return absl::InternalError(
          absl::StrCat("the server exited with ", *code, " before listening"));
    }
    absl::SleepFor(kPollInterval);
  }
  return absl::DeadlineExceededError("no port file before the timeout");
}

ServerProcess::~ServerProcess() {
  if (pid_ <= 0 || exit_code_.has_value()) return;
  kill(pid_, SIGKILL);
  WaitForExit(pid_, absl::Seconds(30)).IgnoreError();
}

std::string ServerProcess::target() const {
  return absl::StrCat("127.0.0.1:", port_);
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0 && !exit_code_.has_value()) kill(pid_, signal);
}

absl::StatusOr<int> ServerProcess::Wait(absl::Duration timeout) {
  if (exit_code_.has_value()) return *exit_code_;
  absl::StatusOr<int> code = WaitForExit(pid_, timeout);
  if (code.ok()) exit_code_ = *code;
  return code;
}

std::string ServerProcess::Stdout() const {
  return ReadFileOrEmpty(dir_.path() + "/stdout");
}

std::string ServerProcess::Stderr() const {
  return ReadFileOrEmpty(dir_.path() + "/stderr");
}

std::shared_ptr<grpc::Channel> ServerProcess::NewChannel() const {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(target(), grpc::InsecureChannelCredentials(),
                                   arguments);
}

std::unique_ptr<v1::ParameterServer::Stub> ServerProcess::NewStub() const {
  return v1::ParameterServer::NewStub(NewChannel());
}

std::string SummaryField(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 4;
  std::string value =
      json.substr(start, json.find_first_of(",}", start) - start);
  if (value.size() >= 2 && value.front() == '"') {
    value = value.substr(1, value.size() - 2);
  }
  return value;
}

int PickFreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (fd >= 0 &&
      bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

absl::StatusOr<int> CheckHealth(std::shared_ptr<grpc::Channel> channel,
                                const std::string& service) {
  // grpc.health.v1 messages, encoded by hand because the installed gRPC
  // ships no generated health client: HealthCheckRequest{string service = 1}
  // and HealthCheckResponse{ServingStatus status = 1}.
  std::string request = "\x0a";
  request.push_back(static_cast<char>(service.size()));
  request += service;
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1), response_buffer;
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request_buffer, &response_buffer,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  std::vector<grpc::Slice> slices;
  if (!response_buffer.Dump(&slices).ok()) {
    return absl::InternalError("unreadable health response");
  }
  std::string response;
  for (const grpc::Slice& s : slices) {
    response.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (response.empty()) return 0;
  if (response.size() != 2 || response[0] != '\x08') {
    return absl::InternalError("unexpected health response encoding");
  }
  return static_cast<int>(response[1]);
}

}  // namespace gradwire::testing
