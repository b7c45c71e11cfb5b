// TLS material for integration tests: scripts/dev-certs.sh (its path comes
// from GRADWIRE_DEV_CERTS_SCRIPT, which CTest sets) run into a fresh
// temporary directory, removed with the DevCerts. Each run makes its own
// CA, so two DevCerts do not trust each other.
//
// Thread safety: none needed; the paths are constant after Make.
#ifndef GRADWIRE_TESTS_INTEGRATION_DEV_CERTS_H_
#define GRADWIRE_TESTS_INTEGRATION_DEV_CERTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/integration/server_process.h"

namespace gradwire::testing {

class DevCerts {
 public:
  // Runs the script with `options` (e.g. {"--expired"}); its output in the
  // error when it fails.
  static absl::StatusOr<std::unique_ptr<DevCerts>> Make(
      const std::vector<std::string>& options = {});

  const std::string& dir() const { return dir_.path(); }
  std::string ca() const { return dir() + "/ca.pem"; }
  std::string server_cert() const { return dir() + "/server.pem"; }
  std::string server_key() const { return dir() + "/server.key"; }
  std::string client_cert() const { return dir() + "/client.pem"; }
  std::string client_key() const { return dir() + "/client.key"; }
  std::string token_file() const { return dir() + "/auth-token"; }

  // gradwire-server flags serving server.pem; with `require_client_cert`
  // also --tls-ca and --tls-require-client-cert.
  std::vector<std::string> ServerFlags(bool require_client_cert) const;

 private:
  DevCerts() = default;
  TempDir dir_;
};

}  // namespace gradwire::testing

#endif  // GRADWIRE_TESTS_INTEGRATION_DEV_CERTS_H_
