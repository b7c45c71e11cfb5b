# shellcheck shell=bash
# Sourced by scripts/check-deploy.sh, which runs it from the repository root
# and defines OUT, TLS_DIR, BUILD and DRY_RUN_FLAG (see there).
# The kustomize and k8s-schema checks: every kustomization rendered
# into $OUT (listed in $OUT/renders) and validated.
# Defines: kustomize k8s_schema.

# Renders every kustomization with each kubectl of 1.21 or later (the one
# on PATH first, then Debian's where that is another binary); lists the
# renders in $OUT/renders.
kustomize() {
  local candidates=() kubectls=() dir name kubectl version minor label ok=0
  local path_kubectl
  path_kubectl=$(command -v kubectl || true)
  if [[ -n "$path_kubectl" ]]; then candidates+=("$path_kubectl"); fi
  if [[ -x "$DEBIAN_KUBECTL" && "$(realpath "$DEBIAN_KUBECTL")" != "$(realpath "${path_kubectl:-/}")" ]]; then
    candidates+=("$DEBIAN_KUBECTL")
  fi
  for kubectl in "${candidates[@]}"; do
    version=$("$kubectl" version --client 2>/dev/null |
      sed -n 's/.*GitVersion:"\([^"]*\)".*/\1/p; s/^Client Version: \(v[^ ]*\).*/\1/p' | head -1)
    minor=$(echo "$version" | sed -n 's/^v1\.\([0-9]*\).*/\1/p')
    if [[ -n "$minor" && "$minor" -ge 21 ]]; then
      kubectls+=("$kubectl=$version")
    else
      echo "not used: $kubectl (${version:-no version}): its kustomize predates the fields of deploy/k8s (needs kubectl 1.21 or later)"
    fi
  done
  if [[ ${#kubectls[@]} -eq 0 ]]; then
    echo "no kubectl of 1.21 or later (Debian bookworm's kubernetes-client is 1.20): install a current kubectl to render deploy/k8s" >&2
    return 1
  fi
  : >"$OUT/renders"
  for kubectl in "${kubectls[@]}"; do
    version=${kubectl#*=}
    kubectl=${kubectl%%=*}
    label="kubectl-$version"
    if [[ "$kubectl" == "$DEBIAN_KUBECTL" ]]; then label="debian-$label"; fi
    for dir in deploy/k8s/base deploy/k8s/overlays/*/; do
      dir=${dir%/}
      name="${dir#deploy/k8s/}@$label"
      if "$kubectl" kustomize "$dir" >"$OUT/${name//\//_}.yaml" 2>"$OUT/kustomize.err" &&
        [[ ! -s "$OUT/kustomize.err" ]]; then
        echo "$name=$OUT/${name//\//_}.yaml" >>"$OUT/renders"
        echo "rendered $dir with $kubectl ($version)"
      else
        echo "$dir does not render cleanly with $kubectl ($version):" >&2
        cat "$OUT/kustomize.err" >&2
        ok=1
      fi
    done
  done
  return $ok
}

k8s_schema() {
  [[ -s "$OUT/renders" ]] || { echo "nothing rendered" >&2; return 1; }
  local renders
  mapfile -t renders <"$OUT/renders"
  node deploy/validate/validate-k8s.mjs "${renders[@]}"
}
