// Checks that every gradwire process that docker-compose.yml and the rendered
// Kubernetes manifests start is one our binaries accept, and that the
// processes of one deployment agree with each other.
//
//   node check-services.mjs --repo DIR --bin-dir DIR --compose [NAME=]FILE...
//        --prometheus FILE [--k8s NAME=FILE]... [--secret NAME=DIR]...
//        [--plaintext NAME]... [--no-dry-run]
//
// Each --compose FILE is `docker-compose config` output (of one file or of a
// file and its overrides); each --k8s FILE is one `kubectl kustomize`
// render. Each --secret names a Kubernetes Secret that the manifests use but
// do not make (it holds credentials): its keys are the files in DIR, as
// `kubectl create secret generic NAME --from-file=DIR` makes them. Files a
// container gets from a compose secret or a Secret volume are run from
// where they lie here (the compose file's `file:`, the --secret folder), so
// `--dry-run` reads real certificates. For each process: its command line and
// environment as the container would have them (the image's ENV and
// ENTRYPOINT from the Dockerfile, then the service's own), every GRADWIRE_*
// variable must name a flag of the binary (the binaries ignore unknown ones),
// and `BINARY --dry-run ARGS` run with that environment (plus PATH and LANG)
// must exit 0, printing (where it prints `--flag=value` lines) the values this
// check expects.
// Then the cluster: shard ids 0..S-1 and --num-shards S, worker ids 0..W-1 and
// --num-workers W, the workers' --shards list naming every shard's address,
// ports matching probes (gRPC probes, or exec probes that run `gradwire
// health`, which are dry-run too), health checks and Prometheus targets.
// Transport: every compose config and render is mutual TLS with a bearer
// token (shards: --tls-cert, --tls-key, --tls-ca,
// --tls-require-client-cert, --auth-token-file; workers, health checks,
// probes and init containers running `gradwire health`: the CA and a client
// pair, workers the token too), and per-worker tokens (every shard has
// --worker-tokens-file naming workers 0..W-1; every worker, for a Job each
// completion index, reads the token that file gives its id, not another
// worker's file nor the shards' shared --auth-token-file), except those
// named with --plaintext, the explicit opt-outs, which must be plaintext
// through and through. Exposure:
// no compose service publishes a port beyond the host's loopback interface
// (or runs in the host's network), no Kubernetes Service is a NodePort or
// LoadBalancer and no pod uses the node's network or ports.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { IMAGES, imageName, imageStage } from "./images.mjs";

const BINARIES = ["gradwire-server", "gradwire-worker", "gradwire"];
const problems = [];
const problem = (origin, message) => problems.push(`${origin}: ${message}`);

const VALUE_OPTIONS = { "--repo": "repo", "--bin-dir": "binDir", "--prometheus": "prometheus" };

// "NAME=FILE" -> [NAME, FILE].
const splitNamed = (arg) => [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)];

function parseArgs(argv) {
  const options = { k8s: [], compose: [], secrets: {}, plaintext: new Set(), dryRun: true };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--no-dry-run") options.dryRun = false;
    else if (argv[i] === "--k8s" && i + 1 < argv.length) options.k8s.push(argv[++i]);
    else if (argv[i] === "--compose" && i + 1 < argv.length) options.compose.push(argv[++i]);
    else if (argv[i] === "--plaintext" && i + 1 < argv.length) options.plaintext.add(argv[++i]);
    else if (argv[i] === "--secret" && argv[i + 1]?.includes("=")) {
      const [name, dir] = splitNamed(argv[++i]);
      options.secrets[name] = dir;
    }
    else if (argv[i] in VALUE_OPTIONS && i + 1 < argv.length) options[VALUE_OPTIONS[argv[i]]] = argv[++i];
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  for (const [flag, key] of Object.entries(VALUE_OPTIONS))
    if (!options[key]) throw new Error(`${flag} is required`);
  if (options.compose.length === 0) throw new Error("--compose is required");
  return options;
}

// Added to the container's environment when a binary runs here.
const baseEnv = () => ({ PATH: process.env.PATH, LANG: "C.UTF-8" });

// Flag name -> default, from `BINARY [SUBCOMMAND] --help`.
const helpCache = new Map();
function flagsOf(binDir, binary, subcommand) {
  const key = `${binary} ${subcommand ?? ""}`;
  if (!helpCache.has(key)) {
    const argv = [...(subcommand ? [subcommand] : []), "--help"];
    const run = spawnSync(path.resolve(binDir, binary), argv, { env: baseEnv(), encoding: "utf8", timeout: 30000 });
    const flags = new Map();
    for (const m of `${run.stdout}`.matchAll(/^\s+--([a-z0-9-]+) \(default: (.*)\)$/gm))
      flags.set(m[1], m[2].replace(/^"(.*)"$/, "$1"));
    if (run.status !== 0 || flags.size === 0)
      throw new Error(`${binary} ${argv.join(" ")} did not list its flags (exit ${run.status}): ${run.stderr ?? run.error}`);
    helpCache.set(key, flags);
  }
  return helpCache.get(key);
}

const envFlag = (variable) => variable.slice("GRADWIRE_".length).toLowerCase().replaceAll("_", "-");

// Flag values as the binary would resolve them: default, then GRADWIRE_*,
// then the command line.
function resolve(invocation, flags) {
  const values = Object.fromEntries(flags);
  for (const [variable, value] of Object.entries(invocation.env)) {
    if (!variable.startsWith("GRADWIRE_")) continue;
    const flag = envFlag(variable);
    if (flags.has(flag)) values[flag] = String(value);
    else if (invocation.envIsItsOwn)
      problem(invocation.origin, `${variable} sets no flag: ${invocation.binary} has no --${flag}`);
  }
  for (const arg of invocation.args) {
    // --name=value, --name (a bool: true) or --noname (a bool: false).
    const m = /^--([a-z0-9_-]+)(?:=(.*))?$/s.exec(arg);
    const name = m?.[1].replaceAll("_", "-");
    if (name && flags.has(name)) values[name] = m[2] ?? "true";
    else if (name?.startsWith("no") && m[2] === undefined && flags.has(name.slice(2))) values[name.slice(2)] = "false";
    else problem(invocation.origin, `${invocation.binary} has no flag ${arg.split("=")[0]}`);
  }
  return values;
}

const sameValue = (a, b) =>
  a === b || (a !== "" && b !== "" && !Number.isNaN(Number(a)) && Number(a) === Number(b));

function dryRun(binDir, invocation) {
  const argv = [...(invocation.subcommand ? [invocation.subcommand] : []), "--dry-run", ...invocation.args];
  const quote = (t) => (/^[\w@%+=:,./-]*$/.test(t) ? t : `'${t.replaceAll("'", "'\\''")}'`);
  const shown = Object.entries(invocation.env).map(([k, v]) => quote(`${k}=${v}`));
  console.log(`check-services: ${invocation.origin}: env ${shown.join(" ")} ${invocation.binary} ${argv.map(quote).join(" ")}`);
  const run = spawnSync(path.resolve(binDir, invocation.binary), argv, {
    env: { ...baseEnv(), ...invocation.env }, encoding: "utf8", timeout: 30000,
  });
  if (run.status !== 0) {
    const output = `${run.stderr ?? ""}${run.stdout ?? ""}`.trim().split("\n").slice(-4).join(" | ");
    problem(invocation.origin, `${invocation.binary} ${argv.join(" ")} exited ${run.status ?? run.signal}: ${output || run.error}`);
    return;
  }
  // Where the binary prints "--flag=value" lines, they must be what this
  // check resolved (its model of flags and environment is the binary's).
  for (const m of `${run.stdout}`.matchAll(/^--([a-z0-9-]+)=(.*)$/gm)) {
    const expected = invocation.flags[m[1]];
    if (m[1] !== "dry-run" && expected !== undefined && !sameValue(expected, m[2]))
      problem(invocation.origin, `--dry-run resolved --${m[1]}=${m[2]}, this check expected ${expected}`);
  }
}

// Files mounted into a container, as [container path, path here, is a
// folder]. A value naming a mounted file (or a file under a mounted folder)
// is replaced by the path here.
function mapPath(value, mounts) {
  for (const [inside, here, folder] of mounts) {
    if (value === inside) return here;
    if (folder && value.startsWith(`${inside}/`)) return path.join(here, value.slice(inside.length + 1));
  }
  return value;
}

// In "--flag=VALUE" only VALUE is a path.
const mapArg = (arg, mounts) => {
  const at = arg.indexOf("=");
  return arg.startsWith("--") && at > 0 ? `${arg.slice(0, at + 1)}${mapPath(arg.slice(at + 1), mounts)}` : mapPath(arg, mounts);
};

const mapEnv = (env, mounts) =>
  Object.fromEntries(Object.entries(env).map(([k, v]) => [k, mapPath(String(v), mounts)]));

// Compose secrets: /run/secrets/TARGET (TARGET defaults to the secret's
// name) holds the top-level secret's `file`.
function composeSecretMounts(origin, service, config) {
  const mounts = [];
  for (const entry of service.secrets ?? []) {
    const source = typeof entry === "string" ? entry : entry.source;
    const target = (typeof entry === "string" ? undefined : entry.target) ?? source;
    const file = config.secrets?.[source]?.file;
    if (!file) { problem(origin, `secret ${source} has no file (not a top-level secret with file:)`); continue; }
    if (!existsSync(file)) problem(origin, `secret ${source} is ${file}, which does not exist`);
    mounts.push([path.posix.isAbsolute(target) ? target : `/run/secrets/${target}`, file, false]);
  }
  return mounts;
}

// The command line of a container: ENTRYPOINT/CMD of its image unless the
// service overrides them.
function commandLine(stage, entrypoint, command) {
  const split = (v) => (typeof v === "string" ? v.trim().split(/\s+/) : v);
  if (entrypoint) return [...split(entrypoint), ...(split(command) ?? [])];
  return [...(stage.entrypoint ?? []), ...(split(command) ?? stage.cmd ?? [])];
}

function composeInvocations(repo, configName, config) {
  const invocations = [];
  for (const [name, service] of Object.entries(config.services ?? {})) {
    const origin = `${configName} ${name}`;
    const environment = Array.isArray(service.environment)
      ? Object.fromEntries(service.environment.map((e) => [e.split("=")[0], e.split("=").slice(1).join("=")]))
      : Object.fromEntries(Object.entries(service.environment ?? {}).filter(([, v]) => v !== null).map(([k, v]) => [k, String(v)]));
    let ref = service.image ? IMAGES[imageName(service.image)] : undefined;
    if (service.build) {
      const context = service.build.context ?? ".";
      const built = {
        dockerfile: path.relative(repo, path.resolve(repo, context, service.build.dockerfile ?? "Dockerfile")),
        target: service.build.target,
      };
      if (ref && (ref.dockerfile !== built.dockerfile || ref.target !== built.target))
        problem(origin, `image ${service.image} is built from ${ref.dockerfile} stage ${ref.target} elsewhere, here from ${built.dockerfile} stage ${built.target}`);
      ref = built;
    }
    if (!ref) {
      if (Object.keys(environment).some((k) => k.startsWith("GRADWIRE_")))
        problem(origin, "sets GRADWIRE_* variables but runs no gradwire image");
      continue;
    }
    const { stage, error } = imageStage(repo, ref);
    if (error) { problem(origin, error); continue; }
    const mounts = composeSecretMounts(origin, service, config);
    const argv = commandLine(stage, service.entrypoint, service.command).map((a) => mapArg(a, mounts));
    const env = mapEnv({ ...stage.env, ...environment }, mounts);
    const binary = path.basename(argv[0] ?? "");
    if (!BINARIES.includes(binary)) {
      // An image of the repository that is not gradwire's (Prometheus's)
      // is no gradwire process, unless it is given gradwire settings.
      if (!service.build || Object.keys(environment).some((k) => k.startsWith("GRADWIRE_")))
        problem(origin, `runs ${argv[0]}, not a gradwire binary`);
      continue;
    }
    invocations.push({ origin, binary, args: argv.slice(1), env, envIsItsOwn: true, compose: { name, service } });
    const test = healthcheckWords(origin, service.healthcheck?.test);
    if (Array.isArray(test) && test[0] === "CMD" && path.basename(test[1] ?? "") === "gradwire") {
      invocations.push({ origin: `${origin} healthcheck`, binary: "gradwire", subcommand: test[2],
                         args: test.slice(3).map((a) => mapArg(a, mounts)), env, envIsItsOwn: false, healthOf: name });
    }
  }
  return invocations;
}

// A compose health check test as ["CMD", words...]. The shell forms (a
// string, or ["CMD-SHELL", string]) count when they are plain words that
// /bin/sh passes on unchanged; anything a shell would interpret is refused.
function healthcheckWords(origin, test) {
  let shell = null;
  if (typeof test === "string") shell = test;
  else if (Array.isArray(test) && test[0] === "CMD-SHELL") shell = String(test[1] ?? "");
  if (shell === null) return test;
  if (/[^A-Za-z0-9_.,:=\/@%+\s-]/.test(shell)) {
    problem(origin, `healthcheck ${JSON.stringify(shell)}: only plain words are checked, no shell syntax`);
    return null;
  }
  return ["CMD", ...shell.trim().split(/\s+/)];
}

const label = (o) => `${o.kind}/${o.metadata?.name}`;

// Values of the downward API that the check stands in for, chosen as the
// largest index the controller will give (or `index`, where given).
function fieldSample(fieldPath, owner, index) {
  if (fieldPath === "metadata.labels['apps.kubernetes.io/pod-index']")
    return owner.kind === "StatefulSet" ? String(index ?? (owner.spec.replicas ?? 1) - 1) : null;
  if (fieldPath === "metadata.annotations['batch.kubernetes.io/job-completion-index']")
    return owner.kind === "Job" && owner.spec.completionMode === "Indexed"
      ? String(index ?? (owner.spec.completions ?? 1) - 1) : null;
  if (fieldPath === "metadata.name") return `${owner.metadata.name}-0`;
  if (fieldPath === "metadata.namespace") return "default";
  return null;
}

// Kubernetes' $(VAR) expansion in command, args and env values.
const expand = (text, env) =>
  String(text).replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (all, name) =>
    all === "$$" ? "$" : name in env ? env[name] : all);

// Secret volumes of a container: the Secret must be in the render or given
// with --secret NAME=DIR, every key a volume's items name must be a file in
// DIR, and the mounted paths map to DIR's files. A subPathExpr is expanded
// with the container's environment `env`.
function secretMounts(origin, spec, container, objects, secrets, env) {
  const mounts = [];
  for (const vm of container.volumeMounts ?? []) {
    const secret = (spec.volumes ?? []).find((v) => v.name === vm.name)?.secret;
    if (!secret) continue;
    const name = secret.secretName;
    if (objects.some((o) => o.kind === "Secret" && o.metadata?.name === name)) continue;
    const dir = secrets[name];
    if (!dir) {
      if (!secret.optional) problem(origin, `volume ${vm.name}: Secret ${name} is neither in the render nor given with --secret`);
      continue;
    }
    const keyFile = (key) => {
      if (!existsSync(path.join(dir, key))) problem(origin, `volume ${vm.name}: Secret ${name} has no key ${key} (no file ${key} in ${dir})`);
      return path.join(dir, key);
    };
    const files = (secret.items ?? []).map((item) => [item.path, keyFile(item.key)]);
    const subPath = vm.subPathExpr !== undefined ? expand(vm.subPathExpr, env) : vm.subPath;
    if (subPath) {
      const item = files.find(([p]) => p === subPath);
      if (!item && secret.items) problem(origin, `volume ${vm.name}: subPath ${subPath} is none of its items`);
      mounts.push([vm.mountPath, item ? item[1] : keyFile(subPath), false]);
    } else if (secret.items) {
      for (const [p, file] of files) mounts.push([path.posix.join(vm.mountPath, p), file, false]);
    } else {
      mounts.push([vm.mountPath, dir, true]);
    }
  }
  return mounts;
}

// `gradwire SUBCOMMAND ...` exec probes of a container.
const PROBES = ["startupProbe", "readinessProbe", "livenessProbe"];
function probeInvocations(origin, container, env, mounts, k8s) {
  const invocations = [];
  for (const probe of PROBES) {
    const command = container[probe]?.exec?.command;
    if (!command || path.basename(command[0] ?? "") !== "gradwire") continue;
    invocations.push({ origin: `${origin} ${probe}`, binary: "gradwire", subcommand: command[1],
                       args: command.slice(2).map((a) => mapArg(a, mounts)), env, envIsItsOwn: false,
                       probe, k8s });
  }
  return invocations;
}

// The environment a container sets itself (envFrom, then env), with the
// downward API's values for the pod of index `index` (default: the
// largest). Problems are reported only when `report`.
function containerEnv(origin, o, c, stage, configMap, report, index) {
  const own = {};
  const say = (message) => { if (report) problem(origin, message); };
  for (const source of c.envFrom ?? []) {
    const data = source.configMapRef ? configMap(source.configMapRef.name) : undefined;
    if (!data) { say(`cannot resolve envFrom ${JSON.stringify(source)}`); continue; }
    for (const [k, v] of Object.entries(data)) own[`${source.prefix ?? ""}${k}`] = String(v);
  }
  for (const e of c.env ?? []) {
    const from = e.valueFrom;
    let value = e.value !== undefined ? expand(e.value, { ...stage.env, ...own }) : undefined;
    if (from?.configMapKeyRef) value = configMap(from.configMapKeyRef.name)?.[from.configMapKeyRef.key];
    if (from?.fieldRef) {
      value = fieldSample(from.fieldRef.fieldPath, o, index);
      if (value === null) say(`env ${e.name}: ${from.fieldRef.fieldPath} has no value in a pod of a ${o.kind}`);
    }
    if (value === undefined || value === null) { say(`env ${e.name}: cannot resolve its value`); continue; }
    own[e.name] = String(value);
  }
  return own;
}

// --auth-token-file of a command line and environment (already mapped to
// paths here): the last flag wins over GRADWIRE_AUTH_TOKEN_FILE.
function authTokenFile(args, env) {
  let file = env.GRADWIRE_AUTH_TOKEN_FILE ?? "";
  for (const arg of args) {
    const m = /^--auth[-_]token[-_]file=(.*)$/s.exec(arg);
    if (m) file = m[1];
  }
  return file;
}

function k8sInvocations(repo, render, objects, secrets) {
  const invocations = [];
  const configMap = (name) => objects.find((o) => o.kind === "ConfigMap" && o.metadata?.name === name)?.data;
  for (const o of objects) {
    const spec = o.spec?.template?.spec;
    if (!spec) continue;
    for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
      const origin = `${render} ${label(o)} container ${c.name}`;
      const ref = IMAGES[imageName(c.image)];
      if (!ref) { problem(origin, `image ${c.image} is none of the gradwire images (${Object.keys(IMAGES).join(", ")})`); continue; }
      const { stage, error } = imageStage(repo, ref);
      if (error) { problem(origin, error); continue; }
      const own = containerEnv(origin, o, c, stage, configMap, true);
      const env = { ...stage.env, ...own };
      const mounts = secretMounts(origin, spec, c, objects, secrets, env);
      const argv = (c.command ? [...c.command, ...(c.args ?? [])] : commandLine(stage, null, c.args))
        .map((a) => mapArg(expand(a, env), mounts));
      const binary = path.basename(argv[0] ?? "");
      if (!BINARIES.includes(binary)) {
        const settings = Object.keys(own).filter((k) => k.startsWith("GRADWIRE_"));
        if (settings.length) problem(origin, `sets ${settings.join(", ")} but runs ${argv[0]}, not a gradwire binary`);
        continue;
      }
      // The file --auth-token-file names, as it lies here, in the pod of
      // index `index` (its downward-API values and subPathExpr mounts).
      const tokenFileAt = (index) => {
        const envAt = { ...stage.env, ...containerEnv(origin, o, c, stage, configMap, false, index) };
        const mountsAt = secretMounts(origin, spec, c, objects, secrets, envAt);
        const argsAt = (c.command ? [...c.command, ...(c.args ?? [])] : commandLine(stage, null, c.args))
          .slice(1).map((arg) => mapArg(expand(arg, envAt), mountsAt));
        return authTokenFile(argsAt, mapEnv(envAt, mountsAt));
      };
      const k8s = { object: o, container: c, tokenFileAt };
      const mappedEnv = mapEnv(env, mounts);
      invocations.push({ origin, binary, args: argv.slice(1), env: mappedEnv, envIsItsOwn: true, k8s });
      invocations.push(...probeInvocations(origin, c, mappedEnv, mounts, k8s));
    }
  }
  return invocations;
}

// Bind mounts of the compose file must name paths that exist.
function composeMountChecks(configName, config) {
  for (const [name, service] of Object.entries(config.services ?? {})) {
    for (const volume of service.volumes ?? []) {
      const source = typeof volume === "string" ? volume.split(":")[0] : volume.type === "bind" ? volume.source : null;
      if (source && path.isAbsolute(source) && !existsSync(source))
        problem(`${configName} ${name}`, `mounts ${source}, which does not exist`);
    }
  }
}

function composeClusterChecks(configName, invocations, config, prometheus) {
  const shards = invocations.filter((i) => i.compose && i.binary === "gradwire-server");
  const workers = invocations.filter((i) => i.compose && i.binary === "gradwire-worker");
  const [S, W] = [shards.length, workers.length];
  const ids = (list, flag) => list.map((i) => Number(i.flags[flag])).sort((a, b) => a - b).join(",");
  const range = (n) => [...Array(n).keys()].join(",");
  if (ids(shards, "shard-id") !== range(S)) problem(configName, `shard ids are ${ids(shards, "shard-id")}, want ${range(S)}`);
  if (ids(workers, "worker-id") !== range(W)) problem(configName, `worker ids are ${ids(workers, "worker-id")}, want ${range(W)}`);
  const byId = [...shards].sort((a, b) => a.flags["shard-id"] - b.flags["shard-id"]);
  const addresses = byId.map((s) => `${s.compose.name}:${s.flags.port}`).join(",");
  for (const s of shards) {
    if (Number(s.flags["num-shards"]) !== S) problem(s.origin, `--num-shards=${s.flags["num-shards"]}, but there are ${S} shards`);
    if (![0, W].includes(Number(s.flags["num-workers"]))) problem(s.origin, `--num-workers=${s.flags["num-workers"]}, but there are ${W} workers`);
    if (s.flags["metrics-port"] !== undefined && !(Number(s.flags["metrics-port"]) > 0)) problem(s.origin, `--metrics-port=${s.flags["metrics-port"]} cannot be scraped`);
  }
  for (const w of workers) {
    if (Number(w.flags["num-workers"]) !== W) problem(w.origin, `--num-workers=${w.flags["num-workers"]}, but there are ${W} workers`);
    if (w.flags.shards !== addresses) problem(w.origin, `--shards=${w.flags.shards}, want ${addresses} (every shard in id order)`);
    if (w.flags["metrics-port"] !== undefined && !(Number(w.flags["metrics-port"]) > 0)) problem(w.origin, `--metrics-port=${w.flags["metrics-port"]} cannot be scraped`);
    for (const s of shards) {
      if (s.flags.mode && s.flags.mode !== w.flags.mode) problem(w.origin, `--mode=${w.flags.mode}, ${s.compose.name} has --mode=${s.flags.mode}`);
      if (w.compose.service.depends_on?.[s.compose.name]?.condition !== "service_healthy")
        problem(w.origin, `does not wait for ${s.compose.name} (depends_on condition: service_healthy)`);
    }
  }
  for (const s of shards) {
    const health = invocations.find((i) => i.healthOf === s.compose.name);
    if (!health) { problem(s.origin, "has no `gradwire health` healthcheck"); continue; }
    const addr = health.flags.addr ?? "";
    if (addr !== `127.0.0.1:${s.flags.port}` && addr !== `localhost:${s.flags.port}`)
      problem(health.origin, `--addr=${addr}, but the shard listens on port ${s.flags.port}`);
  }
  const jobs = Object.fromEntries((prometheus.scrape_configs ?? []).map((j) =>
    [j.job_name, (j.static_configs ?? []).flatMap((c) => c.targets ?? []).sort().join(",")]));
  const targets = (list) => list.map((i) => `${i.compose.name}:${i.flags["metrics-port"]}`).sort().join(",");
  for (const [job, list] of [["gradwire-shard", shards], ["gradwire-worker", workers]]) {
    if (list.some((i) => i.flags["metrics-port"] === undefined)) continue;
    if (jobs[job] !== targets(list))
      problem("prometheus.yml", `job ${job} scrapes ${jobs[job] ?? "nothing"}, want ${targets(list)}`);
  }
}

function portNamed(container, name) {
  return (container.ports ?? []).find((p) => p.name === name)?.containerPort;
}

function k8sClusterChecks(render, invocations, objects) {
  const shards = invocations.filter((i) => i.binary === "gradwire-server");
  const workers = invocations.filter((i) => i.binary === "gradwire-worker");
  for (const i of [...shards, ...workers]) {
    if (i.flags["metrics-port"] === undefined) continue;
    const { object, container } = i.k8s;
    const metrics = Number(i.flags["metrics-port"]);
    if (portNamed(container, "metrics") !== metrics)
      problem(i.origin, `port "metrics" is ${portNamed(container, "metrics")}, --metrics-port=${metrics}`);
    const annotation = object.spec.template.metadata?.annotations?.["prometheus.io/port"];
    if (annotation !== undefined && Number(annotation) !== metrics)
      problem(i.origin, `prometheus.io/port is ${annotation}, --metrics-port=${metrics}`);
  }
  if (shards.length !== 1 || shards[0].k8s.object.kind !== "StatefulSet") {
    problem(render, `want one StatefulSet of shards, found ${shards.map((s) => label(s.k8s.object)).join(", ") || "none"}`);
    return;
  }
  const shard = shards[0];
  const sts = shard.k8s.object;
  const S = sts.spec.replicas ?? 1;
  const port = Number(shard.flags.port);
  if (Number(shard.flags["num-shards"]) !== S) problem(shard.origin, `--num-shards=${shard.flags["num-shards"]}, but replicas is ${S}`);
  if (portNamed(shard.k8s.container, "grpc") !== port) problem(shard.origin, `port "grpc" is ${portNamed(shard.k8s.container, "grpc")}, --port=${port}`);
  for (const probe of PROBES) {
    const p = shard.k8s.container[probe];
    const health = invocations.find((i) => i.probe === probe && i.k8s.container === shard.k8s.container);
    if (p?.grpc) {
      if (p.grpc.port !== port) problem(shard.origin, `${probe} asks port ${p.grpc.port}, --port=${port}`);
    } else if (health?.subcommand === "health") {
      const addr = health.flags.addr ?? "";
      if (addr !== `127.0.0.1:${port}` && addr !== `localhost:${port}`)
        problem(health.origin, `--addr=${addr}, but the shard listens on port ${port}`);
    } else {
      problem(shard.origin, `has no ${probe} (gRPC, or an exec probe running \`gradwire health\`)`);
    }
  }
  const addresses = [...Array(S).keys()].map((k) => `${sts.metadata.name}-${k}.${sts.spec.serviceName}:${port}`).join(",");
  for (const w of workers) {
    const job = w.k8s.object;
    if (job.kind !== "Job" || job.spec.completionMode !== "Indexed") { problem(w.origin, "workers run as an Indexed Job"); continue; }
    const W = job.spec.completions ?? 1;
    if ((job.spec.parallelism ?? 1) !== W) problem(w.origin, `parallelism ${job.spec.parallelism} != completions ${W}: every worker must run at once`);
    if (Number(w.flags["num-workers"]) !== W) problem(w.origin, `--num-workers=${w.flags["num-workers"]}, but completions is ${W}`);
    if (![0, W].includes(Number(shard.flags["num-workers"]))) problem(shard.origin, `--num-workers=${shard.flags["num-workers"]}, but the Job has ${W} workers`);
    if (w.flags.shards !== addresses) problem(w.origin, `--shards=${w.flags.shards}, want ${addresses} (every shard in id order)`);
    if (shard.flags.mode && shard.flags.mode !== w.flags.mode) problem(w.origin, `--mode=${w.flags.mode}, the shards have --mode=${shard.flags.mode}`);
  }
  if (workers.length === 0) problem(render, "no worker Job");
}

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

function transportChecks(name, invocations, plaintext) {
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

function workerTokenChecks(name, invocations, plaintext) {
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
function k8sScriptTransportChecks(name, objects, plaintext) {
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

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|\[::1\]|localhost)$/;

// A compose port as [host address, published port]; the address is "" when
// the port is published on every interface.
function composePort(port) {
  if (typeof port === "object") return [port.host_ip ?? "", String(port.published ?? "")];
  const spec = String(port).replace(/\/\w+$/, "");
  const ipv6 = /^\[([^\]]+)\]:(.*)$/.exec(spec);
  if (ipv6) return [ipv6[1], ipv6[2].split(":")[0]];
  const parts = spec.split(":");
  if (parts.length >= 3) return [parts[0], parts[1]];
  return ["", parts.length === 2 ? parts[0] : "(random)"];
}

function composeExposureChecks(configName, config) {
  for (const [name, service] of Object.entries(config.services ?? {})) {
    const origin = `${configName} ${name}`;
    if (service.network_mode === "host") problem(origin, "runs in the host's network: every port it listens on is public");
    for (const port of service.ports ?? []) {
      const [host, published] = composePort(port);
      if (!LOOPBACK.test(host))
        problem(origin, `publishes port ${published} on ${host || "every host interface (0.0.0.0)"}; publish on 127.0.0.1 only ("127.0.0.1:${published}:PORT")`);
    }
  }
}

function k8sExposureChecks(render, objects) {
  for (const o of objects) {
    if (o.kind === "Service" && ["NodePort", "LoadBalancer"].includes(o.spec?.type))
      problem(`${render} ${label(o)}`, `type ${o.spec.type} publishes it outside the cluster`);
    const spec = o.spec?.template?.spec;
    if (spec?.hostNetwork) problem(`${render} ${label(o)}`, "hostNetwork: its ports are the node's");
    for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])])
      for (const port of c.ports ?? [])
        if (port.hostPort) problem(`${render} ${label(o)} container ${c.name}`, `hostPort ${port.hostPort} publishes it on the node`);
  }
}

function main() {
  const options = parseArgs(process.argv.slice(2));
  const repo = path.resolve(options.repo);
  for (const binary of BINARIES) {
    if (!existsSync(path.join(options.binDir, binary)))
      throw new Error(`${path.join(options.binDir, binary)} is missing: build it first (make build)`);
  }
  const prometheus = parseYaml(readFileSync(options.prometheus, "utf8"));
  const composes = options.compose.map((arg) => {
    const [name, file] = arg.includes("=") ? splitNamed(arg) : ["compose", arg];
    const config = parseYaml(readFileSync(file, "utf8"));
    return { name, config, invocations: composeInvocations(repo, name, config) };
  });
  const renders = options.k8s.map((arg) => {
    const [name, file] = splitNamed(arg);
    const objects = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
    return { name, objects, invocations: k8sInvocations(repo, name, objects, options.secrets) };
  });
  const all = [...composes, ...renders].flatMap((r) => r.invocations);
  for (const i of all) i.flags = resolve(i, flagsOf(options.binDir, i.binary, i.subcommand));
  for (const name of options.plaintext)
    if (![...composes, ...renders].some((r) => r.name === name)) throw new Error(`--plaintext ${name}: no such compose config or render`);
  for (const c of composes) {
    composeMountChecks(c.name, c.config);
    composeClusterChecks(c.name, c.invocations, c.config, prometheus);
    transportChecks(c.name, c.invocations, options.plaintext.has(c.name));
    workerTokenChecks(c.name, c.invocations, options.plaintext.has(c.name));
    composeExposureChecks(c.name, c.config);
  }
  for (const r of renders) {
    k8sClusterChecks(r.name, r.invocations, r.objects);
    transportChecks(r.name, r.invocations, options.plaintext.has(r.name));
    workerTokenChecks(r.name, r.invocations, options.plaintext.has(r.name));
    k8sScriptTransportChecks(r.name, r.objects, options.plaintext.has(r.name));
    k8sExposureChecks(r.name, r.objects);
  }
  const transports = [...composes, ...renders].map((r) => `${r.name}: ${options.plaintext.has(r.name) ? "plaintext (opt-out)" : "TLS + per-worker tokens"}`);
  console.log(`check-services: transport: ${transports.join("; ")}`);
  if (options.dryRun) for (const i of all) dryRun(options.binDir, i);
  else console.log("check-services: --dry-run runs SKIPPED (--no-dry-run)");
  // (A pod's mounts are resolved once per index too: the same problem may
  // be found more than once.)
  for (const p of new Set(problems)) console.error(`check-services: ${p}`);
  if (problems.length === 0)
    console.log(`check-services: ${all.length} gradwire processes (${composes.length} compose configs and ${renders.length} Kubernetes renders) consistent${options.dryRun ? " and accepted by --dry-run" : ""}`);
  return problems.length === 0 ? 0 : 1;
}

try {
  process.exit(main());
} catch (error) {
  console.error(`check-services: ${error.message}`);
  process.exit(1);
}
