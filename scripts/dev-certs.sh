#!/usr/bin/env bash
# Makes throw-away TLS material for gradwire: a CA, a server certificate, a
# client certificate for the workers, one for health probes, a random bearer
# token and one random token per worker, for local runs, tests and trying
# TLS out. Not for production: the CA key lies next to the rest.
#
# Each certificate holds one role (extendedKeyUsage): the shards' serves and
# is refused as a client certificate; the workers' and the probes' are
# presented by clients and refused as a server's. At the TLS layer a shard's
# key thus cannot pose as a client, nor a worker's key as a shard.
#
# Usage: scripts/dev-certs.sh OUT_DIR [--days N] [--hosts "h1,h2,..."]
#                             [--workers N] [--expired]
#   OUT_DIR      created if missing; existing files in it are replaced
#                (worker-token-I files beyond --workers are removed).
#   --days N     validity of the certificates (default 365).
#   --hosts      names and IP addresses the server certificate is valid for
#                (subjectAltName). Default: localhost, 127.0.0.1, ::1, the
#                docker-compose shards (shard-0, shard-1) and the Kubernetes
#                shards (gradwire-shard-I.gradwire-shard and their
#                cluster-local names, I = 0..3).
#   --workers N  how many per-worker tokens (default 2: docker-compose.yml's
#                and deploy/k8s/base's worker count).
#   --expired    every certificate but the CA's expired yesterday: for
#                tests that a client refuses them.
#
# Writes (keys and tokens mode 0600, certificates 0644):
#   ca.pem, ca.key           the CA
#   server.pem, server.key   the shards' certificate (serverAuth only)
#   client.pem, client.key   the workers' client certificate (clientAuth)
#   probe.pem, probe.key     the client certificate a health probe in a
#                            shard's container presents (clientAuth), so
#                            that shards hold no worker's key
#   auth-token               64 random hex digits and a newline: the job's
#                            shared token (with worker tokens on the shards
#                            it only reads GetInfo)
#   worker-tokens            the shards' --worker-tokens-file: "I TOKEN"
#                            lines, I = 0..N-1
#   worker-token-I           worker I's own token (its line of worker-tokens)
#
# Use: gradwire-server --tls-cert=DIR/server.pem --tls-key=DIR/server.key
#        --tls-ca=DIR/ca.pem --tls-require-client-cert
#        --auth-token-file=DIR/auth-token
#        --worker-tokens-file=DIR/worker-tokens
#      gradwire-worker --worker-id=I --tls-ca=DIR/ca.pem
#        --tls-cert=DIR/client.pem --tls-key=DIR/client.key
#        --auth-token-file=DIR/worker-token-I
#      gradwire local --tls-dir=DIR
# Needs openssl (Debian's openssl 3; scripts/install-deps.sh installs it).
set -euo pipefail

usage() {
  sed -n '12,25p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

out=""
days=365
workers=2
expired=false
hosts="localhost,127.0.0.1,::1,shard-0,shard-1"
for i in 0 1 2 3; do
  hosts+=",gradwire-shard-$i.gradwire-shard"
  hosts+=",gradwire-shard-$i.gradwire-shard.default.svc.cluster.local"
done
while [[ $# -gt 0 ]]; do
  case "$1" in
    --days) [[ $# -ge 2 ]] || usage; days=$2; shift ;;
    --days=*) days=${1#--days=} ;;
    --hosts) [[ $# -ge 2 ]] || usage; hosts=$2; shift ;;
    --hosts=*) hosts=${1#--hosts=} ;;
    --workers) [[ $# -ge 2 ]] || usage; workers=$2; shift ;;
    --workers=*) workers=${1#--workers=} ;;
    --expired) expired=true ;;
    -h | --help) usage ;;
    -*) echo "dev-certs.sh: unknown option $1" >&2; usage ;;
    *)
      [[ -z "$out" ]] || { echo "dev-certs.sh: two output directories" >&2; usage; }
      out=$1
      ;;
  esac
  shift
done
[[ -n "$out" ]] || usage
if ! [[ "$days" =~ ^[0-9]+$ ]] || ((days < 1)); then
  echo "dev-certs.sh: --days=$days: must be a whole number >= 1" >&2
  exit 2
fi
if ! [[ "$workers" =~ ^[0-9]+$ ]] || ((workers < 1)); then
  echo "dev-certs.sh: --workers=$workers: must be a whole number >= 1" >&2
  exit 2
fi
command -v openssl >/dev/null || {
  echo "dev-certs.sh: openssl is missing (scripts/install-deps.sh installs it)" >&2
  exit 1
}

# subjectAltName entries: IP for addresses, DNS for names.
san_lines() {
  local dns=0 ip=0 host
  IFS=',' read -r -a list <<<"$1"
  for host in "${list[@]}"; do
    host=${host// /}
    [[ -n "$host" ]] || continue
    if [[ "$host" =~ ^[0-9.]+$ || "$host" == *:* ]]; then
      echo "IP.$((ip += 1)) = $host"
    else
      echo "DNS.$((dns += 1)) = $host"
    fi
  done
}

mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umask 077

sans=$(san_lines "$hosts")
[[ -n "$sans" ]] || { echo "dev-certs.sh: --hosts names no host" >&2; exit 2; }
mkdir "$work/new"
: >"$work/index.txt"
cat >"$work/ca.cnf" <<CNF
[ ca ]
default_ca = dev
[ dev ]
database = $work/index.txt
new_certs_dir = $work/new
rand_serial = yes
default_md = sha256
policy = any_name
unique_subject = no
copy_extensions = none
[ any_name ]
commonName = supplied
[ req ]
distinguished_name = req_name
prompt = no
[ req_name ]
CN = unused
[ ca_ext ]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[ server_ext ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = @server_names
authorityKeyIdentifier = keyid
[ client_ext ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
[ server_names ]
$sans
CNF

new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

new_key "$work/ca.key"
openssl req -new -x509 -config "$work/ca.cnf" -key "$work/ca.key" \
  -subj "/CN=gradwire dev CA $(date -u +%Y%m%dT%H%M%S)-$$" -days "$days" \
  -extensions ca_ext -out "$work/ca.pem"

# Validity of the leaf certificates: `openssl ca` takes explicit dates, which
# (unlike `openssl x509 -days`) may lie in the past.
if $expired; then
  validity=(-startdate "$(date -u -d '-2 days' +%y%m%d%H%M%SZ)"
            -enddate "$(date -u -d '-1 day' +%y%m%d%H%M%SZ)")
else
  validity=(-days "$days")
fi

sign() {  # name common-name extension-section
  new_key "$work/$1.key"
  openssl req -new -config "$work/ca.cnf" -key "$work/$1.key" \
    -subj "/CN=$2" -out "$work/$1.csr"
  openssl ca -batch -config "$work/ca.cnf" -cert "$work/ca.pem" \
    -keyfile "$work/ca.key" -in "$work/$1.csr" -out "$work/$1.pem" \
    -extensions "$3" -notext "${validity[@]}" 2>/dev/null
}
sign server "gradwire shard" server_ext
sign client "gradwire worker" client_ext
sign probe "gradwire health probe" client_ext
openssl rand -hex 32 >"$work/auth-token"
# Per-worker tokens: 64 hex digits each, so none can equal another (nor the
# shared token) but by a 2^-256 chance.
secret_files=(ca.key server.key client.key probe.key auth-token worker-tokens)
: >"$work/worker-tokens"
for ((i = 0; i < workers; i++)); do
  token=$(openssl rand -hex 32)
  echo "$token" >"$work/worker-token-$i"
  echo "$i $token" >>"$work/worker-tokens"
  secret_files+=("worker-token-$i")
done

for f in ca.pem server.pem client.pem probe.pem; do
  install -m 0644 "$work/$f" "$out/$f"
done
for f in "${secret_files[@]}"; do
  install -m 0600 "$work/$f" "$out/$f"
done
# Tokens of workers a previous, larger run made would no longer be valid.
for f in "$out"/worker-token-*; do
  [[ -e "$f" ]] || continue
  i=${f##*/worker-token-}
  if ! [[ "$i" =~ ^[0-9]+$ ]] || ((i >= workers)); then rm -f "$f"; fi
done
echo "dev-certs.sh: wrote ca.pem, server.pem/.key, client.pem/.key, probe.pem/.key, auth-token, worker-tokens and worker-token-0..$((workers - 1)) to $out$($expired && echo ' (leaf certificates expired)')"
