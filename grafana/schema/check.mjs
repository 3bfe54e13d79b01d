// Checks every grafana/dashboards/*.json against Grafana's own types for the
// classic dashboard model (@grafana/schema, raw/dashboard/x), which Grafana 13
// file provisioning reads: each dashboard becomes an object literal of that
// type, and the TypeScript compiler refuses a field the type does not have
// (a misspelt one, which Grafana would silently ignore) or a value of the
// wrong kind. Every field is optional here (Grafana fills in defaults).
//
//   npm ci && node check.mjs        (tests/static runs it; exit 1 on a finding)
//
// The fields Grafana reads that the published types do not list are allowed,
// each for a reason (ALLOWED below).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = path.dirname(fileURLToPath(import.meta.url));
const dashboards = path.join(here, "..", "dashboards");
const build = path.join(here, ".build");

// [where, field]: removed before the check.
const ALLOWED = [
  // The Prometheus datasource's annotation query: Grafana's Prometheus plugin
  // reads these (and moves them into target, which the types give only the
  // built-in datasource's shape).
  ...["expr", "step", "titleFormat", "tagKeys", "textFormat", "useValueForTime"].map((f) => ["annotations.list[]", f]),
  // The query variable's text, as Grafana's own editor writes it.
  ["templating.list[]", "definition"],
];

function strip(dashboard) {
  for (const [where, field] of ALLOWED) {
    const [list] = where.split("[]");
    const items = list.split(".").reduce((o, k) => (o || {})[k], dashboard) || [];
    for (const item of items) delete item[field];
  }
  return dashboard;
}

const typed = `import type { Dashboard } from "@grafana/schema/dist/types/raw/dashboard/x/types.gen";
// Every field optional; an enum's values as the JSON writes them.
type Loose<T> = T extends string ? \`\${T}\` : T extends number ? number : T extends Array<infer U> ? Array<Loose<U>>
  : T extends object ? { [K in keyof T]?: Loose<T[K]> } : T;
export const dashboard: Loose<Dashboard> = `;

fs.rmSync(build, { recursive: true, force: true });
fs.mkdirSync(build);
const files = fs.readdirSync(dashboards).filter((f) => f.endsWith(".json")).sort();
if (files.length === 0) {
  console.error(`no dashboards in ${dashboards}`);
  process.exit(1);
}
const sources = files.map((f) => {
  const out = path.join(build, f.replace(/\.json$/, ".ts"));
  const json = strip(JSON.parse(fs.readFileSync(path.join(dashboards, f), "utf8")));
  fs.writeFileSync(out, `${typed}${JSON.stringify(json, null, 2)};\n`);
  return out;
});
const program = ts.createProgram(sources, {
  noEmit: true, strict: true, skipLibCheck: true, target: ts.ScriptTarget.ES2020,
  moduleResolution: ts.ModuleResolutionKind.Node10, module: ts.ModuleKind.ESNext,
});
const found = ts.getPreEmitDiagnostics(program);
for (const d of found) {
  const where = d.file ? `${path.basename(d.file.fileName).replace(/\.ts$/, ".json")} (line ${d.file.getLineAndCharacterOfPosition(d.start).line + 1} of the checked copy)` : "";
  console.error(`${where}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`);
}
fs.rmSync(build, { recursive: true, force: true });
if (found.length > 0) process.exit(1);
console.log(`${files.length} dashboards match Grafana's dashboard types (@grafana/schema ${JSON.parse(fs.readFileSync(path.join(here, "node_modules", "@grafana", "schema", "package.json"), "utf8")).version})`);
