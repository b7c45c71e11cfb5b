// Exposure: nothing is published beyond the host's loopback interface or
// the cluster.
// Part of check-services.mjs.
import { label } from "./service-invocations.mjs";
import { problem } from "./service-problems.mjs";

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

export function composeExposureChecks(configName, config) {
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

export function k8sExposureChecks(render, objects) {
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
