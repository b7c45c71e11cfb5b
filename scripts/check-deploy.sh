#!/usr/bin/env bash
# Offline checks of the deployment files (make check-deploy). Nothing is
# built, pulled or started; every check runs on this machine:
#
#   dev-certs    scripts/dev-certs.sh writes a throw-away CA, certificates
#                (the shards', the workers' and the health probes'), the
#                shared token and the per-worker tokens (worker-tokens,
#                worker-token-0, worker-token-1) into a temporary folder, for
#                the TLS defaults.
#   compose      docker-compose.yml (its secrets from the dev-certs folder),
#                and docker-compose.yml merged with the plaintext opt-out
#                docker-compose.plaintext.yml: `docker-compose config -q`
#                (Debian's docker-compose 1.29); warnings count as failures.
#   prometheus   deploy/prometheus/prometheus.yml: `promtool check config`.
#   grafana      deploy/grafana/provisioning/**/*.yml parse as YAML.
#   dashboard    deploy/grafana/dashboards/*.json: every panel has a unique
#                id, a gridPos, targets and the provisioned data source, and
#                every metric name of the queries is registered in the
#                sources; the console templates deploy/prometheus/consoles
#                call only their own library, query only registered metrics,
#                and graph the Grafana timeseries panels, title for title
#                with the same metrics (deploy/validate/check-dashboard.mjs).
#   kustomize    deploy/k8s/base and every deploy/k8s/overlays/* render,
#                without a warning (deprecated fields warn), with every
#                kubectl of 1.21 (kustomize 4) or later found: the one on
#                PATH and Debian's unpacked by scripts/install-deps.sh.
#                Debian bookworm's is 1.20 (kustomize 2.0), too old for
#                `resources` naming a directory and for `patches`: it is
#                named and left out. At least one kubectl must render.
#   k8s-schema   every rendered object validates against the Kubernetes API
#                schema (kubernetes-models; unknown kinds and unknown fields
#                fail) and refers only to objects of its render
#                (deploy/validate/validate-k8s.mjs).
#   services     every gradwire process of the compose configs and of the
#                renders (exec probes and health checks included):
#                its GRADWIRE_* variables and flags exist in the binary,
#                `BINARY --dry-run ARGS` accepts them in exactly the container's
#                environment, and shard/worker counts, ids, addresses, ports,
#                probes and Prometheus targets agree; compose bind mounts name
#                existing files; the TLS files of compose secrets and of
#                the Secret gradwire-tls are the dev-certs ones, so the
#                dry-runs read real certificates; every config and render
#                is mutual TLS with a token (shards, workers, health checks,
#                probes, init containers) and per-worker tokens: every shard
#                has --worker-tokens-file naming workers 0..W-1, every
#                worker (each completion index of a Job) reads its own
#                token, the one that file gives its id, and none reads
#                another worker's or the shards' shared --auth-token-file;
#                all except the plaintext opt-outs
#                (docker-compose.plaintext.yml, deploy/k8s/overlays/
#                plaintext*), which must be plaintext throughout; compose
#                publishes ports on 127.0.0.1 only, and no Service is a
#                NodePort/LoadBalancer (deploy/validate/check-services.mjs).
#   probe-certs  no `gradwire health` of a compose health check or of a
#                render's probes and containers presents the shards'
#                certificate (server.pem, serverAuth only: a shard requiring
#                client certificates refuses it) or the certificate its own
#                container serves as its client certificate, be it named by
#                --tls-cert or taken from the container's GRADWIRE_TLS_CERT;
#                every shard's health check and probes present one (the
#                compose secret's file or the Secret's key is what counts,
#                not the path in the container).
#   images       the COPY sources of deploy/docker/Dockerfile* and
#                deploy/prometheus/Dockerfile exist and the run-time packages
#                (install-deps.sh --runtime) are known to apt.
#   scripts      shellcheck on this script, scripts/install-deps.sh,
#                scripts/dev-certs.sh and the container scripts (make images,
#                make compose-test)
#                (where shellcheck is installed).
#
# Usage: scripts/check-deploy.sh [--no-dry-run]
#   BUILD=DIR (default build): the binaries are DIR/bin.
#   --no-dry-run skips the `--dry-run` runs (and says so); CI does not use it.
# Exit status 0 when every check passes; 1 otherwise, after running them all.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
TOOLS_DIR=${GRADWIRE_TOOLS_DIR:-/opt/gradwire-tools}
DEBIAN_KUBECTL=$TOOLS_DIR/kubernetes-client/usr/bin/kubectl
DRY_RUN_FLAG=()
if [[ "${1:-}" == "--no-dry-run" ]]; then
  DRY_RUN_FLAG=(--no-dry-run)
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--no-dry-run]" >&2
  exit 2
fi

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
passed=0
failed=0

# check NAME FUNCTION: runs FUNCTION, counts and reports it. A function
# returns non-zero on the first problem, after printing what it was.
check() {
  local name=$1 started=$SECONDS
  echo "== check-deploy: $name"
  if "$2"; then
    passed=$((passed + 1))
    echo "check-deploy: ok: $name ($((SECONDS - started)) s)"
  else
    failed=$((failed + 1))
    echo "check-deploy: FAILED: $name" >&2
  fi
}

tools() {
  local tool ok=0
  for tool in docker-compose node npm promtool; do
    if ! command -v "$tool" >/dev/null; then
      echo "$tool not found: run scripts/install-deps.sh" >&2
      ok=1
    fi
  done
  [[ $ok -eq 0 ]] || return 1
  # The validators' packages, exactly as deploy/validate/package-lock.json
  # pins them.
  if ! (cd deploy/validate && npm ci --no-audit --no-fund --loglevel=error >"$OUT/npm.log" 2>&1); then
    echo "npm ci in deploy/validate failed:" >&2
    tail -20 "$OUT/npm.log" >&2
    return 1
  fi
}

# The checks, a group a file (scripts/check-deploy/); each file defines
# the functions that `check` runs below.
# shellcheck source=scripts/check-deploy/compose.sh
source scripts/check-deploy/compose.sh
# shellcheck source=scripts/check-deploy/monitoring.sh
source scripts/check-deploy/monitoring.sh
# shellcheck source=scripts/check-deploy/kubernetes.sh
source scripts/check-deploy/kubernetes.sh
# shellcheck source=scripts/check-deploy/services.sh
source scripts/check-deploy/services.sh
# shellcheck source=scripts/check-deploy/probe-certs.sh
source scripts/check-deploy/probe-certs.sh
# shellcheck source=scripts/check-deploy/images.sh
source scripts/check-deploy/images.sh

start=$SECONDS
check tools tools
if [[ $failed -eq 0 ]]; then
  check dev-certs dev_certs
  check compose compose
  check prometheus prometheus
  check grafana grafana
  check dashboard dashboard
  check kustomize kustomize
  check k8s-schema k8s_schema
  check services services
  check probe-certs probe_certs
fi
check images images
check scripts shell_scripts

if [[ ${#DRY_RUN_FLAG[@]} -gt 0 ]]; then
  echo "check-deploy: the --dry-run runs were SKIPPED (--no-dry-run)"
fi
echo "check-deploy: $((SECONDS - start)) s"
echo "check-deploy: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
