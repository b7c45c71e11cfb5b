#include "cli/health_command.h"

#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/command_args.h"
#include "client/health_client.h"
#include "common/flags/command_line.h"
#include "common/flags/program.h"
#include "common/flags/tls_flags.h"

// `gradwire health`.
ABSL_FLAG(std::string, addr, "", "The shard to check, as HOST:PORT.");
ABSL_FLAG(double, timeout_seconds, 5, "How long to wait for the answer.");
// The client TLS flags and --dry-run are shared (common/flags).

namespace gradwire::cli {
namespace {

constexpr absl::string_view kHealthUsage =
    "gradwire health: asks a shard whether it serves "
    "(grpc.health.v1, service gradwire.v1.ParameterServer).\n"
    "\n"
    "  gradwire health --addr=127.0.0.1:7000\n"
    "  gradwire health --addr=shard-0:7000 --tls-ca=ca.pem "
    "[--tls-cert=client.pem "
    "--tls-key=client.key]\n"
    "\n"
    "Exit code: 0 and SERVING on stdout when it serves; 1 with the status "
    "(NOT_SERVING,\nunreachable, no answer in time, ...) otherwise; 2 for a "
    "bad command line.\nThe --tls-* flags and --auth-token-file also come "
    "from GRADWIRE_TLS_CA, ...;\nthe command line wins.";

constexpr absl::string_view kHealthOwnFlags[] = {"addr", "timeout_seconds"};

// Every flag of `gradwire health`, in --help order.
absl::Span<const absl::string_view> HealthFlags() {
  static const std::vector<absl::string_view> names =
      JoinFlagNames({kHealthOwnFlags, kClientTlsFlagNames, kDryRunFlagNames});
  return names;
}

}  // namespace

std::string HealthHelp() { return FlagsHelp(kHealthUsage, HealthFlags()); }

int RunHealth(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    const std::string name = FlagName(arg);
    if (!name.empty() && !Contains(HealthFlags(), name)) {
      UsageError("health", absl::StrCat("unknown flag ", arg));
    }
  }
  // The transport flags also come from the environment, so that a probe
  // run inside a shard's container finds the shard's TLS settings there.
  if (absl::Status s = ApplyFlagEnvironment(kClientTlsFlagNames); !s.ok()) {
    UsageError("health", s.message());
  }
  ParseOwnFlags("health", args);
  const std::string address = absl::GetFlag(FLAGS_addr);
  const double timeout = absl::GetFlag(FLAGS_timeout_seconds);
  if (address.empty()) UsageError("health", "--addr is required");
  if (!(timeout > 0)) UsageError("health", "--timeout-seconds must be > 0");
  const TransportSecurityFiles files = ClientTlsFilesFromFlags();
  absl::StatusOr<TransportSecurity> transport =
      LoadTransportSecurity(files, TransportRole::kClient);
  if (!transport.ok()) UsageError("health", transport.status().message());
  if (DryRunRequested()) {
    std::fputs(FlagValues(HealthFlags()).c_str(), stdout);
    return 0;
  }
  const absl::Status status =
      CheckHealth(address, absl::Seconds(timeout), *transport);
  if (!status.ok()) {
    std::printf("%s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("SERVING\n");
  return 0;
}

}  // namespace gradwire::cli
