// The gradwire processes of a compose config or a Kubernetes render: each
// container's (and probe's and health check's) command line, environment
// and mounts, as they would run here.
// Part of check-services.mjs.
import { existsSync } from "node:fs";
import path from "node:path";
import { IMAGES, imageName, imageStage } from "./images.mjs";
import { BINARIES, resolve } from "./service-binaries.mjs";
import { problem } from "./service-problems.mjs";

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

export function composeInvocations(repo, configName, config) {
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

export const label = (o) => `${o.kind}/${o.metadata?.name}`;

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
export const PROBES = ["startupProbe", "readinessProbe", "livenessProbe"];
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

export function k8sInvocations(repo, render, objects, secrets) {
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
