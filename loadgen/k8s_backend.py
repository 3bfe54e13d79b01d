"""The lab on Kubernetes, on kubectl's current cluster, with the chart in
k8s/uds-lab (docs/kubernetes.md): lab_run.py k8s COMMAND (make k8s-*).

    up            install or upgrade the lab, wait until it is ready
    load          a run: the chart's openloop Job (K8S_PODS pods, each every
                  K8S_PODS-th request of the stream, one start instant), its
                  pods' load.json from their logs, merged exactly by the
                  judge (drive.py), and cluster.json. The Job is the
                  release's (helm upgrade): helm list shows the run and
                  helm uninstall removes it.
    cluster ID    cluster.json of run ID: where it took place, the node of
                  each of the release's pods
    report        the report of a run (RUN=<id>, default the last) against the
                  release's Prometheus (with its login) or the one
                  K8S_PROMETHEUS names (this release's series alone there),
                  through a port-forward

Settings: K8S_NAMESPACE (uds-lab), K8S_RELEASE (lab), K8S_VALUES (a values
file of yours), K8S_SET ("key=value ..." as helm --set, e.g.
"load.rate=200 load.scenario=ping"), K8S_PODS (generator pods, 1-16; 1),
K8S_TIMEOUT (seconds a generator may take; 1800), K8S_START_LEAD (seconds
from making the Job to the run's start instant that its pods wait for, with
K8S_PODS above 1; 20), K8S_NETWORK_PLUGIN (its name, for the report:
Kubernetes does not say), K8S_PROMETHEUS (the cluster's Prometheus for the
report, <namespace>/<service>:<port>, where the release runs none:
prometheus.enabled=false), TESTID (the run's id), PYTHON (one with the
report's packages: .venv's)."""
import base64
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import k8s_replay
import lab_run
import machine
from lab_run import ROOT, Stop

CHART = "k8s/uds-lab"
HELM_WAIT = "5m"
HELM_S = 420  # helm --wait's 5 minutes, and helm's own start
KUBECTL_S = 60
JUDGE_S = 600
POLL_S = 5
PORT_FORWARD_S = 10
NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
# The settings the judge names for a batch or step (PRECISION's later batch, a
# sweep's step), as the chart's values that give them to the Job.
CHART_KEYS = {"ROUNDS": "load.rounds", "SEED": "load.seed", "PATHS": "load.paths", "FIRST_ROUND": "load.firstRound",
              "SWEEP_STEP": "load.sweepStep", "SWEEP_TO": "load.sweepTo", "PLAN_FILE": "load.planFile"}


def fail(msg):
    raise Stop(f"k8s: {msg}", 2)


def whole(env, name, default, lo, hi, what):
    v = env.get(name) or str(default)
    if not re.fullmatch(r"[0-9]+", v) or not lo <= int(v) <= hi:
        fail(f"{name}={v}: {what}")
    return int(v)


class Settings:
    """K8S_* from the environment, each refused with one line naming it before anything reaches the cluster."""

    def __init__(self, env):
        self.env = env
        self.ns = env.get("K8S_NAMESPACE") or "uds-lab"
        self.release = env.get("K8S_RELEASE") or "lab"
        self.pods = whole(env, "K8S_PODS", 1, 1, 16, "a whole number of generator pods, 1 to 16")
        self.timeout = whole(env, "K8S_TIMEOUT", 1800, 1, 10**9, "seconds, a whole number above 0")
        self.lead = whole(env, "K8S_START_LEAD", 20, 1, 3600,
                          "seconds from making the Job to the run's start, a whole number, 1 to 3600")
        if not re.fullmatch(NAME, self.ns):
            fail(f"K8S_NAMESPACE={self.ns}: not a namespace's name")
        self.values = env.get("K8S_VALUES", "")
        if self.values and not os.access(self.values, os.R_OK):
            fail(f"K8S_VALUES={self.values}: no such file")
        self.prometheus = env.get("K8S_PROMETHEUS", "")
        if self.prometheus and not re.fullmatch(f"{NAME}/{NAME}:[0-9]+", self.prometheus):
            fail(f"K8S_PROMETHEUS={self.prometheus}: the cluster's Prometheus as <namespace>/<service>:<port>")
        self.args = ["--namespace", self.ns] + (["--values", self.values] if self.values else [])
        for kv in env.get("K8S_SET", "").split():
            if "=" not in kv:
                fail(f'K8S_SET: "{kv}" is not key=value')
            self.args += ["--set", kv]
        venv = ROOT / ".venv" / "bin" / "python"
        self.python = env.get("PYTHON") or (str(venv) if venv.exists() else "python3")


def log(msg):
    print(f"[k8s {datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def call(args, timeout=KUBECTL_S, check=True, **kw):
    """A command's stdout; a failure (or its timeout) stops the run naming it."""
    try:
        res = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(args[:3])}: no answer after {timeout} s")
    except FileNotFoundError:
        fail(f"{args[0]}: not found on PATH")
    if check and res.returncode != 0:
        fail(f"{' '.join(args[:3])}: {res.stderr.strip() or res.stdout.strip()}")
    return res.stdout


def as_json(text, what):
    try:
        return json.loads(text)
    except ValueError as e:
        fail(f"{what}: not JSON ({e}): {text[:200]}")


class Cluster:
    """kubectl in the release's namespace."""

    def __init__(self, s):
        self.s = s

    def kubectl(self, *args, **kw):
        return call(["kubectl", "--namespace", self.s.ns, *args], **kw)

    def json(self, *args):
        return as_json(self.kubectl("get", *args, "-o", "json"), "kubectl get " + " ".join(args))

    def pods(self, selector):
        return self.json("pods", "-l", selector)["items"]


def cluster_json(s, testid):
    """Where the run took place, for the report (compose.json's part): the
    app's node, its loopback's conntrack entries after the run (read by its
    nginx sidecar: none after thousands of loopback connections means
    loopback is not tracked there; 0 where the kernel has no conntrack), the
    images, and the node of each of the release's pods by component."""
    k = Cluster(s)
    mine = f"app.kubernetes.io/instance={s.release}"
    apps = k.pods(f"{mine},app.kubernetes.io/component=app")
    if not apps:
        fail(f"no app pod of release {s.release} in namespace {s.ns}")
    app = apps[0]
    node = as_json(call(["kubectl", "get", "node", app["spec"]["nodeName"], "-o", "json"]), "kubectl get node")
    res = k.kubectl("exec", app["metadata"]["name"], "-c", "nginx", "--", "sh", "-c",
                    "cat /proc/sys/net/netfilter/nf_conntrack_count 2>/dev/null || echo 0", check=False).strip()
    images = {c["name"]: c["image"] for c in app["spec"]["containers"] if c["name"] in ("app", "nginx")}
    job = k.json("job", f"{s.release}-openloop-{testid}")
    images["openloop"] = job["spec"]["template"]["spec"]["containers"][0]["image"]
    placement = {}
    for p in k.pods(mine):
        component = p["metadata"].get("labels", {}).get("app.kubernetes.io/component")
        if component and p["spec"].get("nodeName"):
            placement.setdefault(component, set()).add(p["spec"]["nodeName"])
    info = node["status"]["nodeInfo"]
    return {
        "node": node["metadata"]["name"], "kubelet": info["kubeletVersion"], "kernel": info["kernelVersion"],
        "os": info["osImage"], "runtime": info["containerRuntimeVersion"],
        "cores": node["status"]["capacity"].get("cpu"),
        "network_plugin": s.env.get("K8S_NETWORK_PLUGIN") or None,
        "lo_conntrack_entries": int(res) if res.isdigit() else None,
        "images": images,
        "placement": {c: sorted(n) for c, n in sorted(placement.items())},
    }


def segment(log_text, i, pods):
    """Pod i's load.json, from between the marker lines of its log; None when absent."""
    lines = log_text.splitlines()
    try:
        first = lines.index(f"--- uds-lab load.json {i}/{pods} ---")
        last = lines.index("--- end of load.json ---", first)
    except ValueError:
        return None
    return "\n".join(lines[first + 1:last]) + "\n"


class Kubernetes:
    """lab_run.py's backend: the chart's openloop Job, the judge on .venv's Python."""

    def __init__(self, s, testid):
        self.s, self.k = s, Cluster(s)
        self.testid = testid
        self.run_dir = Path("results") / testid
        self.job = f"{s.release}-openloop-{testid}"
        self.values = None  # the release's values but load.*, for each helm upgrade
        self.job_made = False
        self.started = time.monotonic()
        self.replay = k8s_replay.Replay(s, testid, self.run_dir, call) if s.env.get("TRAFFIC") else None

    def judge(self, last_rc):
        args = [self.s.python, str(ROOT / "loadgen" / "drive.py"), "--run", self.testid, "--results", "results",
                "--last-rc", str(last_rc), "--backend", "kubernetes"]
        try:
            return subprocess.run(args, timeout=JUDGE_S).returncode
        except subprocess.TimeoutExpired:
            fail(f"loadgen/drive.py: not done after {JUDGE_S} s")

    def helm_upgrade(self, *sets, wait=False):
        args = ["helm", "upgrade", self.s.release, CHART, "--values", self.values, *self.s.args, *sets]
        call(args + (["--wait", "--timeout", HELM_WAIT] if wait else []), timeout=HELM_S)

    def prepare(self):
        """The release's values but load.* (a run's settings are its own: the
        last run's do not leak into this one; one given now, sysctls.* or
        resources, changes the release as make k8s-up would); the lab as this
        checkout's chart has it, ready, and the last run's Job gone."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log(f"run {self.testid}: {self.s.pods} generator pod(s) in namespace {self.s.ns}")
        res = subprocess.run(["helm", "get", "values", self.s.release, "--namespace", self.s.ns, "-o", "json"],
                             capture_output=True, text=True, timeout=KUBECTL_S)
        if res.returncode != 0:
            fail(f"no release {self.s.release} in namespace {self.s.ns} (make k8s-up first): {res.stderr.strip()}")
        values = as_json(res.stdout or "{}", "helm get values") or {}
        values.pop("load", None)
        fd, self.values = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(values, f)
        if self.replay:  # planned on the host, refused here when too big: nothing has started
            self.replay.plan(["--values", self.values, *self.s.args, *self.job_sets({})])
        self.helm_upgrade("--set", "load.enabled=false", wait=True)
        machine.write(self.run_dir, machine.on_kubernetes(self.k, self.s.release))

    def job_sets(self, settings):
        """helm's --set for the Job: the run's id, its pods, their start instant, the judge's settings."""
        sets = ["load.enabled=true", f"load.testid={self.testid}", f"load.pods={self.s.pods}"]
        if self.s.pods > 1:
            # One start instant for every pod (load.startAt, unix ms), K8S_START_LEAD s
            # from now: long enough for the pods to be scheduled, plan and start on a
            # warm node. A pod that comes up more than 5 ms after it sends nothing and fails.
            sets.append(f"load.startAt={int((time.time() + self.s.lead) * 1000)}")
        for k, v in settings.items():
            if k not in CHART_KEYS:
                fail(f"{k}: the chart has no value for it (loadgen/k8s_backend.py's CHART_KEYS)")
            sets.append(f"{CHART_KEYS[k]}={{{v}}}" if k == "PATHS" else f"{CHART_KEYS[k]}={v}")
        return [x for kv in sets for x in ("--set", kv)]

    def start(self, service, settings, length_s):
        """The Job, its pods' load.json, cluster.json: the generator's exit
        code (1: a pod failed, as openloop fails a run)."""
        if self.job_made:  # a Job's template cannot change: the last batch's goes first
            self.helm_upgrade("--set", "load.enabled=false", wait=True)
        replay = self.replay.make() if self.replay else []  # before the start instant is set
        self.helm_upgrade(*self.job_sets(settings), *replay)
        self.job_made = True
        if self.replay:
            self.replay.own(self.job)
        failed = self.wait()
        self.collect(settings.get("PLAN_FILE", "plan.json").replace("plan", "load", 1))
        (self.run_dir / "cluster.json").write_text(json.dumps(cluster_json(self.s, self.testid), indent=1) + "\n")
        log(f"wrote {self.run_dir}: the pods' load.json and cluster.json ({time.monotonic() - self.started:.0f} s)")
        if failed:
            log(f"{failed} of {self.s.pods} generator pod(s) failed: their log says why")
        return 1 if failed else 0

    def wait(self):
        """Until every pod of the Job ended (K8S_TIMEOUT at most): how many failed."""
        end = time.monotonic() + self.s.timeout
        while True:
            done, failed = (int(self.k.kubectl("get", "job", self.job, "-o", f"jsonpath={{.status.{n}}}") or 0)
                            for n in ("succeeded", "failed"))
            if done + failed >= self.s.pods:
                return failed
            if time.monotonic() >= end:
                fail(f"job/{self.job}: not finished after K8S_TIMEOUT={self.s.timeout} s")
            time.sleep(POLL_S)

    def collect(self, load_name):
        """Each pod's load.json, from its log, as segments/<load file>/<pod>.json for the judge to merge."""
        out = self.run_dir / "segments" / load_name
        out.mkdir(parents=True, exist_ok=True)
        for i in range(self.s.pods):
            selector = f"job-name={self.job},batch.kubernetes.io/job-completion-index={i}"
            pods = self.k.kubectl("get", "pods", "-l", selector, "-o", "name").split()
            if not pods:
                fail(f"no pod of job/{self.job} with index {i}")
            name = pods[0]
            text = self.k.kubectl("logs", name, "-c", "openloop")
            doc = segment(text, i, self.s.pods)
            if doc is None:  # a pod that came up after the start instant sends nothing and says so
                fail(f"{name} wrote no load.json; its log ends: {' '.join(text.splitlines()[-2:])}")
            try:
                json.loads(doc)
            except ValueError:
                fail(f"{name}: its log did not hold load.json whole between its marker lines")
            (out / f"{i}.json").write_text(doc)

    def interrupt(self):
        if not self.job_made:
            return f"no Job was made; {self.run_dir} holds what the run wrote before"
        try:
            self.helm_upgrade("--set", "load.enabled=false")
        except Stop as e:
            return f"job/{self.job} may still run ({e.args[0]}): helm upgrade with load.enabled=false removes it"
        return (f"job/{self.job} removed (helm upgrade, load.enabled=false); "
                f"{self.run_dir} holds what the run wrote before")

    def close(self):
        if self.values:
            os.unlink(self.values)
        if self.replay:
            self.replay.remove()
        if (self.run_dir / "load.json").is_file():
            Path("results/last").write_text(self.testid + "\n")


def up(s):
    args = ["helm", "upgrade", "--install", s.release, CHART, *s.args, "--create-namespace", "--wait", "--timeout",
            HELM_WAIT]
    try:
        return subprocess.run(args, timeout=HELM_S).returncode
    except subprocess.TimeoutExpired:
        fail(f"helm upgrade --install: not done after {HELM_S} s")


def port_forward(ns, svc, port):
    """kubectl port-forward to svc in ns: (its process, the local port)."""
    pf = subprocess.Popen(["kubectl", "--namespace", ns, "port-forward", f"svc/{svc}", f":{port}"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said, end = [], time.monotonic() + PORT_FORWARD_S
    while time.monotonic() < end:
        if select.select([pf.stdout], [], [], 0.2)[0]:
            line = pf.stdout.readline()
            if not line and pf.poll() is not None:
                break
            said.append(line.strip())
            m = re.match(r"Forwarding from 127\.0\.0\.1:([0-9]+) ", line)
            if m:
                return pf, m.group(1)
    pf.kill()
    fail(f"kubectl port-forward to svc/{svc} in {ns} did not start: {' '.join(said)}")


def report(s):
    """The report of RUN (default the last run) through a port-forward to the Prometheus that holds its figures."""
    last = Path("results/last")
    run = s.env.get("RUN") or (last.read_text().strip() if last.exists() else "")
    if not run:
        fail("no run: make k8s-load first, or RUN=<id>")
    env, select_args = dict(s.env), []
    with tempfile.TemporaryDirectory() as tmp:
        if s.prometheus:
            # The cluster's Prometheus (the chart's PodMonitors feed it), which may
            # scrape other workloads and releases with the same job names: this
            # release's series alone, by the namespace the operator labels each
            # target with and the release the PodMonitors label it with. Its own
            # login, if it asks one: PROMETHEUS_USER and PROMETHEUS_PASSWORD_FILE.
            pns, svc_port = s.prometheus.split("/")
            svc, port = svc_port.split(":")
            select_args = ["--select", f'namespace="{s.ns}",uds_lab_release="{s.release}"']
        else:
            pns, svc, port = s.ns, f"{s.release}-prometheus", "9090"
            values = as_json(call(["helm", "get", "values", s.release, "--namespace", s.ns, "--all", "-o", "json"]),
                             "helm get values")
            if not values["prometheus"].get("enabled", True):
                fail(f"release {s.release} runs no Prometheus (prometheus.enabled=false): name the cluster's, "
                     "K8S_PROMETHEUS=<namespace>/<service>:<port>")
            secret = Cluster(s).kubectl("get", "secret", f"{s.release}-prometheus-auth", "-o",
                                        "jsonpath={.data.password}")
            Path(tmp, "password").write_bytes(base64.b64decode(secret))
            env["PROMETHEUS_PASSWORD_FILE"] = str(Path(tmp, "password"))
            env["PROMETHEUS_USER"] = values["prometheus"]["user"]
        pf, local = port_forward(pns, svc, port)
        try:
            env["MARGIN"] = env.get("MARGIN") or call(["scripts/dotenv.sh", "MARGIN"]).strip()
            return subprocess.run([s.python, "-m", "report", "--run", run, "--prometheus", f"http://127.0.0.1:{local}",
                                   *select_args], env=env, timeout=JUDGE_S).returncode
        finally:
            pf.kill()
            pf.wait()


def main(argv, env=os.environ):
    cmd = argv[0] if argv else ""
    try:
        if cmd not in ("up", "load", "report", "cluster"):
            fail(f"unknown command {cmd} (up, load, report, cluster)")
        os.chdir(ROOT)  # the chart, results/ and K8S_VALUES relative to the checkout
        s = Settings(env)
        if cmd == "up":
            return up(s)
        if cmd == "report":
            return report(s)
        if cmd == "cluster":
            if len(argv) < 2:
                fail("usage: k8s cluster <run id>")
            print(json.dumps(cluster_json(s, argv[1]), indent=1))
            return 0
    except Stop as e:
        print(e.args[0], file=sys.stderr)
        return e.args[1]
    testid = env.get("TESTID") or f"k8s-{datetime.now():%Y%m%d-%H%M%S}"
    return lab_run.run(Kubernetes(s, testid))
