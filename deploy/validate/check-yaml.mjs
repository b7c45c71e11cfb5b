// Parses Grafana provisioning files: each must be YAML with `apiVersion: 1`
// and a non-empty `datasources` or `providers` list.
//
//   node check-yaml.mjs FILE...
import { readFileSync } from "node:fs";
import { parseDocument } from "yaml";

let failed = false;
for (const file of process.argv.slice(2)) {
  const doc = parseDocument(readFileSync(file, "utf8"));
  const value = doc.errors.length ? null : doc.toJS();
  const problem = doc.errors.length
    ? doc.errors.map((e) => e.message).join("; ")
    : value?.apiVersion !== 1
      ? "apiVersion is not 1"
      : !(value.datasources?.length || value.providers?.length)
        ? "no datasources or providers"
        : null;
  if (problem) {
    failed = true;
    console.error(`check-yaml: ${file}: ${problem}`);
  } else {
    console.log(`check-yaml: ${file}: ok`);
  }
}
process.exit(failed ? 1 : 0);
