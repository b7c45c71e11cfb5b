// Validates rendered Kubernetes manifests offline.
//
//   node validate-k8s.mjs NAME=FILE...
//
// FILE is multi-document YAML (`kubectl kustomize` output), NAME labels it in
// messages. Every object must be of a kind that kubernetes-models (or a CRD
// package below) knows, validate against that API schema, carry no field the
// schema does not know, and refer only to objects in the same FILE (ConfigMap
// names and keys, Service selectors, StatefulSet serviceName, Job subdomain,
// PodDisruptionBudget, NetworkPolicy and ServiceMonitor selectors).
// Exit status 0 when everything passes, 1 with one line per problem otherwise.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

// Where the models of each API group live; a group not listed is unknown.
const CRD_PACKAGES = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
};

function modelModule(apiVersion) {
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  const pkg = CRD_PACKAGES[group] ?? "kubernetes-models";
  return `${pkg}/${apiVersion}`;
}

async function modelClass(apiVersion, kind) {
  let module;
  try {
    module = await import(modelModule(apiVersion));
  } catch {
    return null;
  }
  const cls = module[kind];
  const known =
    typeof cls === "function" &&
    cls.apiVersion === apiVersion &&
    cls.kind === kind;
  return known ? cls : null;
}

// The schemas accept unknown properties; a typo such as `readinesProbe` would
// pass. The validators read every property their schema declares (present or
// not) and enumerate the keys of maps, so running one over a proxy shows which
// properties of each object it knows. An object of which it read nothing is
// free-form (preserve-unknown-fields) and is not judged.
function unknownFields(cls, object) {
  const reads = new Map(); // path -> Set of names read
  const enumerated = new Set(); // paths whose keys were listed
  const wrap = (value, path) => {
    if (value === null || typeof value !== "object") return value;
    reads.set(path, reads.get(path) ?? new Set());
    return new Proxy(value, {
      get(target, name, receiver) {
        if (typeof name === "string") reads.get(path).add(name);
        const child = Reflect.get(target, name, receiver);
        return typeof name === "string" ? wrap(child, `${path}/${name}`) : child;
      },
      has(target, name) {
        if (typeof name === "string") reads.get(path).add(name);
        return Reflect.has(target, name);
      },
      ownKeys(target) {
        enumerated.add(path);
        return Reflect.ownKeys(target);
      },
    });
  };
  cls.prototype.validate.call(wrap(structuredClone(object), ""));
  const unknown = [];
  const visit = (value, path) => {
    if (value === null || typeof value !== "object") return;
    const read = reads.get(path);
    const judged = !Array.isArray(value) && !enumerated.has(path) && read?.size;
    for (const [name, child] of Object.entries(value)) {
      if (judged && !read.has(name)) unknown.push(`${path}/${name}`);
      else visit(child, `${path}/${name}`);
    }
  };
  visit(object, "");
  return unknown;
}

function parseDocuments(file) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  const problems = [];
  const objects = [];
  for (const doc of docs) {
    for (const error of doc.errors) problems.push(`YAML: ${error.message}`);
    const value = doc.toJS();
    if (value === null || value === undefined) continue; // empty document
    objects.push(value);
  }
  return { objects, problems };
}

const label = (o) => `${o?.kind ?? "?"}/${o?.metadata?.name ?? "?"}`;

function podSpecs(o) {
  if (o.kind === "Pod") return [o.spec];
  if (o.kind === "CronJob") return [o.spec?.jobTemplate?.spec?.template?.spec];
  return o.spec?.template?.spec ? [o.spec.template.spec] : [];
}

function podLabels(objects) {
  return objects
    .filter((o) => podSpecs(o).length > 0)
    .map((o) => ({ owner: label(o), labels: o.spec?.template?.metadata?.labels ?? {} }));
}

const matches = (selector, labels) =>
  Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);

function selects(matchLabels, objects) {
  return podLabels(objects).some((p) => matches(matchLabels, p.labels));
}

// References between objects of one render.
function referenceProblems(objects) {
  const problems = [];
  const named = (kind, name) =>
    objects.find((o) => o.kind === kind && o.metadata?.name === name);
  for (const o of objects) {
    for (const spec of podSpecs(o)) {
      const containers = [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])];
      for (const c of containers) {
        for (const source of c.envFrom ?? []) {
          const name = source.configMapRef?.name;
          if (name && !named("ConfigMap", name) && !source.configMapRef.optional)
            problems.push(`${label(o)}: container ${c.name}: envFrom ConfigMap ${name} is not in the render`);
        }
        for (const env of c.env ?? []) {
          const ref = env.valueFrom?.configMapKeyRef;
          if (!ref || ref.optional) continue;
          const map = named("ConfigMap", ref.name);
          if (!map) problems.push(`${label(o)}: container ${c.name}: env ${env.name}: ConfigMap ${ref.name} is not in the render`);
          else if (!(ref.key in (map.data ?? {})))
            problems.push(`${label(o)}: container ${c.name}: env ${env.name}: ConfigMap ${ref.name} has no key ${ref.key}`);
        }
      }
      for (const volume of spec?.volumes ?? []) {
        const name = volume.configMap?.name;
        if (name && !named("ConfigMap", name)) problems.push(`${label(o)}: volume ${volume.name}: ConfigMap ${name} is not in the render`);
      }
      if (spec?.subdomain) {
        const service = named("Service", spec.subdomain);
        if (!service || service.spec?.clusterIP !== "None")
          problems.push(`${label(o)}: subdomain ${spec.subdomain} is not a headless Service of the render`);
      }
    }
    if (o.kind === "StatefulSet") {
      const service = named("Service", o.spec?.serviceName);
      if (!service || service.spec?.clusterIP !== "None")
        problems.push(`${label(o)}: serviceName ${o.spec?.serviceName} is not a headless Service of the render`);
      if (!matches(o.spec?.selector?.matchLabels, o.spec?.template?.metadata?.labels ?? {}))
        problems.push(`${label(o)}: selector does not match its pod template's labels`);
    }
    if (o.kind === "Service" && o.spec?.selector && !selects(o.spec.selector, objects))
      problems.push(`${label(o)}: selector matches no pod template of the render`);
    if (["PodDisruptionBudget", "NetworkPolicy"].includes(o.kind)) {
      const selector = o.kind === "NetworkPolicy" ? o.spec?.podSelector : o.spec?.selector;
      if (!selects(selector?.matchLabels, objects))
        problems.push(`${label(o)}: selector matches no pod template of the render`);
    }
    if (o.kind === "ServiceMonitor") {
      const services = objects.filter(
        (s) => s.kind === "Service" && matches(o.spec?.selector?.matchLabels, s.metadata?.labels ?? {}));
      if (services.length === 0) problems.push(`${label(o)}: selector matches no Service of the render`);
      for (const endpoint of o.spec?.endpoints ?? []) {
        for (const s of services) {
          if (endpoint.port && !(s.spec?.ports ?? []).some((p) => p.name === endpoint.port))
            problems.push(`${label(o)}: ${label(s)} has no port named ${endpoint.port}`);
        }
      }
    }
  }
  return problems;
}

async function validateFile(name, file) {
  const { objects, problems } = parseDocuments(file);
  if (objects.length === 0) problems.push("no objects");
  for (const o of objects) {
    if (typeof o !== "object" || Array.isArray(o) || !o.apiVersion || !o.kind) {
      problems.push(`a document is not a Kubernetes object (no apiVersion/kind): ${JSON.stringify(o).slice(0, 80)}`);
      continue;
    }
    const cls = await modelClass(o.apiVersion, o.kind);
    if (!cls) {
      problems.push(`${label(o)}: unknown kind ${o.kind} of ${o.apiVersion} (no model in kubernetes-models or the CRD packages of validate-k8s.mjs)`);
      continue;
    }
    try {
      new cls(o).validate();
    } catch (error) {
      problems.push(`${label(o)}: ${error.message}`);
      continue;
    }
    for (const path of unknownFields(cls, o))
      problems.push(`${label(o)}: unknown field ${path}`);
  }
  problems.push(...referenceProblems(objects));
  const kinds = [...new Set(objects.map((o) => o.kind))].sort().join(", ");
  return { problems, summary: `${objects.length} objects (${kinds})` };
}

let failed = false;
const inputs = process.argv.slice(2);
if (inputs.length === 0 || inputs.some((a) => !a.includes("="))) {
  console.error("usage: node validate-k8s.mjs NAME=FILE...");
  process.exit(2);
}
for (const input of inputs) {
  const [name, file] = [input.slice(0, input.indexOf("=")), input.slice(input.indexOf("=") + 1)];
  const { problems, summary } = await validateFile(name, file);
  if (problems.length === 0) {
    console.log(`validate-k8s: ${name}: ${summary} valid`);
  } else {
    failed = true;
    for (const p of problems) console.error(`validate-k8s: ${name}: ${p}`);
  }
}
process.exit(failed ? 1 : 0);
