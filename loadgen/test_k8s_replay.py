"""loadgen/k8s_replay.py: a replay's schedule cut into the run's ConfigMaps,
each inside Kubernetes's 1 MiB, joined back into the same bytes, and one too
long for them refused in one line. The pods' own join (the chart's init
container) and the API server's acceptance: tests/k8s/replay_test.go."""
import base64
import gzip
import random
import re

import pytest

import k8s_replay
from lab_run import Stop

PLAN = '{"testid": "r1", "phases": []}\n'


def schedule(lines, seed=1):
    """A replay's schedule of that many lines whose targets are random (gzip
    shrinks it to about half): the header, then due, spacing, method, route, target."""
    rnd = random.Random(seed)
    rows = ["# uds-lab replay: due_us spacing_us method route target"]
    rows += [f"{i * 1000}\t250\tGET\t{i % 11}\t/replay/{rnd.getrandbits(64):x}/{rnd.getrandbits(32):x}"
             for i in range(lines)]
    return ("\n".join(rows) + "\n").encode()


@pytest.fixture(scope="module")
def long():
    """(a schedule of 120,000 lines, 2.35 MB gzipped, and its parts)."""
    sched = schedule(120_000)
    return sched, k8s_replay.split("plan.json", PLAN, sched)


def joined(parts, name=k8s_replay.REPLAY_FILE):
    """The schedule back from the parts, in key order (as the pods join <name>.gz.*)."""
    chunks = {k: v for p in parts for k, v in p["binaryData"].items()}
    return gzip.decompress(b"".join(chunks[k] for k in sorted(chunks) if k.startswith(name + ".gz.")))


def test_a_long_schedule_is_cut_into_parts_each_inside_the_limit_and_joins_back(long):
    sched, parts = long
    packed = len(gzip.compress(sched, mtime=0))
    assert 2_000_000 < packed < 3_000_000  # two parts of 1 MB and some: three
    assert len(parts) == 3
    assert [k for p in parts for k in p["binaryData"]] == [f"replay.tsv.gz.{k:03d}" for k in range(3)]
    assert parts[0]["data"] == {"plan.json": PLAN} and all(p["data"] == {} for p in parts[1:])
    # Full parts hold exactly PART_BYTES as the API server counts them (keys and values).
    assert [k8s_replay.part_size(p) for p in parts[:2]] == [k8s_replay.PART_BYTES] * 2
    assert 0 < k8s_replay.part_size(parts[2]) < k8s_replay.PART_BYTES
    assert joined(parts) == sched


def test_a_short_schedule_is_one_configmap_with_the_plan():
    sched = schedule(10)
    parts = k8s_replay.split("plan.json", PLAN, sched)
    assert len(parts) == 1 and parts[0]["data"] == {"plan.json": PLAN}
    assert joined(parts) == sched


def test_configmaps_are_the_runs_immutable_and_named_as_the_chart_mounts_them(long):
    parts = long[1]
    doc = k8s_replay.configmaps("lab", "r1", parts)
    assert doc["kind"] == "List"
    assert [c["metadata"]["name"] for c in doc["items"]] == ["lab-replay-r1-0", "lab-replay-r1-1", "lab-replay-r1-2"]
    for c, p in zip(doc["items"], parts):
        assert c["immutable"] is True
        assert c["metadata"]["labels"]["app.kubernetes.io/instance"] == "lab"
        assert c["metadata"]["labels"]["uds-lab/run"] == "r1"
        assert {k: base64.b64decode(v) for k, v in c["binaryData"].items()} == p["binaryData"]


def test_a_schedule_above_the_runs_configmaps_is_refused_in_one_line(long):
    sched = long[0]
    with pytest.raises(Stop) as e:
        k8s_replay.split("plan.json", PLAN, sched, max_parts=2)
    msg, rc = e.value.args
    assert rc == 2 and "\n" not in msg
    size = len(gzip.compress(sched, mtime=0)) / 1e6
    assert msg == (f"k8s: TRAFFIC: the replay's schedule (120000 logged requests) is {size:.1f} MB gzipped, above the "
                   "2 MB a run's ConfigMaps hold (2 of 1 MB): a shorter stretch (TRAFFIC_FOR) or a TRAFFIC_SAMPLE")


def test_the_plan_runs_with_the_jobs_plan_environment_and_the_hosts_traffic_settings():
    job = {"spec": {"template": {"spec": {"initContainers": [
        {"name": "other", "env": [{"name": "RATE", "value": "1"}]},
        {"name": "plan", "env": [{"name": "RATE", "value": "500"}, {"name": "PRECISION", "value": ""},
                                 {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}}}}
    assert k8s_replay.plan_env(job) == {"RATE": "500", "PRECISION": ""}
    env = {"TRAFFIC": "a.log", "TRAFFIC_SPEED": "2", "RATE": "9", "K8S_PODS": "2", "XTRAFFIC": "x"}
    assert k8s_replay.traffic_env(env) == {"TRAFFIC": "a.log", "TRAFFIC_SPEED": "2"}


def test_a_job_without_its_plan_container_is_named():
    with pytest.raises(Stop, match=re.escape("the chart's Job has no plan init container")):
        k8s_replay.plan_env({"spec": {"template": {"spec": {"initContainers": []}}}})
