"""make k8s-load TRAFFIC=<your access log>: the replay on Kubernetes, the
same run as make load's on Compose (docs/kubernetes.md).

The log stays on the host. The plan and the replay's schedule are written
there (loadgen/plan.py on .venv's Python, which has numpy) with the settings
the chart's Job would plan with: the plan init container's environment and
the release's catalogue (its URLs name this release's Services), as helm
renders them for this run and kubectl reads them, with TRAFFIC and the
TRAFFIC_* settings from the environment (make's command line).

They reach the generator pods in ConfigMaps made for the run: the plan in
the first, the schedule gzipped and cut into parts, each ConfigMap holding
at most PART_BYTES (Kubernetes takes at most 1 MiB of data in one object).
The Job's init container (templates/load-job.yaml, load.replayParts) copies
the plan, joins the parts in order and unzips the schedule beside it. Every
pod gets the whole schedule and sends its own share of the stream (openloop's
segment: every K8S_PODS-th request), so the merged run is the Compose run
request for request. The ConfigMaps are immutable, labelled with the run,
owned by the Job (removed with it) and deleted when the run ends: with
TRAFFIC_SEND=logged the schedule holds your paths. A schedule that needs
more than MAX_PARTS ConfigMaps is refused before anything starts."""
import base64
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from lab_run import ROOT, Stop
from plan import REPLAY_FILE

# Bytes of keys and values in one ConfigMap: under the API server's 1 MiB
# (1,048,576) for data and binaryData together, with room for its metadata.
PART_BYTES = 1_000_000
# ConfigMaps a run may make: 16 MB of gzipped schedule, about 2,000,000 logged
# requests emulated (1,000,000 gzip to 8.2 MB); unzipped, well inside the pod's
# 256 MiB results volume.
MAX_PARTS = 16
PLAN_S = 600  # loadgen/plan.py on the host: a log of 1,000,000 lines takes minutes on a busy machine
KUBECTL_S = 60
COMPONENT = "replay"
RUN_LABEL = "uds-lab/run"


def part_key(name, k):
    """A schedule's k-th gzipped part: the pods join <name>.gz.* in order."""
    return f"{name}.gz.{k:03d}"


def split(plan_name, plan_text, schedule, schedule_name=REPLAY_FILE, part_bytes=PART_BYTES, max_parts=MAX_PARTS):
    """The ConfigMaps' contents, in order: [{"data": {...}, "binaryData":
    {key: bytes}}]; the first holds the plan. A schedule that needs more than
    max_parts is refused, in one line with its size and the limit."""
    packed = gzip.compress(schedule, mtime=0)
    key_len = len(part_key(schedule_name, 0))
    # A part per ConfigMap, the first beside the plan.
    ends = [max(0, part_bytes - len(plan_name) - len(plan_text.encode()) - key_len)]
    while ends[-1] < len(packed):
        ends.append(ends[-1] + part_bytes - key_len)
    parts = [{"data": {}, "binaryData": {part_key(schedule_name, k): packed[start:end]}}
             for k, (start, end) in enumerate(zip([0] + ends, ends))]
    parts[0]["data"][plan_name] = plan_text
    if len(parts) > max_parts:
        lines = schedule.count(b"\n") - 1
        raise Stop(f"k8s: TRAFFIC: the replay's schedule ({lines} logged requests) is {len(packed) / 1e6:.1f} MB "
                   f"gzipped, above the {max_parts * part_bytes / 1e6:.0f} MB a run's ConfigMaps hold ({max_parts} of "
                   f"{part_bytes / 1e6:.0f} MB): a shorter stretch (TRAFFIC_FOR) or a TRAFFIC_SAMPLE", 2)
    return parts


def part_size(part):
    """What the API server counts of a ConfigMap against its 1 MiB: its keys and values."""
    return sum(len(k) + len(v.encode()) for k, v in part["data"].items()) + \
        sum(len(k) + len(v) for k, v in part["binaryData"].items())


def configmap_name(release, testid, k):
    """The chart names the same (load-job.yaml's replay volume)."""
    return f"{release}-replay-{testid}-{k}"


def configmaps(release, testid, parts):
    """The run's ConfigMaps, as a kubectl List."""
    items = [{
        "apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
        "metadata": {"name": configmap_name(release, testid, k), "labels": {
            "app.kubernetes.io/name": "uds-lab", "app.kubernetes.io/instance": release,
            "app.kubernetes.io/component": COMPONENT, RUN_LABEL: testid}},
        "data": p["data"],
        "binaryData": {key: base64.b64encode(v).decode() for key, v in p["binaryData"].items()},
    } for k, p in enumerate(parts)]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def plan_env(job):
    """The environment of a Job's plan init container, as a dict."""
    for c in job["spec"]["template"]["spec"].get("initContainers", []):
        if c["name"] == "plan":
            return {e["name"]: e.get("value", "") for e in c.get("env", []) if "valueFrom" not in e}
    raise Stop("k8s: TRAFFIC: the chart's Job has no plan init container (templates/load-job.yaml)", 2)


def json_objects(text):
    """The JSON objects kubectl prints one after another."""
    decoder, at = json.JSONDecoder(), 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        o, at = decoder.raw_decode(text, at)
        yield o


def rendered(objects, kind, name):
    """The object of that kind (and name, where given) of kubectl's List."""
    for o in objects.get("items", [objects]):
        if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name):
            return o
    raise Stop(f"k8s: TRAFFIC: helm template rendered no {kind} {name or ''}".rstrip(), 2)


def traffic_env(env):
    """TRAFFIC and the TRAFFIC_* settings: the host's, where the log is."""
    return {k: v for k, v in env.items() if k == "TRAFFIC" or k.startswith("TRAFFIC_")}


class Replay:
    """The run's replay: planned on the host, its ConfigMaps made, owned by the Job, removed."""

    def __init__(self, s, testid, run_dir, call):
        self.s, self.testid, self.run_dir, self.call = s, testid, run_dir, call
        self.parts = None
        self.made = False

    def kubectl(self, *args, **kw):
        return self.call(["kubectl", "--namespace", self.s.ns, *args], **kw)

    def render(self, helm_args):
        """The Job and the catalogue helm renders for this run, read by kubectl (JSON)."""
        text = self.call(["helm", "template", self.s.release, str(ROOT / "k8s" / "uds-lab"), *helm_args, "--show-only",
                          "templates/load-job.yaml", "--show-only", "templates/configmaps.yaml"], timeout=KUBECTL_S)
        out = self.kubectl("create", "--dry-run=client", "--validate=false", "-o", "json", "-f", "-", input=text)
        return {"items": list(json_objects(out))}

    def plan(self, helm_args, plan_name="plan.json"):
        """plan.py on the host with the Job's settings and the release's
        catalogue: plan.json and the schedule in the run's folder, split for
        the ConfigMaps (refused here when too big)."""
        objects = self.render(helm_args)
        job = rendered(objects, "Job", None)
        catalogue = rendered(objects, "ConfigMap", f"{self.s.release}-catalogue")["data"]["catalogue.json"]
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "catalogue.json").write_text(catalogue)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **plan_env(job), **traffic_env(self.s.env),
                   "CATALOGUE": str(Path(tmp, "catalogue.json")), "RESULTS": str(self.run_dir.parent)}
            try:
                res = subprocess.run([self.s.python, str(ROOT / "loadgen" / "plan.py")], env=env, timeout=PLAN_S,
                                     capture_output=True, text=True)
            except subprocess.TimeoutExpired:
                raise Stop(f"k8s: TRAFFIC: loadgen/plan.py: not done after {PLAN_S} s", 2)
        if res.returncode != 0:
            raise Stop(res.stderr.strip() or f"k8s: TRAFFIC: loadgen/plan.py exited {res.returncode}", 2)
        self.parts = split(plan_name, (self.run_dir / plan_name).read_text(),
                           (self.run_dir / REPLAY_FILE).read_bytes())
        doc = json.loads((self.run_dir / plan_name).read_text())
        print(f"[k8s] {doc['describe']}; the schedule in {len(self.parts)} ConfigMap(s)", file=sys.stderr, flush=True)
        return doc

    def make(self):
        """The run's ConfigMaps on the cluster; helm's --set for the Job that mounts them."""
        self.made = True
        self.kubectl("create", "-f", "-", input=json.dumps(configmaps(self.s.release, self.testid, self.parts)))
        return ["--set", f"load.replayParts={len(self.parts)}"]

    def own(self, job):
        """The Job owns them: removing it (helm upgrade, its ttl) removes them."""
        uid = self.kubectl("get", "job", job, "-o", "jsonpath={.metadata.uid}").strip()
        owner = {"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid}]}}
        for k in range(len(self.parts)):
            self.kubectl("patch", "configmap", configmap_name(self.s.release, self.testid, k), "--type", "merge",
                         "-p", json.dumps(owner))

    def remove(self):
        """The run's ConfigMaps and its schedule's file gone (the plan's summary stays)."""
        if self.made:
            self.kubectl("delete", "configmap", "--ignore-not-found", "-l",
                         f"app.kubernetes.io/instance={self.s.release},{RUN_LABEL}={self.testid}", check=False)
            self.made = False
        (self.run_dir / REPLAY_FILE).unlink(missing_ok=True)
