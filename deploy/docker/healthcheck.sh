#!/bin/sh
# The server image's built-in health check (Dockerfile HEALTHCHECK): asks
# the shard in this container whether it serves.
#
# The shard's own GRADWIRE_TLS_CERT and GRADWIRE_TLS_KEY are a serving
# certificate (serverAuth only), which a TLS shard refuses as a client's, so
# they are never presented. Where GRADWIRE_PROBE_TLS_CERT and
# GRADWIRE_PROBE_TLS_KEY are set (scripts/dev-certs.sh's probe.pem and
# probe.key), the probe's certificate is, as a shard with
# GRADWIRE_TLS_REQUIRE_CLIENT_CERT needs; otherwise none is. The shard's
# GRADWIRE_TLS_CA verifies the shard too (one CA signs both in
# dev-certs.sh), and the address is 127.0.0.1, which its certificate names.
set -eu
if [ -n "${GRADWIRE_PROBE_TLS_CERT:-}" ]; then
  GRADWIRE_TLS_CERT=$GRADWIRE_PROBE_TLS_CERT
  GRADWIRE_TLS_KEY=${GRADWIRE_PROBE_TLS_KEY:?is not set beside GRADWIRE_PROBE_TLS_CERT}
  export GRADWIRE_TLS_CERT GRADWIRE_TLS_KEY
else
  unset GRADWIRE_TLS_CERT GRADWIRE_TLS_KEY
fi
exec gradwire health --addr="127.0.0.1:${GRADWIRE_PORT:-7000}" --timeout-seconds=3
