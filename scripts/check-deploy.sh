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

prometheus() {
  promtool check config deploy/prometheus/prometheus.yml
}

grafana() {
  local files
  files=$(find deploy/grafana/provisioning -name '*.yml' -o -name '*.yaml' | sort)
  if [[ -z "$files" ]]; then
    echo "no Grafana provisioning files in deploy/grafana/provisioning" >&2
    return 1
  fi
  # shellcheck disable=SC2086 # one file name a word
  node deploy/validate/check-yaml.mjs $files
}

# The metric names of the dashboards' queries must be among the string
# literals of the files that register the families.
METRIC_SOURCES=(worker/worker_metrics.cc server/shard/shard_metrics.cc
  common/metrics/process_metrics.cc)

dashboard() {
  local dashboards datasources file args=()
  dashboards=$(find deploy/grafana/dashboards -name '*.json' | sort)
  datasources=$(find deploy/grafana/provisioning/datasources -name '*.yml' -o -name '*.yaml' | sort)
  if [[ -z "$dashboards" ]]; then
    echo "no dashboards in deploy/grafana/dashboards" >&2
    return 1
  fi
  for file in $datasources; do args+=(--datasources "$file"); done
  for file in "${METRIC_SOURCES[@]}"; do args+=(--source "$file"); done
  # shellcheck disable=SC2086 # one file name a word
  node deploy/validate/check-dashboard.mjs "${args[@]}" \
    --consoles deploy/prometheus/consoles $dashboards
}

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

# The client certificate each `gradwire health` presents, as the file it
# comes from: a compose secret's file, a Secret's key. The shards'
# server.pem is serverAuth only, so a health check presenting it fails
# against a shard that requires client certificates.
probe_certs() {
  [[ -s "$OUT/compose.yml" ]] || { echo "no compose config (see compose)" >&2; return 1; }
  [[ -s "$OUT/renders" ]] || { echo "nothing rendered (see kustomize)" >&2; return 1; }
  local args=(--compose "compose=$OUT/compose.yml"
    --compose "compose-plaintext=$OUT/compose-plaintext.yml") render
  while read -r render; do args+=(--k8s "$render"); done <"$OUT/renders"
  node --input-type=module -e "$PROBE_CERTS_JS" -- "$PWD/deploy/validate/package.json" "${args[@]}"
}

# shellcheck disable=SC2016 # JavaScript, not shell
PROBE_CERTS_JS='
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";
// node -e drops the "--": the arguments start at the package.json.
const argv = process.argv.slice(process.argv.findIndex((a) => a.endsWith("/package.json")));
const YAML = createRequire(argv[0])("yaml");
const problems = [];
let checked = 0;
const words = (value) => (Array.isArray(value) ? value.join(" ") : String(value ?? ""));
const healthText = (text) => /\bgradwire\s+health\b/.test(text);
// The last --tls-cert of a command line ("" when there is none).
function certFlag(text) {
  let cert = null;
  for (const m of text.matchAll(/--tls-cert(?:=|\s+)(["\x27]?)([^\s"\x27]*)\1/g)) cert = m[2];
  return cert;
}
// What a gradwire health presents: its --tls-cert, else GRADWIRE_TLS_CERT.
function presented(text, env) {
  const flag = certFlag(text);
  return flag !== null ? flag : env.GRADWIRE_TLS_CERT ?? "";
}
function judge(origin, what, text, env, source, served, isShard) {
  const cert = presented(text, env);
  if (!cert) {
    if (isShard && env.GRADWIRE_TLS_CERT) problems.push(`${origin}: ${what} presents no client certificate`);
    return;
  }
  checked++;
  const from = source(cert);
  const how = certFlag(text) !== null ? `--tls-cert=${cert}` : `GRADWIRE_TLS_CERT=${cert}`;
  if (path.basename(from) === "server.pem" || (served && from === source(served))) {
    problems.push(`${origin}: ${what} presents ${how} (${from}), the certificate a shard serves, as its client certificate: a shard requiring client certificates refuses it (probes present probe.pem)`);
  } else {
    console.log(`${origin}: ${what} presents ${from}`);
  }
}
for (let i = 1; i < argv.length; i += 2) {
  const [name, file] = [argv[i + 1].slice(0, argv[i + 1].indexOf("=")), argv[i + 1].slice(argv[i + 1].indexOf("=") + 1)];
  if (argv[i] === "--compose") {
    const config = YAML.parse(readFileSync(file, "utf8"));
    for (const [service, s] of Object.entries(config.services ?? {})) {
      const env = Array.isArray(s.environment)
        ? Object.fromEntries(s.environment.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]))
        : { ...(s.environment ?? {}) };
      const secrets = {};
      for (const entry of s.secrets ?? []) {
        const source = typeof entry === "string" ? entry : entry.source;
        const target = (typeof entry === "string" ? null : entry.target) ?? source;
        secrets[target.startsWith("/") ? target : `/run/secrets/${target}`] = config.secrets?.[source]?.file ?? `secret ${source}`;
      }
      const source = (p) => secrets[p] ?? p;
      const isShard = /gradwire-server/.test(s.image ?? "");
      const test = words(s.healthcheck?.test);
      if (healthText(test)) {
        judge(`${name} ${service}`, "health check", test, env, source, isShard ? env.GRADWIRE_TLS_CERT : "", isShard);
      } else if (isShard && s.healthcheck?.disable !== true) {
        problems.push(`${name} ${service}: the shard has no gradwire health check`);
      }
    }
  } else if (argv[i] === "--k8s") {
    const objects = YAML.parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
    const configMaps = Object.fromEntries(objects.filter((o) => o.kind === "ConfigMap").map((o) => [o.metadata.name, o.data ?? {}]));
    for (const o of objects) {
      const spec = o.spec?.template?.spec ?? o.spec?.jobTemplate?.spec?.template?.spec;
      if (!spec) continue;
      for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
        const env = {};
        for (const from of c.envFrom ?? []) Object.assign(env, configMaps[from.configMapRef?.name] ?? {});
        for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
        // A path in the container: the Secret key of the volume item it is.
        const source = (p) => {
          for (const vm of c.volumeMounts ?? []) {
            const secret = (spec.volumes ?? []).find((v) => v.name === vm.name)?.secret;
            if (!secret) continue;
            let rel = null;
            if (vm.subPath || vm.subPathExpr) {
              if (p === vm.mountPath) rel = vm.subPath ?? vm.subPathExpr;
            } else if (p.startsWith(vm.mountPath.replace(/\/$/, "") + "/")) {
              rel = p.slice(vm.mountPath.replace(/\/$/, "").length + 1);
            }
            if (rel === null) continue;
            const item = (secret.items ?? []).find((it) => it.path === rel);
            return `Secret ${secret.secretName} key ${item ? item.key : rel}`;
          }
          return p;
        };
        const served = words([...(c.command ?? []), ...(c.args ?? [])]);
        const isShard = /gradwire-server/.test(c.image ?? "") || /\bgradwire-server\b/.test(served);
        const servedCert = isShard ? certFlag(served) ?? env.GRADWIRE_TLS_CERT ?? "" : "";
        const origin = `${name} ${o.kind}/${o.metadata?.name} container ${c.name}`;
        let probes = 0;
        for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
          const command = c[probe]?.exec?.command;
          if (!command) continue;
          const text = words(command);
          if (!healthText(text)) continue;
          probes++;
          judge(origin, probe, text, env, source, servedCert, isShard);
        }
        const text = words([...(c.command ?? []), ...(c.args ?? [])]);
        if (healthText(text)) judge(origin, "command", text, env, source, servedCert, false);
        if (isShard && env.GRADWIRE_TLS_CERT && probes === 0 &&
            ["startupProbe", "readinessProbe", "livenessProbe"].some((p) => c[p])) {
          problems.push(`${origin}: a TLS shard whose probes run no gradwire health`);
        }
      }
    }
  }
}
for (const p of problems) console.error(p);
if (checked === 0) { console.error("no gradwire health with a client certificate found"); process.exit(1); }
process.exit(problems.length ? 1 : 0);
'

images() {
  local dockerfile source ok=0 role pkg
  for dockerfile in deploy/docker/Dockerfile deploy/docker/Dockerfile.cuda deploy/prometheus/Dockerfile; do
    # COPY SOURCE... DEST from the build context (not --from=STAGE).
    while read -r source; do
      if [[ ! -e "$source" ]]; then
        echo "$dockerfile copies $source, which does not exist" >&2
        ok=1
      fi
    done < <(awk '$1 == "COPY" && $2 !~ /^--from/ { for (i = 2; i < NF; i++) print $i }' "$dockerfile")
  done
  if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
    echo "apt has no package lists (apt-get update): run-time packages not checked"
    return $ok
  fi
  local wanted known
  for role in server worker prometheus; do
    wanted=$(scripts/install-deps.sh --print --runtime "$role" | sort -u)
    # shellcheck disable=SC2086 # one package name a word
    known=$(apt-cache show --no-all-versions $wanted 2>/dev/null |
      sed -n 's/^Package: //p' | sort -u)
    for pkg in $(comm -23 <(echo "$wanted") <(echo "$known")); do
      echo "scripts/install-deps.sh --runtime $role: no package $pkg in apt" >&2
      ok=1
    done
  done
  return $ok
}

shell_scripts() {
  if ! command -v shellcheck >/dev/null; then
    echo "shellcheck not installed: skipped"
    return 0
  fi
  shellcheck scripts/check-deploy.sh scripts/install-deps.sh scripts/dev-certs.sh \
    scripts/container-engine.sh scripts/base-images.sh scripts/images.sh \
    tests/compose/compose-test.sh deploy/docker/check-binaries.sh
}

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
