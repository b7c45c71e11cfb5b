// The gradwire images: which Dockerfile stage each image name is built from,
// and what a stage sets (ENV, ENTRYPOINT, CMD), read from the Dockerfile
// itself so that the checks run a binary the way its image would.
import { readFileSync } from "node:fs";
import path from "node:path";

// Image name (the last path component, without tag or digest) -> stage.
export const IMAGES = {
  "gradwire-server": { dockerfile: "deploy/docker/Dockerfile", target: "server" },
  "gradwire-worker": { dockerfile: "deploy/docker/Dockerfile", target: "worker" },
  "gradwire-worker-cuda": { dockerfile: "deploy/docker/Dockerfile.cuda", target: "worker" },
};

// "registry:5000/team/gradwire-server:1.0@sha256:..." -> "gradwire-server".
export function imageName(reference) {
  const last = String(reference).split("@")[0].split("/").pop();
  return last.split(":")[0];
}

// Joins continuation lines and drops comments.
function instructions(text) {
  const lines = [];
  let current = "";
  for (const raw of text.split("\n")) {
    if (/^\s*#/.test(raw) && current === "") continue;
    if (raw.endsWith("\\")) {
      current += raw.slice(0, -1) + " ";
      continue;
    }
    current += raw;
    if (current.trim()) lines.push(current.trim());
    current = "";
  }
  return lines;
}

function unquote(value) {
  const m = /^"(.*)"$/.exec(value) ?? /^'(.*)'$/.exec(value);
  return m ? m[1] : value;
}

// ENV KEY=VALUE [KEY=VALUE...] (values without spaces) or ENV KEY VALUE.
function parseEnv(rest) {
  const env = {};
  const tokens = rest.trim().split(/\s+/);
  if (!tokens[0].includes("=")) {
    env[tokens[0]] = unquote(rest.trim().slice(tokens[0].length).trim());
    return env;
  }
  for (const token of tokens) {
    const at = token.indexOf("=");
    if (at <= 0) throw new Error(`cannot read ENV ${rest}`);
    env[token.slice(0, at)] = unquote(token.slice(at + 1));
  }
  return env;
}

// Exec form only: JSON array.
function parseExec(keyword, rest) {
  try {
    const value = JSON.parse(rest);
    if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value;
  } catch {
    // Falls through to the error below.
  }
  throw new Error(`${keyword} must be in exec form (a JSON array): ${rest}`);
}

// Returns { stageName: { env, entrypoint, cmd } }; a stage built
// FROM an earlier stage inherits what that stage set.
export function readDockerfile(repo, dockerfile) {
  const text = readFileSync(path.join(repo, dockerfile), "utf8");
  const stages = {};
  let stage = null;
  for (const line of instructions(text)) {
    const keyword = line.split(/\s+/)[0];
    const rest = line.slice(keyword.length).trim();
    switch (keyword.toUpperCase()) {
      case "FROM": {
        const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest.replace(/--platform=\S+\s+/, ""));
        if (!m) throw new Error(`${dockerfile}: cannot read FROM ${rest}`);
        const parent = stages[m[1]];
        stage = {
          env: { ...(parent?.env ?? {}) },
          entrypoint: parent?.entrypoint ?? null,
          cmd: parent?.cmd ?? null,
        };
        stages[m[2] ?? `#${Object.keys(stages).length}`] = stage;
        break;
      }
      case "ENV":
        Object.assign(stage.env, parseEnv(rest));
        break;
      case "ENTRYPOINT":
        stage.entrypoint = parseExec("ENTRYPOINT", rest);
        stage.cmd = null; // Docker resets CMD when ENTRYPOINT is set.
        break;
      case "CMD":
        stage.cmd = parseExec("CMD", rest);
        break;
      default:
        break;
    }
  }
  return stages;
}

// The stage an image or a compose build runs: { env, entrypoint, cmd } or an
// error message.
export function imageStage(repo, { dockerfile, target }) {
  const stages = readDockerfile(repo, dockerfile);
  const name = target ?? Object.keys(stages).pop(); // no target: the last
  const stage = stages[name];
  if (!stage) return { error: `${dockerfile} has no stage ${name}` };
  return { stage };
}
