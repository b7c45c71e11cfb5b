# shellcheck shell=bash
# Sourced by scripts/check-deploy.sh, which runs it from the repository root
# and defines OUT, TLS_DIR, BUILD and DRY_RUN_FLAG (see there).
# The probe-certs check: the client certificate of every `gradwire
# health` in the compose configs and the renders.
# Defines: probe_certs.

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
