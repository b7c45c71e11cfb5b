// Transport security: mutual TLS with a token everywhere (per-worker tokens
// included) or, for an explicit opt-out, nowhere.
// Part of check-services.mjs.
import { readFileSync } from "node:fs";
import path from "node:path";
import { label } from "./service-invocations.mjs";
import { problem } from "./service-problems.mjs";

// Transport security of one deployment: mutual TLS and a token everywhere,
// or (an explicit opt-out) nowhere. A half-secured deployment fails at run
// time (a worker speaking TLS to a plaintext shard), and a secure default
// that silently lost a flag is the regression this guards against.
const TRANSPORT_FLAGS = {
  "gradwire-server": ["tls-cert", "tls-key", "tls-ca", "tls-require-client-cert", "auth-token-file"],
  "gradwire-worker": ["tls-ca", "tls-cert", "tls-key", "auth-token-file"],
  gradwire: ["tls-ca", "tls-cert", "tls-key"], // health: no token needed
};
const flagOn = (flags, flag) => !["", "false", undefined].includes(flags[flag]);

export function transportChecks(name, invocations, plaintext) {
  for (const i of invocations) {
    const wanted = i.binary === "gradwire" && i.subcommand !== "health" ? [] : TRANSPORT_FLAGS[i.binary];
    // Per-worker tokens stand in for the shared one on a shard.
    const on = (flag) => flagOn(i.flags, flag) ||
      (i.binary === "gradwire-server" && flag === "auth-token-file" && flagOn(i.flags, "worker-tokens-file"));
    const off = wanted.filter((flag) => !on(flag));
    const set = wanted.filter((flag) => on(flag));
    if (!plaintext && off.length > 0)
      problem(i.origin, `not TLS with a token: ${off.map((f) => `--${f}`).join(", ")} unset (only an explicit plaintext opt-out, --plaintext ${name}, may leave them out)`);
    if (plaintext && set.length > 0)
      problem(i.origin, `sets ${set.map((f) => `--${f}`).join(", ")}, but ${name} is a plaintext opt-out: it must be plaintext throughout (half TLS does not connect)`);
  }
}

// Per-worker tokens (--worker-tokens-file): with one shared token, whoever
// holds it may Init, push and pull as any worker. Outside the plaintext
// opt-outs every shard must have a worker tokens file naming exactly the
// workers 0..W-1, and every worker must read its own token, the one the
// file gives its id: no file of another worker, nor the shards' shared
// --auth-token-file (by path or by content). A Kubernetes worker
// container stands for all completion indexes: its token file is resolved
// for each of them.
function readTokenFile(origin, flag, file) {
  if (!file) return null;
  try { return readFileSync(file, "utf8"); } catch (error) {
    problem(origin, `--${flag}=${file} cannot be read: ${error.message}`);
    return null;
  }
}

function parseWorkerTokens(origin, file) {
  const content = readTokenFile(origin, "worker-tokens-file", file);
  if (content === null) return null;
  const tokens = new Map();
  for (const line of content.split("\n").map((l) => l.trim())) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^(\d+)\s+(\S+)$/.exec(line);
    if (!m) { problem(origin, `--worker-tokens-file=${file}: malformed line ${JSON.stringify(line)}`); continue; }
    tokens.set(Number(m[1]), m[2]);
  }
  return tokens;
}

export function workerTokenChecks(name, invocations, plaintext) {
  const shards = invocations.filter((i) => i.binary === "gradwire-server");
  const workers = invocations.filter((i) => i.binary === "gradwire-worker");
  if (plaintext) {
    for (const s of shards)
      if (flagOn(s.flags, "worker-tokens-file"))
        problem(s.origin, `sets --worker-tokens-file, but ${name} is a plaintext opt-out`);
    return;
  }
  // [origin, worker id, token file here] of every worker process.
  const callers = [];
  for (const w of workers) {
    const job = w.k8s?.object;
    if (job?.kind === "Job" && job.spec.completionMode === "Indexed") {
      for (let k = 0; k < (job.spec.completions ?? 1); k++)
        callers.push([`${w.origin} (index ${k})`, k, w.k8s.tokenFileAt(k)]);
    } else {
      callers.push([w.origin, Number(w.flags["worker-id"]), w.flags["auth-token-file"] ?? ""]);
    }
  }
  const ids = callers.map(([, id]) => id);
  for (const s of shards) {
    if (!flagOn(s.flags, "worker-tokens-file")) {
      problem(s.origin, "has no --worker-tokens-file: the shared token could act as any worker");
      continue;
    }
    const tokens = parseWorkerTokens(s.origin, s.flags["worker-tokens-file"]);
    if (!tokens) continue;
    const listed = [...tokens.keys()].sort((x, y) => x - y).join(",");
    const want = [...new Set(ids)].sort((x, y) => x - y).join(",");
    if (listed !== want) problem(s.origin, `--worker-tokens-file names workers ${listed}, want ${want}`);
    const sharedFile = s.flags["auth-token-file"] ?? "";
    const shared = flagOn(s.flags, "auth-token-file") ? readTokenFile(s.origin, "auth-token-file", sharedFile)?.trim() : null;
    for (const [origin, id, file] of callers) {
      if (!file) { problem(origin, "has no --auth-token-file of its own"); continue; }
      if (file === sharedFile) { problem(origin, `--auth-token-file is the shards' shared token ${file}`); continue; }
      const token = readTokenFile(origin, "auth-token-file", file)?.trim();
      if (token === undefined || token === null) continue;
      if (shared && token === shared) problem(origin, `its token (${file}) is the shards' shared token`);
      else if (tokens.get(id) !== token) problem(origin, `its token (${file}) is not worker ${id}'s in ${s.flags["worker-tokens-file"]}`);
    }
  }
  const byFile = new Map();
  for (const [origin, id, file] of callers) {
    if (!file) continue;
    const other = byFile.get(file);
    if (other && other[1] !== id) problem(origin, `shares its token file ${file} with ${other[0]}`);
    else byFile.set(file, [origin, id]);
  }
}

// Shell scripts of containers that run `gradwire health` (init containers
// waiting for the shards) are no invocations of their own: their flags are
// checked as text.
export function k8sScriptTransportChecks(name, objects, plaintext) {
  for (const o of objects) {
    const spec = o.spec?.template?.spec;
    for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
      const script = [...(c.command ?? []), ...(c.args ?? [])].join(" ");
      if (path.basename(c.command?.[0] ?? "") === "gradwire" || !/\bgradwire health\b/.test(script)) continue;
      const set = ["--tls-ca=", "--tls-cert=", "--tls-key="].filter((flag) => script.includes(flag));
      if (!plaintext && set.length < 3)
        problem(`${name} ${label(o)} container ${c.name}`, "runs `gradwire health` without --tls-ca, --tls-cert and --tls-key");
      if (plaintext && set.length > 0)
        problem(`${name} ${label(o)} container ${c.name}`, "the plaintext opt-out runs `gradwire health` with TLS flags");
    }
  }
}
