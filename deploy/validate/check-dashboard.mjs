// Checks Grafana dashboards (deploy/grafana/dashboards/*.json) against the
// provisioned data sources and the metrics gradwire exports.
//
//   node check-dashboard.mjs --datasources FILE [--datasources FILE...]
//       [--source FILE...] [--metrics FILE...] [--consoles DIR] DASHBOARD...
//
// For each DASHBOARD:
//   - it parses as JSON, with a uid, a title and a panels list;
//   - every panel (rows' nested panels included) has an id unique in the
//     dashboard and a gridPos {x, y, w, h} inside the 24-column grid; every
//     panel but a row has a datasource, at least one target with an expr,
//     and every datasource it or its targets name is a provisioned one
//     (uid and type of a --datasources file's entry; a plain string must be
//     its name); so must the query variables' data sources;
//   - every $variable of an expr is a template variable or a Grafana
//     built-in ($__rate_interval, $__interval, $__range, ...);
//   - every metric name of an expr or of a query variable (a token starting
//     with gradwire_ or process_, string literals aside) is a known metric:
//     a family name, or a histogram family's name with _bucket, _sum or
//     _count.
//
// Known metrics come from either or both of:
//   --source FILE   C++ sources that register the families: every string
//                   literal that is a whole gradwire_.../process_... name.
//                   A literal counts as a histogram when its statement, up to
//                   the literal, mentions Histogram (HistogramChild,
//                   AddHistogramFamily, HistogramSpec): the style of
//                   worker/worker_metrics.cc and server/shard_metrics.cc.
//   --metrics FILE  the text of a /metrics scrape: the `# TYPE` lines give
//                   the families and their types, the samples their names.
//                   A scrape lacks families without series (e.g.
//                   gradwire_shard_checkpoint_age_seconds before the first
//                   checkpoint), so --source is the complete list.
// An unknown name fails, with the panel and the name.
//
// --consoles DIR: the Prometheus console templates of the same panels
// (deploy/prometheus/consoles: DIR/*.html, their library DIR/lib/*.lib).
//   - every template a file calls ({{ template "NAME" }}) is defined in DIR
//     (Prometheus is given no other library);
//   - every metric name in a double-quoted string of a file (the Go template
//     queries and the graphs' JavaScript; PromQL label values are written
//     in single quotes there) is a known metric, as above;
//   - each graph, gwGraph("TITLE", UNITS, [[EXPR, LEGEND], ...]), has a title
//     unique in its page, and the graphs of all pages together are the
//     DASHBOARDs' timeseries panels, title for title, each graph with the
//     same metric names as its panel: the two dashboards stay in step.
//
// Exit status 0 when every dashboard passes; 1 otherwise; 2 for a bad
// command line.
import { readdirSync, readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";

const usage =
  "usage: node check-dashboard.mjs --datasources FILE [--source FILE...] [--metrics FILE...] [--consoles DIR] DASHBOARD...";

const args = { datasources: [], source: [], metrics: [], consoles: [], dashboards: [] };
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const m = /^--(datasources|source|metrics|consoles)(?:=(.*))?$/.exec(argv[i]);
    if (m) {
      const value = m[2] ?? argv[++i];
      if (value === undefined) {
        console.error(usage);
        process.exit(2);
      }
      args[m[1]].push(value);
    } else if (argv[i].startsWith("--")) {
      console.error(`check-dashboard: unknown flag ${argv[i]}\n${usage}`);
      process.exit(2);
    } else {
      args.dashboards.push(argv[i]);
    }
  }
  if (!args.datasources.length || !args.dashboards.length ||
      !(args.source.length || args.metrics.length)) {
    console.error(usage);
    process.exit(2);
  }
}

// name -> {type, from}: the metric families.
const families = new Map();
function addFamily(name, type, from) {
  const known = families.get(name);
  if (!known || known.type === "untyped") families.set(name, { type, from });
}

const NAME = "(?:gradwire|process)_[a-zA-Z0-9_:]*";

for (const file of args.source) {
  const text = readFileSync(file, "utf8");
  const literal = new RegExp(`"(${NAME})"`, "g");
  for (const m of text.matchAll(literal)) {
    // The statement up to the literal: back to the previous ';'.
    const statement = text.slice(text.lastIndexOf(";", m.index) + 1, m.index);
    addFamily(m[1], /Histogram/.test(statement) ? "histogram" : "untyped", file);
  }
}

for (const file of args.metrics) {
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      addFamily(type[1], type[2], file);
    } else if (/^[a-zA-Z_:]/.test(line)) {
      const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)[0];
      // A histogram's or summary's samples belong to its family.
      const base = name.replace(/_(bucket|sum|count)$/, "");
      if (!families.has(name) && !families.has(base)) addFamily(name, "untyped", file);
    }
  }
}

if (!families.size) {
  console.error("check-dashboard: no metric names found in the --source/--metrics files");
  process.exit(1);
}

// A name of an expr: null when known, else why not.
function unknownMetric(name) {
  if (families.has(name)) return null;
  const suffixed = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (suffixed && families.has(suffixed[1])) {
    const { type } = families.get(suffixed[1]);
    if (type === "histogram") return null;
    if (type === "summary" && suffixed[2] !== "bucket") return null;
    return `unknown metric ${name} (${suffixed[1]} is a ${type === "untyped" ? "metric" : type}, not a histogram)`;
  }
  return `unknown metric ${name}`;
}

// The metric names of a PromQL expression: string literals (label values)
// removed first.
function metricNames(expr) {
  const bare = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
  return [...bare.matchAll(new RegExp(`(?<![a-zA-Z0-9_:])${NAME}`, "g"))].map((m) => m[0]);
}

// The provisioned data sources.
const datasources = [];
for (const file of args.datasources) {
  const value = parseYaml(readFileSync(file, "utf8"));
  for (const ds of value?.datasources ?? []) datasources.push({ ...ds, file });
}
if (!datasources.length) {
  console.error(`check-dashboard: no datasources in ${args.datasources.join(", ")}`);
  process.exit(1);
}

// Null when `ds` refers to a provisioned data source, else why not.
function badDatasource(ds) {
  if (ds === undefined || ds === null) return "no datasource";
  if (typeof ds === "string") {
    return datasources.some((d) => d.name === ds)
      ? null
      : `datasource "${ds}" is not the name of a provisioned data source`;
  }
  if (typeof ds !== "object" || !ds.uid) return `datasource ${JSON.stringify(ds)} has no uid`;
  const match = datasources.find((d) => d.uid === ds.uid);
  if (!match) {
    return `datasource uid "${ds.uid}" is not provisioned (provisioned: ${datasources
      .map((d) => d.uid ?? `${d.name} without uid`).join(", ")})`;
  }
  if (ds.type && match.type && ds.type !== match.type) {
    return `datasource uid "${ds.uid}" has type ${ds.type}, provisioned as ${match.type}`;
  }
  return null;
}

const BUILTINS = new Set([
  "__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms",
  "__from", "__to", "__dashboard", "__name", "__org", "__user",
]);

let failed = false;
// title -> {metrics: Set, where}: every timeseries panel of the dashboards.
const timeseriesPanels = new Map();
for (const file of args.dashboards) {
  const problems = [];
  let dashboard;
  try {
    dashboard = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    console.error(`check-dashboard: ${file}: ${e.message}`);
    failed = true;
    continue;
  }
  if (!dashboard.uid) problems.push("no uid");
  if (!dashboard.title) problems.push("no title");
  if (!Array.isArray(dashboard.panels) || !dashboard.panels.length) problems.push("no panels");

  const variables = new Set();
  for (const v of dashboard.templating?.list ?? []) {
    variables.add(v.name);
    if (v.type !== "query") continue;
    const where = `variable ${v.name}`;
    const bad = badDatasource(v.datasource);
    if (bad) problems.push(`${where}: ${bad}`);
    const query = typeof v.query === "string" ? v.query : v.query?.query ?? "";
    for (const name of metricNames(query)) {
      const why = unknownMetric(name);
      if (why) problems.push(`${where}: ${why}`);
    }
  }

  const panels = [];
  for (const panel of dashboard.panels ?? []) {
    panels.push(panel);
    for (const inner of panel.panels ?? []) panels.push(inner);
  }
  const ids = new Map();
  const used = new Set();
  for (const panel of panels) {
    const where = `panel ${panel.id ?? "?"} "${panel.title ?? ""}"`;
    if (!Number.isInteger(panel.id)) {
      problems.push(`${where}: no integer id`);
    } else if (ids.has(panel.id)) {
      problems.push(`${where}: id ${panel.id} also used by "${ids.get(panel.id)}"`);
    } else {
      ids.set(panel.id, panel.title);
    }
    const g = panel.gridPos;
    if (!g || !["x", "y", "w", "h"].every((k) => Number.isInteger(g[k]) && g[k] >= 0)) {
      problems.push(`${where}: gridPos needs integers x, y, w, h`);
    } else if (g.w < 1 || g.h < 1 || g.x + g.w > 24) {
      problems.push(`${where}: gridPos ${JSON.stringify(g)} is outside the 24-column grid`);
    }
    if (panel.type === "row") continue;
    const bad = badDatasource(panel.datasource);
    if (bad) problems.push(`${where}: ${bad}`);
    const targets = (panel.targets ?? []).filter((t) => !t.hide);
    if (!targets.length) problems.push(`${where}: no targets`);
    if (panel.type === "timeseries") {
      const names = new Set(targets.flatMap((t) => metricNames(t.expr ?? "")));
      timeseriesPanels.set(panel.title, { metrics: names, where: `${file}: ${where}` });
    }
    for (const target of targets) {
      const at = `${where} target ${target.refId ?? "?"}`;
      if (target.datasource !== undefined) {
        const badTarget = badDatasource(target.datasource);
        if (badTarget) problems.push(`${at}: ${badTarget}`);
      }
      if (typeof target.expr !== "string" || !target.expr.trim()) {
        problems.push(`${at}: no expr`);
        continue;
      }
      for (const m of target.expr.matchAll(/\$\{?(\w+)/g)) {
        if (!variables.has(m[1]) && !BUILTINS.has(m[1])) {
          problems.push(`${at}: $${m[1]} is not a template variable`);
        }
      }
      for (const name of metricNames(target.expr)) {
        used.add(name);
        const why = unknownMetric(name);
        if (why) problems.push(`${at}: ${why}`);
      }
    }
  }

  if (problems.length) {
    failed = true;
    for (const p of problems) console.error(`check-dashboard: ${file}: ${p}`);
  } else {
    console.log(`check-dashboard: ${file}: ok (${panels.length} panels, ` +
      `${used.size} metric names, all among the ${families.size} known families)`);
  }
}

// The double-quoted strings of a console file ("..." with \" escapes).
function doubleQuoted(text) {
  return [...text.matchAll(/"((?:[^"\\\n]|\\.)*)"/g)].map((m) => m[1]);
}

// The metric names of a console string: its single-quoted PromQL strings
// removed first.
function consoleMetricNames(text) {
  return metricNames(text.replace(/'(?:[^'\\]|\\.)*'/g, "''"));
}

// Checks the console templates in `dir`; returns the problems.
function checkConsoles(dir) {
  const problems = [];
  let pages;
  let libs;
  try {
    pages = readdirSync(dir).filter((f) => f.endsWith(".html")).sort();
    libs = readdirSync(`${dir}/lib`).filter((f) => f.endsWith(".lib")).sort();
  } catch (e) {
    return [`${dir}: ${e.message}`];
  }
  if (!pages.length) problems.push(`${dir}: no *.html console`);
  if (!libs.length) problems.push(`${dir}/lib: no *.lib library`);
  const files = [...pages.map((f) => `${dir}/${f}`), ...libs.map((f) => `${dir}/lib/${f}`)];
  const texts = new Map(files.map((f) => [f, readFileSync(f, "utf8")]));
  const defined = new Set();
  for (const text of texts.values()) {
    for (const m of text.matchAll(/\{\{-?\s*define\s+"([^"]+)"/g)) defined.add(m[1]);
  }
  // title -> graphs of that title, over all pages.
  const graphs = new Map();
  for (const [file, text] of texts) {
    for (const m of text.matchAll(/\{\{-?\s*template\s+"([^"]+)"/g)) {
      if (!defined.has(m[1])) problems.push(`${file}: template "${m[1]}" is not defined in ${dir}`);
    }
    for (const string of doubleQuoted(text)) {
      for (const name of consoleMetricNames(string)) {
        const why = unknownMetric(name);
        if (why) problems.push(`${file}: ${why} in "${string}"`);
      }
    }
    const titles = new Set();
    // gwGraph("TITLE", "UNITS", [ ... ]); the series hold no ");".
    for (const m of text.matchAll(/gwGraph\(\s*"([^"]+)"([\s\S]*?)\);/g)) {
      const title = m[1];
      if (titles.has(title)) problems.push(`${file}: two graphs titled "${title}"`);
      titles.add(title);
      const names = new Set(doubleQuoted(m[2]).flatMap(consoleMetricNames));
      if (!names.size) problems.push(`${file}: graph "${title}" queries no gradwire metric`);
      if (!graphs.has(title)) graphs.set(title, []);
      graphs.get(title).push({ file, names });
    }
  }
  const sorted = (set) => [...set].sort().join(", ");
  for (const [title, found] of graphs) {
    const panel = timeseriesPanels.get(title);
    if (!panel) {
      problems.push(`${found[0].file}: graph "${title}" is no timeseries panel of ${args.dashboards.join(", ")}`);
      continue;
    }
    for (const { file, names } of found) {
      if (sorted(names) !== sorted(panel.metrics)) {
        problems.push(`${file}: graph "${title}" queries ${sorted(names)}; ` +
          `${panel.where} queries ${sorted(panel.metrics)}`);
      }
    }
  }
  for (const [title, panel] of timeseriesPanels) {
    if (!graphs.has(title)) problems.push(`${panel.where}: no console graph in ${dir} has this title`);
  }
  if (!problems.length) {
    console.log(`check-dashboard: ${dir}: ok (${pages.length} consoles, ${graphs.size} graphs, ` +
      `the same as the ${timeseriesPanels.size} timeseries panels)`);
  }
  return problems;
}

for (const dir of args.consoles) {
  const problems = checkConsoles(dir);
  if (problems.length) {
    failed = true;
    for (const p of problems) console.error(`check-dashboard: ${p}`);
  }
}
process.exit(failed ? 1 : 0);
