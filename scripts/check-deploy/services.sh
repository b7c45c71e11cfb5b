# shellcheck shell=bash
# Sourced by scripts/check-deploy.sh, which runs it from the repository root
# and defines OUT, TLS_DIR, BUILD and DRY_RUN_FLAG (see there).
# The services check (deploy/validate/check-services.mjs) over the
# compose configs and the renders.
# Defines: services.

services() {
  local name
  for name in compose compose-plaintext; do
    [[ -s "$OUT/$name.yml" ]] || { echo "no $name config (see compose)" >&2; return 1; }
  done
  # The renders of the first kubectl; those of another kubectl differ only
  # in the ConfigMaps' name suffixes.
  # Plaintext opt-outs are named so (overlays/plaintext*); everything else
  # must be TLS with a token.
  local renders=() render first
  first=$(head -1 "$OUT/renders" | sed 's/^[^@]*@\([^=]*\)=.*/\1/')
  while read -r render; do
    renders+=(--k8s "$render")
    if [[ "$render" == overlays/plaintext* ]]; then renders+=(--plaintext "${render%%=*}"); fi
  done < <(grep -F "@$first=" "$OUT/renders" || true)
  [[ ${#renders[@]} -gt 0 ]] || { echo "no render (see kustomize)" >&2; return 1; }
  node deploy/validate/check-services.mjs --repo . --bin-dir "$BUILD/bin" \
    --compose "compose=$OUT/compose.yml" \
    --compose "compose-plaintext=$OUT/compose-plaintext.yml" --plaintext compose-plaintext \
    --secret "gradwire-tls=$TLS_DIR" --prometheus deploy/prometheus/prometheus.yml \
    "${renders[@]}" "${DRY_RUN_FLAG[@]}"
}
