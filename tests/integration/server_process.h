// Real gradwire-server processes for integration tests.
//
// The binary comes from the environment variable GRADWIRE_SERVER_BIN (CTest
// sets it to the built target). A ServerProcess runs it with --port=0 and
// --port-file in a fresh temporary directory, waits for the port file, and
// kills (SIGKILL) and reaps the process in its destructor whatever happened
// in the test. The child also gets PR_SET_PDEATHSIG, so it dies with the test
// even if the test itself crashes.
//
// Thread safety: none; use a ServerProcess from one thread.
#ifndef GRADWIRE_TESTS_INTEGRATION_SERVER_PROCESS_H_
#define GRADWIRE_TESTS_INTEGRATION_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gradwire::testing {

// A directory under $TEST_TMPDIR (or /tmp) removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A loopback port that was free a moment ago (bound to port 0, then
// released): for a listener that cannot take port 0, or a port nobody
// listens on.
int PickFreeLoopbackPort();

// The text of `"key": value` in a flat JSON object (a worker's or a
// cluster's summary), quotes of a string value removed; empty if absent.
std::string SummaryField(const std::string& json, const std::string& key);

// Reads a whole file; empty if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// The path of the gradwire-server binary, from GRADWIRE_SERVER_BIN.
// FAILED_PRECONDITION when the variable is unset.
absl::StatusOr<std::string> ServerBinary();

struct ExitedProcess {
  // The exit code, or 128 + signal number if a signal ended the process.
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Forks and execs `args` (args[0] is the binary's path) with stdin from
// /dev/null and stdout and stderr redirected to the files `out_path` and
// `err_path`. The child gets PR_SET_PDEATHSIG(SIGKILL): it dies with the
// test. The caller reaps it (WaitForExit).
absl::StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& args,
                                   const std::string& out_path,
                                   const std::string& err_path);

// Reaps `pid`, waiting up to `timeout`: its exit code, or 128 + the signal
// that ended it. DEADLINE_EXCEEDED if it still runs (not killed).
absl::StatusOr<int> WaitForExit(pid_t pid, absl::Duration timeout);

// Runs `binary` with `args` to completion; kills it and fails with
// DEADLINE_EXCEEDED after `timeout`.
absl::StatusOr<ExitedProcess> RunToExit(
    const std::string& binary, const std::vector<std::string>& args,
    absl::Duration timeout = absl::Seconds(10));

// Runs the server binary with `args` to completion (for --help and bad
// flags); kills it and fails with DEADLINE_EXCEEDED after `timeout`.
absl::StatusOr<ExitedProcess> RunServerToExit(
    const std::vector<std::string>& args,
    absl::Duration timeout = absl::Seconds(10));

class ServerProcess {
 public:
  // Starts the server with `args` plus --port-file (and --port=0 unless
  // `args` set a port), and waits
  // up to `timeout` until it listens. Fails (with the server's stderr in the
  // message) if it exits or does not listen in time.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::vector<std::string>& args,
      absl::Duration timeout = absl::Seconds(10));

  // SIGKILLs the process if it still runs and reaps it.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  // "127.0.0.1:<port>".
  std::string target() const;
  pid_t pid() const { return pid_; }

  // Sends `signal` to the process (if it was not reaped yet).
  void Signal(int signal);
  // Waits up to `timeout` for the process to exit; returns its exit code (or
  // 128 + signal). DEADLINE_EXCEEDED if it still runs.
  absl::StatusOr<int> Wait(absl::Duration timeout);

  std::string Stdout() const;
  std::string Stderr() const;

  // A stub on a new channel to the server (64 MiB receive limit).
  std::unique_ptr<v1::ParameterServer::Stub> NewStub() const;
  std::shared_ptr<grpc::Channel> NewChannel() const;

 private:
  ServerProcess() = default;
  absl::Status WaitForPort(absl::Duration timeout);

  TempDir dir_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  int port_ = 0;
};

// Asks grpc.health.v1.Health/Check about `service` ("" = the whole
// server). Returns the ServingStatus number (1 SERVING, 2 NOT_SERVING) or
// the call's error.
absl::StatusOr<int> CheckHealth(std::shared_ptr<grpc::Channel> channel,
                                const std::string& service);

}  // namespace gradwire::testing

#endif  // GRADWIRE_TESTS_INTEGRATION_SERVER_PROCESS_H_
