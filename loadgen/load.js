// uds-lab load: runs the plan loadgen/plan.py wrote (results/<TESTID>/plan.json;
// `make load` and `make max` write it first): the same requests through each
// nginx path, one path at a time, in rounds whose order of paths changes from
// round to round, after a warm-up phase per path that the report leaves out.
// The plan holds every setting (MODE, RATE, CONNECTIONS, ...: plan.py says
// which and checks them), each phase's start, length, URL and progress line,
// and the line that says how long the run takes.
//
// From the environment: PLAN (the plan.json to run), and K6_* for k6 itself.
// At the end it writes load.json beside the plan (load-r<N>.json beside
// plan-r<N>.json, a later batch of a PRECISION run; shape: load.schema.json): the
// plan and k6's own statistics per phase, which `make report` reads.
import http from 'k6/http';
import exec from 'k6/execution';
import { check } from 'k6';

if (!__ENV.PLAN) throw new Error('PLAN: the plan.json to run (make load writes it with loadgen/plan.py)');
const PLAN = JSON.parse(open(__ENV.PLAN));
const SETTINGS = PLAN.settings;
const TESTID = PLAN.testid;
const PHASES = PLAN.phases;
const MODE = SETTINGS.mode;

const scenarios = {};
const MAX_VUS = 300;
// k6 computes per-phase statistics only for metrics named in a threshold: the
// "max>=0" ones always pass and exist to get them; the others fail a broken run.
const thresholds = { http_req_failed: ['rate<0.01'] };
// A sweep and a max run count what says how a path fails past its limit:
// nginx's 502, 503 and 504, no response at all (status 0), and of those k6's
// error codes for a refused connection (1212), a reset (1220), a request
// (1050) or a connect (1211) timed out.
const FAILING = MODE === 'sweep' || MODE === 'max'
  ? [['502', 'status:502'], ['503', 'status:503'], ['504', 'status:504'], ['0', 'status:0'],
    ['refused', 'error_code:1212'], ['reset', 'error_code:1220'], ['timeout', 'error_code:1050'],
    ['connect_timeout', 'error_code:1211']]
  : [];
// make load's interleaved phase (path "mix"): one arrival stream whose
// requests go to every path in a balanced random order, each tagged with its
// path and, measured, with its block of block_s seconds (from the phase's
// start): the report pairs the paths' medians block by block.
const MIX = 'mix';
const blocksOf = (ph) => Math.round(ph.duration_s / ph.block_s);
PHASES.forEach((ph) => {
  // A sweep's phase holds its step's rate; make load's every phase RATE.
  const rate = ph.rate || SETTINGS.rate;
  const mix = ph.path === MIX;
  const common = {
    startTime: `${ph.start_offset_s}s`,
    exec: mix ? 'mixed' : 'hit',
    env: {
      ...(mix ? {
        LAB_PATHS: JSON.stringify(ph.paths.map((p) => [p, ph.urls[p], `/${p}${ph.endpoint}`])),
        LAB_BLOCK_MS: String(ph.round > 0 ? ph.block_s * 1000 : 0),
        LAB_BLOCKS: String(blocksOf(ph)),
      } : { LAB_URL: ph.url, LAB_NAME: `/${ph.path}${ph.endpoint}` }),
      LAB_PROGRESS: ph.progress,
    },
    tags: {
      path: ph.path, workload: ph.workload, round: String(ph.round), phase: ph.phase,
      // A sweep's step and its level (the rate, or the connections): the paths dashboard's sweep row.
      ...(ph.step ? { step: String(ph.step), level: String(ph.rate || ph.connections) } : {}),
    },
  };
  // Flat out: make max, and a sweep of connections (each step's phases carry theirs).
  scenarios[ph.name] = MODE === 'max' || ph.connections
    ? { ...common, executor: 'constant-vus', vus: ph.connections || SETTINGS.connections, duration: `${ph.duration_s}s` }
    : {
      ...common,
      executor: 'constant-arrival-rate',
      rate,
      timeUnit: '1s',
      duration: `${ph.duration_s}s`,
      // Enough VUs for the rate at ~10 ms each; more (up to maxVUs) if the server slows
      // down; k6 counts dropped_iterations when even that is not enough. At most
      // MAX_VUS: a VU is a JavaScript runtime of a few MB (500 filled LOADGEN_MEMORY's 2 GiB).
      preAllocatedVUs: Math.min(MAX_VUS, Math.max(10, Math.ceil(rate / 100))),
      maxVUs: Math.min(MAX_VUS, Math.max(100, Math.ceil(rate / 10))),
    };
  const sel = `{scenario:${ph.name}}`;
  thresholds[`http_req_duration${sel}`] = ['max>=0'];
  thresholds[`http_reqs${sel}`] = ['count>=0'];
  thresholds[`http_req_failed${sel}`] = ['rate>=0'];
  thresholds[`dropped_iterations${sel}`] = ['count>=0'];
  FAILING.forEach(([, tag]) => { thresholds[`http_reqs{scenario:${ph.name},${tag}}`] = ['count>=0']; });
  if (mix) {
    ph.paths.forEach((p) => {
      thresholds[`http_req_duration{scenario:${ph.name},path:${p}}`] = ['max>=0'];
      thresholds[`http_req_failed{scenario:${ph.name},path:${p}}`] = ['rate>=0'];
      const blocks = ph.round > 0 ? blocksOf(ph) : 0;
      for (let b = 0; b < blocks; b += 1) thresholds[`http_req_duration{scenario:${ph.name},path:${p},block:${b}}`] = ['max>=0'];
    });
  }
});

export const options = {
  scenarios,
  thresholds,
  tags: { testid: TESTID },
  // k6's own work stays small: bodies are read and dropped, and only the tags
  // the lab uses are kept (fewer series to hold and push; url adds nothing to name).
  discardResponseBodies: true,
  systemTags: ['scenario', 'name', 'method', 'status', 'expected_response', 'check', 'error_code'],
  summaryTrendStats: ['count', 'avg', 'min', 'med', 'p(90)', 'p(95)', 'p(99)', 'p(99.9)', 'max'],
};

export function setup() {
  console.log(`uds-lab k6 run ${TESTID}: ${PLAN.describe}`);
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

// The order of n paths in the c-th cycle of n requests: a shuffle drawn from
// the run's seed and c (mulberry32, Fisher-Yates), the same in every VU.
function cycleOrder(n, c) {
  let a = (SETTINGS.seed ^ Math.imul(c + 1, 0x9e3779b1)) >>> 0;
  const rnd = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...Array(n).keys()];
  for (let i = n - 1; i > 0; i -= 1) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

let mixPaths = null;
export function mixed() {
  if (exec.scenario.iterationInTest === 0) console.log(__ENV.LAB_PROGRESS);
  if (mixPaths === null) mixPaths = JSON.parse(__ENV.LAB_PATHS);
  // Each path once in every cycle of len(paths) requests, in a drawn order.
  const i = exec.scenario.iterationInTest;
  const n = mixPaths.length;
  const [path, url, name] = mixPaths[cycleOrder(n, Math.floor(i / n))[i % n]];
  const tags = { name, path };
  const blockMs = Number(__ENV.LAB_BLOCK_MS);
  if (blockMs > 0) {
    const b = Math.floor((Date.now() - exec.scenario.startTime) / blockMs);
    tags.block = String(Math.min(Math.max(b, 0), Number(__ENV.LAB_BLOCKS) - 1));
  }
  const res = http.get(url, { tags });
  check(res, { 'status is 200': (r) => r.status === 200 });
}

function fmtMs(v) {
  return v === undefined ? '-' : `${v.toFixed(3)}ms`;
}

// A short table per phase on stdout, and everything in results/<TESTID>/load.json.
export function handleSummary(data) {
  const quantiles = (d) => ({ avg: d.avg, p50: d.med, p90: d['p(90)'], p95: d['p(95)'], p99: d['p(99)'], p999: d['p(99.9)'], max: d.max });
  const perPhase = PHASES.map(({ url, urls, progress, ...ph }) => {
    const m = (name, more = '') => (data.metrics[`${name}{scenario:${ph.name}${more}}`] || {}).values || {};
    const d = m('http_req_duration');
    // The interleaved phase: each path's figures over it and, measured, per block.
    const mixed = ph.path === MIX ? {
      by_path: Object.fromEntries(ph.paths.map((p) => {
        const all = m('http_req_duration', `,path:${p}`);
        return [p, {
          requests: all.count || 0,
          failed_rate: m('http_req_failed', `,path:${p}`).rate || 0,
          duration_ms: quantiles(all),
          blocks: [...Array(ph.round > 0 ? blocksOf(ph) : 0).keys()].map((b) => {
            const v = m('http_req_duration', `,path:${p},block:${b}`);
            return { requests: v.count || 0, p50: v.count ? v.med : null };
          }),
        }];
      })),
    } : {};
    return {
      ...ph,
      ...mixed,
      requests: m('http_reqs').count || 0,
      failed_rate: m('http_req_failed').rate || 0,
      dropped_iterations: m('dropped_iterations').count || 0,
      duration_ms: quantiles(d),
      ...(FAILING.length ? {
        statuses: Object.fromEntries(FAILING.map(([key, tag]) => [
          key, ((data.metrics[`http_reqs{scenario:${ph.name},${tag}}`] || {}).values || {}).count || 0])),
      } : {}),
    };
  });
  const load = MODE === 'max' ? `max throughput, ${SETTINGS.connections} VUs`
    : MODE === 'sweep' ? `sweep step ${SETTINGS.step} at ${SETTINGS.rate ? `${SETTINGS.rate} req/s` : `${SETTINGS.connections} connections`}`
      : `${SETTINGS.rate} req/s`;
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
    urls: PLAN.urls,
    start_ms: data.setup_data ? data.setup_data.start_ms : null,
    gap_s: PLAN.gap_s,
    idle: PLAN.idle,
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
    [__ENV.PLAN.replace(/plan([^/]*)$/, 'load$1')]: JSON.stringify(out, null, 2),
  };
}
