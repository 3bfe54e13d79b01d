// uds-lab load: the same request through each nginx path, one path at a time.
// Settings come from the environment (compose passes them from .env or your shell):
//   BASE_URL  nginx as k6 reaches it            (http://nginx:8080)
//   PATHS     comma list of tcp,uds,tcp-ka,uds-ka (all four)
//   RATE      requests per second, fixed        (500)
//   DURATION  seconds per path                  (20)
//   ENDPOINT  app route behind each path        (/ping)
//   TESTID    label of this run in Prometheus   (set by `make load`)
import http from 'k6/http';
import { check } from 'k6';

const KNOWN_PATHS = ['tcp', 'uds', 'tcp-ka', 'uds-ka'];
// A pause between paths so one path's tail (TIME_WAIT, GC) is not counted in the next.
const GAP_SECONDS = 2;

function positiveInt(name, fallback) {
  const raw = __ENV[name] === undefined || __ENV[name] === '' ? String(fallback) : __ENV[name];
  if (!/^[0-9]+$/.test(raw) || Number(raw) <= 0) {
    throw new Error(`${name}="${raw}": must be a whole number > 0`);
  }
  return Number(raw);
}

function pathList(raw) {
  const paths = (raw || KNOWN_PATHS.join(',')).split(',').map((p) => p.trim()).filter(Boolean);
  for (const p of paths) {
    if (!KNOWN_PATHS.includes(p)) {
      throw new Error(`PATHS: unknown path "${p}" (known: ${KNOWN_PATHS.join(', ')})`);
    }
  }
  if (paths.length === 0) throw new Error('PATHS: empty');
  return paths;
}

const BASE_URL = (__ENV.BASE_URL || 'http://nginx:8080').replace(/\/$/, '');
const PATHS = pathList(__ENV.PATHS);
const RATE = positiveInt('RATE', 500);
const DURATION = positiveInt('DURATION', 20);
const ENDPOINT = __ENV.ENDPOINT || '/ping';
if (!ENDPOINT.startsWith('/')) throw new Error(`ENDPOINT="${ENDPOINT}": must start with /`);
const TESTID = __ENV.TESTID || `run-${Date.now()}`;

const scenarios = {};
const thresholds = {};
PATHS.forEach((path, i) => {
  scenarios[path] = {
    executor: 'constant-arrival-rate',
    rate: RATE,
    timeUnit: '1s',
    duration: `${DURATION}s`,
    startTime: `${i * (DURATION + GAP_SECONDS)}s`,
    // Enough VUs for RATE at ~10 ms each; more are added (up to maxVUs) if the
    // server slows down, and k6 reports dropped_iterations if even that is short.
    preAllocatedVUs: Math.max(10, Math.ceil(RATE / 100)),
    maxVUs: Math.max(100, Math.ceil(RATE / 10)),
    exec: 'hit',
    env: { LAB_PATH: path },
    tags: { path },
  };
  // A broken path fails the run instead of producing pretty numbers.
  thresholds[`http_req_failed{path:${path}}`] = ['rate<0.01'];
  thresholds[`checks{path:${path}}`] = ['rate>0.99'];
});

export const options = {
  scenarios,
  thresholds,
  tags: { testid: TESTID },
  // Keep k6's own work small: no per-request body kept beyond the check.
  discardResponseBodies: true,
  summaryTrendStats: ['avg', 'p(50)', 'p(95)', 'p(99)', 'max'],
};

export function hit() {
  const path = __ENV.LAB_PATH;
  // name: one time series per path and endpoint, not per URL.
  const res = http.get(`${BASE_URL}/${path}${ENDPOINT}`, { tags: { name: `/${path}${ENDPOINT}` } });
  check(res, { 'status is 200': (r) => r.status === 200 });
}
