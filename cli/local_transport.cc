#include "cli/local_transport.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gradwire::cli {

LocalTransport LocalTransportFrom(const std::string& tls_dir,
                                  const std::string& auth_token_file,
                                  bool allow_insecure_token) {
  LocalTransport t;
  t.shard.allow_insecure_token = t.worker.allow_insecure_token =
      allow_insecure_token;
  const std::string token = !auth_token_file.empty() || tls_dir.empty()
                                ? auth_token_file
                                : absl::StrCat(tls_dir, "/", kDevAuthToken);
  t.shard.auth_token_file = t.worker.auth_token_file = token;
  if (tls_dir.empty()) return t;
  const auto path = [&tls_dir](const char* name) {
    return absl::StrCat(tls_dir, "/", name);
  };
  t.shard.tls_cert = path(kDevServerCert);
  t.shard.tls_key = path(kDevServerKey);
  t.shard.tls_ca = path(kDevCaCert);
  t.shard.tls_require_client_cert = true;
  t.worker.tls_cert = path(kDevClientCert);
  t.worker.tls_key = path(kDevClientKey);
  t.worker.tls_ca = path(kDevCaCert);
  if (auth_token_file.empty() &&
      std::filesystem::exists(path(kDevWorkerTokens))) {
    t.shard.worker_tokens_file = path(kDevWorkerTokens);
    t.worker_token_dir = tls_dir;
  }
  return t;
}

TransportSecurityFiles WorkerTransport(const LocalTransport& transport,
                                       int worker) {
  TransportSecurityFiles files = transport.worker;
  if (!transport.worker_token_dir.empty()) {
    files.auth_token_file = absl::StrCat(transport.worker_token_dir, "/",
                                         kDevWorkerTokenPrefix, worker);
  }
  return files;
}

namespace {

// OK when every worker of [0, `workers`) has its token file, or there are
// no per-worker tokens; else INVALID_ARGUMENT naming the missing file and
// the scripts/dev-certs.sh command that writes enough of them.
absl::Status CheckWorkerTokens(const LocalTransport& transport, int workers) {
  if (transport.worker_token_dir.empty()) return absl::OkStatus();
  for (int worker = 0; worker < workers; ++worker) {
    const std::string file = WorkerTransport(transport, worker).auth_token_file;
    if (!std::filesystem::exists(file)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-dir: ", file, " is missing: the directory holds per-worker ",
          "tokens for fewer than ", workers,
          " workers; write them with scripts/dev-certs.sh --workers ", workers,
          " ", transport.worker_token_dir));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TransportSecurity> LoadLocalTransport(
    const LocalTransport& transport, int workers) {
  if (absl::Status s = CheckWorkerTokens(transport, workers); !s.ok()) {
    return s;
  }
  absl::Status shard =
      ValidateTransportSecurity(transport.shard, TransportRole::kServer);
  absl::StatusOr<TransportSecurity> worker =
      LoadTransportSecurity(transport.worker, TransportRole::kClient);
  const absl::Status first = !shard.ok() ? shard : worker.status();
  if (first.ok()) return worker;
  if (transport.shard.tls_cert.empty()) {
    if (!absl::StrContains(first.message(), "--allow-insecure-token")) {
      return first;
    }
    // The flags the refusal names are the shards'; here TLS is --tls-dir.
    return absl::InvalidArgumentError(
        absl::StrCat(first.message(),
                     " (TLS here: --tls-dir=DIR from scripts/dev-certs.sh "
                     "DIR)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(first.message(),
                   " (--tls-dir needs the files of scripts/dev-certs.sh DIR)"));
}

std::vector<std::string> TransportFlags(const TransportSecurityFiles& files) {
  std::vector<std::string> flags;
  const auto add = [&flags](const char* name, const std::string& value) {
    if (!value.empty()) flags.push_back(absl::StrCat("--", name, "=", value));
  };
  add("tls-cert", files.tls_cert);
  add("tls-key", files.tls_key);
  add("tls-ca", files.tls_ca);
  if (files.tls_require_client_cert) {
    flags.push_back("--tls-require-client-cert");
  }
  add("tls-server-name", files.tls_server_name);
  add("auth-token-file", files.auth_token_file);
  add("worker-tokens-file", files.worker_tokens_file);
  if (files.allow_insecure_token) flags.push_back("--allow-insecure-token");
  return flags;
}

}  // namespace gradwire::cli
