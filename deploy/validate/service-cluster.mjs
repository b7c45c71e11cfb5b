// The processes of one deployment agree: shard and worker ids and counts,
// addresses, ports, probes, health checks and Prometheus targets; compose
// bind mounts name existing files.
// Part of check-services.mjs.
import { existsSync } from "node:fs";
import path from "node:path";
import { PROBES, label } from "./service-invocations.mjs";
import { problem } from "./service-problems.mjs";

// Bind mounts of the compose file must name paths that exist.
export function composeMountChecks(configName, config) {
  for (const [name, service] of Object.entries(config.services ?? {})) {
    for (const volume of service.volumes ?? []) {
      const source = typeof volume === "string" ? volume.split(":")[0] : volume.type === "bind" ? volume.source : null;
      if (source && path.isAbsolute(source) && !existsSync(source))
        problem(`${configName} ${name}`, `mounts ${source}, which does not exist`);
    }
  }
}

export function composeClusterChecks(configName, invocations, config, prometheus) {
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

export function k8sClusterChecks(render, invocations, objects) {
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
