// uds-lab load: the same requests through each nginx path, one path at a time,
// at a fixed rate, in alternating rounds (tcp, uds, tcp-ka, ..., then again)
// so that drift over time spreads evenly over the paths. Each workload starts
// with a warm-up phase per path that the report leaves out.
//
// Settings from the environment (compose passes them from .env or your shell):
//   MODE      rate (fixed rate) or max (find each path's limit) rate
//   SCENARIO  comma list of workloads (catalogue.json)         ping
//   PATHS     comma list of paths (catalogue.json)            all of them
//   RATE      requests per second in every phase              500
//   DURATION  seconds per measured phase                      20
//   ROUNDS    measured phases per path and workload           3
//   WARMUP    seconds of warm-up per path and workload        5
//   IDLE      seconds with no requests before the first phase 10
//             (the host's background, which the report subtracts; 0: none)
//   CONNECTIONS  virtual users in MODE=max                    64
//   ENDPOINT  app route for SCENARIO=custom (your own app)    /ping
//   CPU_ITERATIONS, SLEEP_MS  parameters of the cpu and sleep workloads
//   TESTID    the run's label in Prometheus and results/      set by `make load`
//   CATALOGUE the paths and workloads                         /catalogue.json
//   RESULTS   where results/<TESTID>/ is                      /results
// Each path is reached at its nginx's URL (catalogue.json, "nginx") + /<path>.
// At the start it says how long the plan runs, and as each phase starts which
// one it is and how long is left. At the end it writes
// RESULTS/<TESTID>/load.json (shape: load.schema.json): the plan (each
// phase's start and length) and k6's own statistics per phase, which `make
// report` reads. loadgen/plan.py is the same plan in Python (the wrk runner's);
// test_k6.py holds the two equal.
import http from 'k6/http';
import exec from 'k6/execution';
import { check } from 'k6';

const CATALOGUE = JSON.parse(open(__ENV.CATALOGUE || '/catalogue.json'));
const KNOWN_PATHS = Object.keys(CATALOGUE.paths);
// Pause between phases: one phase's tail (closing connections, GC) stays out of
// the next (GAP_SECONDS in loadgen/plan.py).
const GAP_SECONDS = 2;

function setting(name, fallback) {
  const v = __ENV[name];
  return v === undefined || v === '' ? String(fallback) : v;
}

function wholeNumber(name, fallback, min) {
  const raw = setting(name, fallback);
  if (!/^[0-9]+$/.test(raw) || Number(raw) < min) {
    throw new Error(`${name}="${raw}": must be a whole number >= ${min}`);
  }
  return Number(raw);
}

function list(name, fallback, known) {
  const items = setting(name, fallback).split(',').map((s) => s.trim()).filter(Boolean);
  if (items.length === 0) throw new Error(`${name}: empty`);
  for (const item of items) {
    if (!known.includes(item)) throw new Error(`${name}: unknown "${item}" (known: ${known.join(', ')})`);
  }
  return items;
}

const CPU_ITERATIONS = wholeNumber('CPU_ITERATIONS', 10000, 1);
const SLEEP_MS = wholeNumber('SLEEP_MS', 10, 0);
const ENDPOINT = setting('ENDPOINT', '/ping');
if (!ENDPOINT.startsWith('/')) throw new Error(`ENDPOINT="${ENDPOINT}": must start with /`);

// The workloads, one app route each, shared with `make max GENERATOR=wrk`.
const PARAMS = { CPU_ITERATIONS, SLEEP_MS, ENDPOINT };
const WORKLOADS = Object.fromEntries(
  Object.entries(CATALOGUE.workloads).map(([name, w]) => [
    name,
    w.route.replace(/\{([A-Z_]+)\}/g, (_, p) => String(PARAMS[p])),
  ]),
);

// rate: fixed arrival rate (RATE), to compare latency and cost at equal load.
// max: CONNECTIONS virtual users sending back to back, to find each path's limit.
const MODE = setting('MODE', 'rate');
if (!['rate', 'max'].includes(MODE)) throw new Error(`MODE="${MODE}": must be rate or max`);
// Where k6 reaches each path: its nginx's URL.
const URLS = Object.fromEntries(
  Object.entries(CATALOGUE.paths).map(([name, p]) => [name, `${CATALOGUE.nginx[p.nginx].url}/${name}`]),
);
const SETTINGS = {
  workloads: list('SCENARIO', 'ping', Object.keys(WORKLOADS)),
  paths: list('PATHS', KNOWN_PATHS.join(','), KNOWN_PATHS),
  mode: MODE,
  generator: 'k6',
  rate: wholeNumber('RATE', 500, 1),
  connections: wholeNumber('CONNECTIONS', 64, 1),
  duration: wholeNumber('DURATION', 20, 1),
  rounds: wholeNumber('ROUNDS', 3, 1),
  warmup: wholeNumber('WARMUP', 5, 0),
  idle: wholeNumber('IDLE', 10, 0),
  cpu_iterations: CPU_ITERATIONS,
  sleep_ms: SLEEP_MS,
  endpoint: ENDPOINT,
};
const TESTID = setting('TESTID', `run-${Date.now()}`);
if (!/^[A-Za-z0-9_.-]+$/.test(TESTID)) throw new Error(`TESTID="${TESTID}": use letters, digits, . _ -`);
const RESULTS = setting('RESULTS', '/results');

// The idle phase (no requests: the host's background, measured by the report),
// or null when IDLE=0 (idle_window in plan.py). It starts the run.
const IDLE_WINDOW = SETTINGS.idle > 0 ? { start_offset_s: 0, duration_s: SETTINGS.idle } : null;

// The plan: every phase in the order it runs, with its offset from the start
// (after the idle phase and a gap, when there is one).
function plan(s) {
  const phases = [];
  let at = s.idle > 0 ? s.idle + GAP_SECONDS : 0;
  const add = (workload, path, round, seconds) => {
    phases.push({
      name: `${workload}__${path}__r${round}`,
      workload,
      path,
      round,
      phase: round === 0 ? 'warmup' : 'measure',
      endpoint: WORKLOADS[workload],
      start_offset_s: at,
      duration_s: seconds,
    });
    at += seconds + GAP_SECONDS;
  };
  for (const w of s.workloads) {
    if (s.warmup > 0) s.paths.forEach((p) => add(w, p, 0, s.warmup));
    for (let r = 1; r <= s.rounds; r++) s.paths.forEach((p) => add(w, p, r, s.duration));
  }
  return phases;
}
const PHASES = plan(SETTINGS);

// How long the plan runs, in the words loadgen/plan.py uses (describe, progress).
const LENGTH_S = PHASES.length === 0 ? 0 : PHASES[PHASES.length - 1].start_offset_s + PHASES[PHASES.length - 1].duration_s;
function clock(seconds) {
  const t = Math.round(seconds);
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const s = t % 60;
  const two = (n) => String(n).padStart(2, '0');
  if (h > 0) return `${h}h${two(m)}m${two(s)}s`;
  return m > 0 ? `${m}m${two(s)}s` : `${s}s`;
}
function describe(s, phases) {
  const warm = s.warmup > 0 ? `${s.warmup} s warm-up + ` : '';
  const idle = s.idle > 0 ? `${s.idle} s idle + ` : '';
  return `${phases.length} phases, about ${clock(LENGTH_S)}: ${idle}${s.workloads.length} workload(s) x `
    + `${s.paths.length} paths x (${warm}${s.rounds} x ${s.duration} s), ${GAP_SECONDS} s between phases`;
}

const scenarios = {};
// k6 computes per-phase statistics only for metrics named in a threshold: the
// "max>=0" ones always pass and exist to get them; the others fail a broken run.
const thresholds = { http_req_failed: ['rate<0.01'] };
PHASES.forEach((ph, i) => {
  const common = {
    startTime: `${ph.start_offset_s}s`,
    exec: 'hit',
    env: {
      LAB_URL: `${URLS[ph.path]}${ph.endpoint}`,
      LAB_NAME: `/${ph.path}${ph.endpoint}`,
      LAB_PROGRESS: `phase ${i + 1}/${PHASES.length} ${ph.name}: about ${clock(LENGTH_S - ph.start_offset_s)} left`,
    },
    tags: { path: ph.path, workload: ph.workload, round: String(ph.round), phase: ph.phase },
  };
  scenarios[ph.name] = MODE === 'max'
    ? { ...common, executor: 'constant-vus', vus: SETTINGS.connections, duration: `${ph.duration_s}s` }
    : {
      ...common,
      executor: 'constant-arrival-rate',
      rate: SETTINGS.rate,
      timeUnit: '1s',
      duration: `${ph.duration_s}s`,
      // Enough VUs for RATE at ~10 ms each; more (up to maxVUs) if the server slows
      // down; k6 counts dropped_iterations when even that is not enough.
      preAllocatedVUs: Math.max(10, Math.ceil(SETTINGS.rate / 100)),
      maxVUs: Math.max(100, Math.ceil(SETTINGS.rate / 10)),
    };
  const sel = `{scenario:${ph.name}}`;
  thresholds[`http_req_duration${sel}`] = ['max>=0'];
  thresholds[`http_reqs${sel}`] = ['count>=0'];
  thresholds[`http_req_failed${sel}`] = ['rate>=0'];
  thresholds[`dropped_iterations${sel}`] = ['count>=0'];
});

export const options = {
  scenarios,
  thresholds,
  tags: { testid: TESTID },
  // k6's own work stays small: bodies are read and dropped, and only the tags
  // the lab uses are kept (fewer series to hold and push; url adds nothing to name).
  discardResponseBodies: true,
  systemTags: ['scenario', 'name', 'method', 'status', 'expected_response', 'check', 'error_code'],
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};

export function setup() {
  console.log(`uds-lab k6 run ${TESTID}: ${describe(SETTINGS, PHASES)}`);
  // Scenario start times count from here.
  return { start_ms: Date.now() };
}

export function hit() {
  // A phase's first iteration says where the run is (one integer compare per request).
  if (exec.scenario.iterationInTest === 0) console.log(__ENV.LAB_PROGRESS);
  // name: one series per path and route, never per URL.
  const res = http.get(__ENV.LAB_URL, { tags: { name: __ENV.LAB_NAME } });
  check(res, { 'status is 200': (r) => r.status === 200 });
}

function fmtMs(v) {
  return v === undefined ? '-' : `${v.toFixed(3)}ms`;
}

// A short table per phase on stdout, and everything in results/<TESTID>/load.json.
export function handleSummary(data) {
  const perPhase = PHASES.map((ph) => {
    const sel = `{scenario:${ph.name}}`;
    const m = (name) => (data.metrics[`${name}${sel}`] || {}).values || {};
    const d = m('http_req_duration');
    return {
      ...ph,
      requests: m('http_reqs').count || 0,
      failed_rate: m('http_req_failed').rate || 0,
      dropped_iterations: m('dropped_iterations').count || 0,
      duration_ms: { avg: d.avg, p50: d.med, p90: d['p(90)'], p95: d['p(95)'], p99: d['p(99)'], max: d.max },
    };
  });
  const load = MODE === 'max' ? `max throughput, ${SETTINGS.connections} VUs` : `${SETTINGS.rate} req/s`;
  const lines = [`uds-lab k6 run ${TESTID}: ${load}, ${SETTINGS.duration}s x ${SETTINGS.rounds} rounds`, ''];
  lines.push(['phase'.padEnd(28), 'requests', 'req/s'.padStart(8), 'failed', 'dropped', 'p50'.padStart(10), 'p99'.padStart(10)].join(' '));
  for (const p of perPhase) {
    lines.push([
      p.name.padEnd(28),
      String(p.requests).padStart(8),
      (p.requests / p.duration_s).toFixed(0).padStart(8),
      `${(p.failed_rate * 100).toFixed(2)}%`.padStart(6),
      String(p.dropped_iterations).padStart(7),
      fmtMs(p.duration_ms.p50).padStart(10),
      fmtMs(p.duration_ms.p99).padStart(10),
    ].join(' '));
  }
  const failedThresholds = Object.entries(data.metrics)
    .filter(([, m]) => m.thresholds && Object.values(m.thresholds).some((t) => !t.ok))
    .map(([name]) => name);
  if (failedThresholds.length > 0) lines.push('', `thresholds failed: ${failedThresholds.join(', ')}`);
  const out = {
    testid: TESTID,
    urls: Object.fromEntries(SETTINGS.paths.map((p) => [p, URLS[p]])),
    start_ms: data.setup_data ? data.setup_data.start_ms : null,
    gap_s: GAP_SECONDS,
    idle: IDLE_WINDOW,
    settings: SETTINGS,
    phases: perPhase,
    totals: {
      requests: ((data.metrics.http_reqs || {}).values || {}).count || 0,
      failed_rate: ((data.metrics.http_req_failed || {}).values || {}).rate || 0,
    },
    thresholds_failed: failedThresholds,
  };
  return {
    stdout: `${lines.join('\n')}\n`,
    [`${RESULTS}/${TESTID}/load.json`]: JSON.stringify(out, null, 2),
  };
}
