#include "common/tls/transport_security.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/tls/bearer_token.h"

namespace gradwire {
namespace {

constexpr size_t kMaxFlagFileBytes = size_t{1} << 20;

absl::Status Bad(absl::string_view flag, absl::string_view path,
                 absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrFormat("--%s=%s: %s", flag, path, why));
}

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* x509) const { X509_free(x509); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

std::unique_ptr<BIO, BioFree> MemoryBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// A passphrase callback that supplies none: an encrypted key fails to load
// instead of prompting on the terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

// The first certificate of a PEM text; null if there is none.
std::unique_ptr<X509, X509Free> FirstCertificate(const std::string& pem) {
  auto bio = MemoryBio(pem);
  std::unique_ptr<X509, X509Free> certificate(
      PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  return certificate;
}

std::unique_ptr<EVP_PKEY, PkeyFree> PrivateKey(const std::string& pem) {
  auto bio = MemoryBio(pem);
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  return key;
}

// Reads --flag=path into *pem when the path is given.
absl::Status ReadPem(absl::string_view flag, const std::string& path,
                     std::string* pem) {
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> content = ReadFlagFile(flag, path);
  if (!content.ok()) return content.status();
  if (content->empty()) return Bad(flag, path, "the file is empty");
  *pem = *std::move(content);
  return absl::OkStatus();
}

// The certificate, key and CA parse, and the key belongs to the
// certificate.
absl::Status CheckPem(const TransportSecurityFiles& files,
                      const TransportSecurity& s) {
  std::unique_ptr<X509, X509Free> certificate;
  if (!s.cert_pem.empty()) {
    certificate = FirstCertificate(s.cert_pem);
    if (certificate == nullptr) {
      return Bad("tls-cert", files.tls_cert, "holds no PEM certificate");
    }
  }
  if (!s.key_pem.empty()) {
    auto key = PrivateKey(s.key_pem);
    if (key == nullptr) {
      return Bad("tls-key", files.tls_key,
                 "holds no unencrypted PEM private key");
    }
    if (certificate != nullptr &&
        X509_check_private_key(certificate.get(), key.get()) != 1) {
      ERR_clear_error();
      return Bad("tls-key", files.tls_key,
                 absl::StrFormat("is not the key of the certificate in "
                                 "--tls-cert=%s",
                                 files.tls_cert));
    }
  }
  if (!s.ca_pem.empty() && FirstCertificate(s.ca_pem) == nullptr) {
    return Bad("tls-ca", files.tls_ca, "holds no PEM certificate");
  }
  return absl::OkStatus();
}

absl::Status CheckPairs(const TransportSecurityFiles& f) {
  if (!f.tls_cert.empty() && f.tls_key.empty()) {
    return Bad("tls-cert", f.tls_cert, "needs --tls-key (its private key)");
  }
  if (f.tls_cert.empty() && !f.tls_key.empty()) {
    return Bad("tls-key", f.tls_key, "needs --tls-cert (its certificate)");
  }
  return absl::OkStatus();
}

absl::Status CheckServerCombination(const TransportSecurityFiles& f) {
  if (!f.tls_server_name.empty()) {
    return Bad("tls-server-name", f.tls_server_name, "applies to clients only");
  }
  if (!f.tls_ca.empty() && f.tls_cert.empty()) {
    return Bad("tls-ca", f.tls_ca,
               "verifies client certificates, which needs TLS: give "
               "--tls-cert and --tls-key too");
  }
  if (f.tls_require_client_cert && f.tls_ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls-require-client-cert: needs --tls-ca (the CA that signs the "
        "client certificates) and --tls-cert/--tls-key");
  }
  return absl::OkStatus();
}

absl::Status CheckClientCombination(const TransportSecurityFiles& f) {
  if (f.tls_require_client_cert) {
    return absl::InvalidArgumentError(
        "--tls-require-client-cert: applies to servers only");
  }
  if (!f.tls_ca.empty()) return absl::OkStatus();
  if (!f.tls_cert.empty()) {
    return Bad("tls-cert", f.tls_cert,
               "a client certificate needs TLS: give --tls-ca (the CA of "
               "the server's certificate) too");
  }
  if (!f.tls_server_name.empty()) {
    return Bad("tls-server-name", f.tls_server_name,
               "needs TLS: give --tls-ca too");
  }
  return absl::OkStatus();
}

// The token flags in use, e.g. "--auth-token-file=PATH"; empty: no token.
std::string TokenFlags(const TransportSecurityFiles& f) {
  std::string flags;
  if (!f.auth_token_file.empty()) {
    flags = absl::StrCat("--auth-token-file=", f.auth_token_file);
  }
  if (!f.worker_tokens_file.empty()) {
    absl::StrAppend(&flags, flags.empty() ? "" : " and ",
                    "--worker-tokens-file=", f.worker_tokens_file);
  }
  return flags;
}

bool HasTls(const TransportSecurityFiles& f, TransportRole role) {
  return role == TransportRole::kServer ? !f.tls_cert.empty()
                                        : !f.tls_ca.empty();
}

// A token without TLS would cross the network in clear, where anyone on the
// path can read it and then train (or read the weights) in the job's name.
absl::Status CheckTokenNeedsTls(const TransportSecurityFiles& f,
                                TransportRole role) {
  const std::string tokens = TokenFlags(f);
  if (tokens.empty() || HasTls(f, role) || f.allow_insecure_token) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s without TLS: the token would cross the network in clear; give %s "
      "(TLS), or --allow-insecure-token to send it in clear anyway",
      tokens,
      role == TransportRole::kServer ? "--tls-cert and --tls-key"
                                     : "--tls-ca"));
}

}  // namespace

bool TransportSecurity::tls() const {
  return role == TransportRole::kServer ? !cert_pem.empty() : !ca_pem.empty();
}

bool TransportSecurity::mutual_tls() const {
  return role == TransportRole::kServer ? require_client_cert
                                        : tls() && !cert_pem.empty();
}

absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag,
                                         const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    return Bad(flag, path,
               absl::StrFormat("cannot read it (%s)", std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) return Bad(flag, path, "is not a regular file");
  if (static_cast<size_t>(info.st_size) > kMaxFlagFileBytes) {
    return Bad(flag, path, "is larger than 1 MiB");
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"),
                                             &std::fclose);
  if (file == nullptr) {
    return Bad(flag, path,
               absl::StrFormat("cannot read it (%s)", std::strerror(errno)));
  }
  std::string content(kMaxFlagFileBytes + 1, '\0');
  const size_t read = std::fread(content.data(), 1, content.size(), file.get());
  if (std::ferror(file.get()) != 0) return Bad(flag, path, "read error");
  if (read > kMaxFlagFileBytes) return Bad(flag, path, "is larger than 1 MiB");
  content.resize(read);
  return content;
}

namespace {

absl::StatusOr<TransportSecurity> Load(const TransportSecurityFiles& files,
                                       TransportRole role) {
  if (absl::Status s = CheckPairs(files); !s.ok()) return s;
  if (absl::Status s = role == TransportRole::kServer
                           ? CheckServerCombination(files)
                           : CheckClientCombination(files);
      !s.ok()) {
    return s;
  }
  TransportSecurity security;
  security.role = role;
  security.require_client_cert = files.tls_require_client_cert;
  security.server_name = files.tls_server_name;
  for (absl::Status s :
       {ReadPem("tls-cert", files.tls_cert, &security.cert_pem),
        ReadPem("tls-key", files.tls_key, &security.key_pem),
        ReadPem("tls-ca", files.tls_ca, &security.ca_pem)}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = CheckPem(files, security); !s.ok()) return s;
  if (!files.auth_token_file.empty()) {
    absl::StatusOr<std::string> token =
        LoadAuthToken("auth-token-file", files.auth_token_file);
    if (!token.ok()) return token.status();
    security.auth_token = *std::move(token);
  }
  if (absl::Status s = CheckTokenNeedsTls(files, role); !s.ok()) return s;
  return security;
}

}  // namespace

absl::StatusOr<TransportSecurity> LoadTransportSecurity(
    const TransportSecurityFiles& files, TransportRole role) {
  absl::StatusOr<TransportSecurity> security = Load(files, role);
  if (security.ok() && !HasTls(files, role) && !TokenFlags(files).empty()) {
    std::fprintf(stderr,
                 "gradwire: warning: %s without TLS (--allow-insecure-token): "
                 "the token crosses the network in clear\n",
                 TokenFlags(files).c_str());
  }
  return security;
}

absl::Status ValidateTransportSecurity(const TransportSecurityFiles& files,
                                       TransportRole role) {
  return Load(files, role).status();
}

std::string DescribeTransport(const TransportSecurity& s) {
  if (s.role == TransportRole::kServer) {
    if (!s.tls()) {
      return "plaintext (no TLS; anyone who can reach this port can train)";
    }
    if (s.require_client_cert) return "mutual TLS";
    return s.ca_pem.empty() ? "TLS"
                            : "TLS (client certificates verified when "
                              "presented)";
  }
  if (!s.tls()) return "plaintext (no TLS)";
  return s.mutual_tls() ? "mutual TLS" : "TLS";
}

std::string DescribeAuthToken(const TransportSecurity& s) {
  return s.auth_token.empty() ? "off" : "on";
}

}  // namespace gradwire
