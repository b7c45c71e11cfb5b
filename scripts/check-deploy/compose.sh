# shellcheck shell=bash
# Sourced by scripts/check-deploy.sh, which runs it from the repository root
# and defines OUT, TLS_DIR, BUILD and DRY_RUN_FLAG (see there).
# The dev-certs and compose checks: the TLS files a user makes
# (scripts/dev-certs.sh) and the compose configs, rendered into $OUT.
# Defines: dev_certs compose.

# The TLS files of docker-compose.yml and deploy/k8s/base, as a user makes
# them.
TLS_DIR=$OUT/tls
TLS_FILES=(ca.pem server.pem server.key client.pem client.key probe.pem
  probe.key auth-token worker-tokens worker-token-0 worker-token-1)

dev_certs() {
  if ! scripts/dev-certs.sh "$TLS_DIR" >"$OUT/dev-certs.log" 2>&1; then
    echo "scripts/dev-certs.sh $TLS_DIR failed:" >&2
    tail -20 "$OUT/dev-certs.log" >&2
    return 1
  fi
  local file ok=0
  for file in "${TLS_FILES[@]}"; do
    if [[ ! -s "$TLS_DIR/$file" ]]; then
      echo "scripts/dev-certs.sh wrote no $file" >&2
      ok=1
    fi
  done
  return $ok
}

# compose_config NAME FILE...: `docker-compose config` of FILE... merged, into
# $OUT/NAME.yml; invalid or warned about: fails.
compose_config() {
  local name=$1 args=() file
  shift
  for file in "$@"; do args+=(-f "$file"); done
  if ! GRADWIRE_TLS_DIR=$TLS_DIR docker-compose "${args[@]}" config -q 2>"$OUT/compose.err"; then
    echo "$* is invalid:" >&2
    cat "$OUT/compose.err" >&2
    return 1
  fi
  if [[ -s "$OUT/compose.err" ]]; then
    echo "$*: docker-compose warned:" >&2
    cat "$OUT/compose.err" >&2
    return 1
  fi
  GRADWIRE_TLS_DIR=$TLS_DIR docker-compose "${args[@]}" config >"$OUT/$name.yml"
  echo "$* ok"
}

compose() {
  local ok=0
  compose_config compose docker-compose.yml || ok=1
  compose_config compose-plaintext docker-compose.yml docker-compose.plaintext.yml || ok=1
  return $ok
}
