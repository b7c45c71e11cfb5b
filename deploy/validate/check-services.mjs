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
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { BINARIES, dryRun, flagsOf, resolve } from "./service-binaries.mjs";
import { composeClusterChecks, composeMountChecks, k8sClusterChecks } from "./service-cluster.mjs";
import { composeExposureChecks, k8sExposureChecks } from "./service-exposure.mjs";
import { composeInvocations, k8sInvocations } from "./service-invocations.mjs";
import { problems } from "./service-problems.mjs";
import { k8sScriptTransportChecks, transportChecks, workerTokenChecks } from "./service-transport.mjs";

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
