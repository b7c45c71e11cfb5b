// The gradwire binaries as a container would run them: their flags (from
// --help), the values a process resolves, and `--dry-run` runs.
// Part of check-services.mjs.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { problem } from "./service-problems.mjs";

export const BINARIES = ["gradwire-server", "gradwire-worker", "gradwire"];

// Added to the container's environment when a binary runs here.
const baseEnv = () => ({ PATH: process.env.PATH, LANG: "C.UTF-8" });

// Flag name -> default, from `BINARY [SUBCOMMAND] --help`.
const helpCache = new Map();
export function flagsOf(binDir, binary, subcommand) {
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
export function resolve(invocation, flags) {
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

export function dryRun(binDir, invocation) {
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
