#include "cli/health_command.h"

#include <cstdio>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/command_args.h"
#include "client/health_client.h"
#include "common/command_line.h"
#include "common/tls/transport_security.h"

// `gradwire health`.
ABSL_FLAG(std::string, addr, "", "The shard to check, as HOST:PORT.");
ABSL_FLAG(double, timeout_seconds, 5, "How long to wait for the answer.");
ABSL_FLAG(std::string, tls_cert, "", gradwire::kClientTlsCertHelp);
ABSL_FLAG(std::string, tls_key, "", gradwire::kClientTlsKeyHelp);
ABSL_FLAG(std::string, tls_ca, "", gradwire::kClientTlsCaHelp);
ABSL_FLAG(std::string, tls_server_name, "", gradwire::kClientTlsServerNameHelp);
ABSL_FLAG(bool, dry_run, false,
          "Check the flags, print the settings they resolve to, and exit "
          "without asking (exit 0; 2 for a bad flag).");

// Defined in main.cc: both commands take it.
ABSL_DECLARE_FLAG(std::string, auth_token_file);

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

constexpr absl::string_view kHealthFlags[] = {
    "addr",   "timeout_seconds", "tls_cert",        "tls_key",
    "tls_ca", "tls_server_name", "auth_token_file", "dry_run"};

// The health flags that GRADWIRE_<NAME> variables set too.
constexpr absl::string_view kHealthTransportFlags[] = {
    "tls_cert", "tls_key", "tls_ca", "tls_server_name", "auth_token_file"};

}  // namespace

std::string HealthHelp() { return FlagsHelp(kHealthUsage, kHealthFlags); }

int RunHealth(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    const std::string name = FlagName(arg);
    if (!name.empty() && !Contains(kHealthFlags, name)) {
      UsageError("health", absl::StrCat("unknown flag ", arg));
    }
  }
  // The transport flags also come from the environment, so that a probe
  // run inside a shard's container finds the shard's TLS settings there.
  if (absl::Status s = ApplyFlagEnvironment(kHealthTransportFlags); !s.ok()) {
    UsageError("health", s.message());
  }
  ParseOwnFlags("health", args);
  const std::string address = absl::GetFlag(FLAGS_addr);
  const double timeout = absl::GetFlag(FLAGS_timeout_seconds);
  if (address.empty()) UsageError("health", "--addr is required");
  if (!(timeout > 0)) UsageError("health", "--timeout-seconds must be > 0");
  TransportSecurityFiles files;
  files.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  files.tls_key = absl::GetFlag(FLAGS_tls_key);
  files.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  files.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  files.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  absl::StatusOr<TransportSecurity> transport =
      LoadTransportSecurity(files, TransportRole::kClient);
  if (!transport.ok()) UsageError("health", transport.status().message());
  if (absl::GetFlag(FLAGS_dry_run)) {
    std::fputs(FlagValues(kHealthFlags).c_str(), stdout);
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
