#include "tests/integration/dev_certs.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace gradwire::testing {

absl::StatusOr<std::unique_ptr<DevCerts>> DevCerts::Make(
    const std::vector<std::string>& options) {
  const char* script = std::getenv("GRADWIRE_DEV_CERTS_SCRIPT");
  if (script == nullptr || *script == '\0') {
    return absl::FailedPreconditionError(
        "GRADWIRE_DEV_CERTS_SCRIPT is not set; run the test through ctest");
  }
  std::unique_ptr<DevCerts> certs(new DevCerts());
  std::vector<std::string> args = {certs->dir()};
  args.insert(args.end(), options.begin(), options.end());
  absl::StatusOr<ExitedProcess> run =
      RunToExit(script, args, absl::Seconds(60));
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return absl::InternalError(
        absl::StrCat(script, " exited with ", run->exit_code, ": ", run->err));
  }
  return certs;
}

std::vector<std::string> DevCerts::ServerFlags(bool require_client_cert) const {
  std::vector<std::string> flags = {"--tls-cert=" + server_cert(),
                                    "--tls-key=" + server_key()};
  if (require_client_cert) {
    flags.push_back("--tls-ca=" + ca());
    flags.push_back("--tls-require-client-cert");
  }
  return flags;
}

}  // namespace gradwire::testing
