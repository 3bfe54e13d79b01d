"""The run's program (lab_run.py compose), run as make runs it, with
`docker compose` played by a small program (fake_compose below) that runs
each container's process here: the judge (drive.py), the real wrk runner
with Debian's wrk and the real openloop built from this checkout, against a
server on 127.0.0.1; it records what it was asked. The run's folder must
hold the plan's figures; the containers must get their settings, the
judge alone TRAFFIC's files, make floor its servers up and down, and an
interrupted run must remove its generator's container and say so."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import plan as runplan

LAB_RUN = runplan.HERE / "lab_run.py"
# lab_run.py runs on the host's Python: its standard library alone (-S: no site-packages).
HOST_PYTHON = [sys.executable, "-S"]

# `docker compose` (and `docker rm`) as the backend calls them: each call
# recorded as a JSON line in $CALLS; `run` runs the service's process here
# with the environment compose would pass it.
FAKE_COMPOSE = r'''#!/usr/bin/env python3
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["CALLS"], "a") as f:
    env = {k: os.environ.get(k) for k in ("PLAN_FILE", "FIRST_ROUND", "TRAFFIC")}
    f.write(json.dumps({"args": args, "env": env}) + "\n")
if "config" in args:
    print("openloop\nwrk\ngrafana" if "--services" in args else "{}")
    sys.exit(0)
if args[:2] == ["rm", "-f"]:  # docker rm -f NAME: the container named run --name NAME, killed
    try:
        os.kill(int(open(os.environ["CALLS"] + "." + args[2]).read()), 9)
    except (OSError, ValueError):
        pass
if "run" not in args:
    sys.exit(0)
if "--name" in args:
    with open(os.environ["CALLS"] + "." + args[args.index("--name") + 1], "w") as f:
        f.write(str(os.getpid()))
i = args.index("run") + 1
mounts = {}
while args[i].startswith("-"):
    if args[i] == "-v":
        host, inside, _ = args[i + 1].split(":")
        mounts[inside] = host
    if args[i] == "-e":
        k, v = args[i + 1].split("=", 1)
        os.environ[k] = ",".join(mounts[x] for x in v.split(","))  # what the mount shows inside
    i += 1 if args[i] in ("--rm", "--no-deps", "--use-aliases") else 2
service, rest = args[i], args[i + 1:]
here = os.environ["LOADGEN"]
if service == "drive":
    cmd = [os.environ["PY"], here + "/drive.py", *rest]
elif service == "wrk":
    os.environ["WRK_LOCAL"] = "1"
    cmd = [os.environ["PY"], here + "/wrk_runner.py"]
elif service == "openloop":
    os.environ["PLAN"] = "results/%s/%s" % (os.environ["TESTID"], os.environ["PLAN_FILE"])
    os.environ["OPENLOOP_METRICS_ADDR"] = "off"
    cmd = [os.environ["OPENLOOP"]]
else:
    cmd = [os.environ["GENERATOR_" + service.upper()]]
os.execv(cmd[0], cmd)
'''


@pytest.fixture(scope="module")
def openloop(tmp_path_factory):
    out = tmp_path_factory.mktemp("bin") / "openloop"
    res = subprocess.run(["go", "build", "-o", str(out), "."], cwd=runplan.HERE / "openloop", capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture
def lab(tmp_path, local_catalogue, openloop):
    """The environment make gives lab_run.py, with the fake compose and docker on PATH."""
    catalogue, _ = local_catalogue
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("compose", "docker"):
        (bin_dir / name).write_text(FAKE_COMPOSE)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "COMPOSE": "compose --env-file .env",
            "CALLS": str(tmp_path / "calls"), "PY": sys.executable, "RESULTS": str(tmp_path / "results"),
            "LOADGEN": str(runplan.HERE), "OPENLOOP": str(openloop),
            "CATALOGUE": str(catalogue), "PYTHONDONTWRITEBYTECODE": "1", "GENERATOR": "", "APP_LO_NOTRACK": "0",
            "TRAFFIC": "", "PRECISION": "", "SEED": "3", "WARMUP": "0", "IDLE": "0"}


def lab_run(tmp_path, env, **settings):
    """lab_run.py compose in tmp_path (results/ there): its exit code, output and compose's calls."""
    res = subprocess.run(HOST_PYTHON + [str(LAB_RUN), "compose"], cwd=tmp_path, capture_output=True, text=True,
                         env={**env, **settings}, timeout=120)
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()] if (
        tmp_path / "calls").exists() else []
    return res.returncode, res.stdout + res.stderr, calls


def services(calls):
    """The services compose ran, in order."""
    known = ("drive", "openloop", "wrk", "floor")
    return [next(a for a in c["args"] if a in known) for c in calls if "run" in c["args"]]


def test_a_load_run_leaves_the_plans_requests_in_its_folder(tmp_path, lab):
    """make load: the judge plans, openloop (real) sends the plan at its rate,
    the judge says done; load.json holds every request the plan asked for."""
    rc, out, calls = lab_run(tmp_path, lab, TESTID="c1", MODE="rate", PATHS="tcp-lo,uds-lo", RATE="20",
                             INTERLEAVE="0", ROUNDS="1", DURATION="1")
    assert rc == 0, out
    assert services(calls) == ["drive", "openloop", "drive"]
    run = tmp_path / "results" / "c1"
    plan = json.loads((run / "plan.json").read_text())
    load = json.loads((run / "load.json").read_text())
    rate = plan["settings"]["rate"]
    assert [p["requests"] for p in load["phases"]] == [rate * p["duration_s"] for p in plan["phases"]] == [20, 20]
    assert (run / "compose.json").read_text().strip() == "{}"
    config = next(c["args"] for c in calls if "--format" in c["args"])
    assert "grafana" not in config and config[-2:] == ["openloop", "wrk"]
    started = next(c for c in calls if "openloop" in c["args"] and "run" in c["args"])
    assert started["env"]["PLAN_FILE"] == "plan.json"
    assert started["args"][2:] == ["--profile", "load", "run", "--rm", "--use-aliases", "--name", "uds-lab-c1-openloop",
                                   "--user", f"{os.getuid()}:{os.getgid()}", "openloop"]


def test_precision_runs_its_second_batch_through_the_real_wrk_runner(tmp_path, lab):
    """make max PRECISION: the first batch, then the one more its spread calls
    for (up to MAX_ROUNDS), merged into load.json: 4 rounds of each path."""
    rc, out, calls = lab_run(tmp_path, lab, TESTID="c2", MODE="max", GENERATOR="wrk", PATHS="tcp-lo,uds-lo",
                             ROUNDS="2", DURATION="1", PRECISION="0.01%", MAX_ROUNDS="4", CONNECTIONS="2",
                             WRK_THREADS="1")
    assert rc == 0, out
    assert services(calls) == ["drive", "wrk", "drive", "wrk", "drive"]
    assert [c["env"]["FIRST_ROUND"] for c in calls if c["args"][-1] == "wrk" and "run" in c["args"]] == [None, "3"]
    assert "not met: stopped at MAX_ROUNDS=4" in out
    load = json.loads((tmp_path / "results" / "c2" / "load.json").read_text())
    assert load["settings"]["rounds"] == 4 and sorted(p["round"] for p in load["phases"]) == [1, 1, 2, 2, 3, 3, 4, 4]


def test_a_bad_setting_stops_before_anything_starts(tmp_path, lab):
    rc, out, calls = lab_run(tmp_path, lab, TESTID="c3", MODE="rate", RATE="abc")
    assert (rc, out.strip()) == (2, 'make: RATE="abc": must be a whole number >= 1')
    assert services(calls) == ["drive"] and not (tmp_path / "results" / "c3").exists()


def test_traffic_files_reach_the_judge_alone_read_only_and_a_failed_run_leaves_no_schedule(tmp_path, lab):
    """make load TRAFFIC=: each log mounted read-only into the judge's
    container at /traffic/<k>/<name>, TRAFFIC rewritten to those paths; the
    generator gets none. It fails here (exit 1): the replay's schedule goes."""
    log = runplan.HERE / "testdata" / "traffic" / "combined.log"
    odd = tmp_path / "it's a log"
    odd.write_bytes(log.read_bytes())
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\nexit 1\n")
    failing.chmod(0o755)
    rc, out, calls = lab_run(tmp_path, {**lab, "OPENLOOP": str(failing)}, TESTID="c4", MODE="rate",
                             TRAFFIC=f"{log},{odd}", TRAFFIC_SEND="logged", GENERATOR="openloop")
    assert rc == 1, out
    judge = next(c["args"] for c in calls if "drive" in c["args"])
    assert judge[judge.index("--user") + 2:judge.index("drive")] == [
        "-v", f"{log}:/traffic/0/{log.name}:ro", "-v", f"{odd}:/traffic/1/it_s_a_log:ro",
        "-e", f"TRAFFIC=/traffic/0/{log.name},/traffic/1/it_s_a_log"]
    assert not any("-v" in c["args"] for c in calls if "drive" not in c["args"])
    assert not (tmp_path / "results" / "c4" / "replay.tsv").exists()


def test_floor_brings_its_servers_up_first_and_down_whatever_happens(tmp_path, lab):
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(0o755)
    rc, out, calls = lab_run(tmp_path, {**lab, "GENERATOR_FLOOR": str(failing)}, TESTID="c5", MODE="floor",
                             GENERATOR="floor", ROUNDS="2", FLOOR_DURATION="1")
    assert rc == 3, out
    asked = [" ".join(c["args"][2:]) for c in calls]
    up = asked.index("--profile floor up -d --no-build --wait floor-near floor-far")
    floor = next(i for i, a in enumerate(asked) if a.endswith(" floor") and " run " in f" {a}")
    assert up < floor < asked.index("--profile floor rm -fsv floor-near floor-far")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_removes_its_generator_and_says_what_it_left(tmp_path, lab, sig):
    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nexec sleep 60\n")
    sleeper.chmod(0o755)
    env = {**lab, "TESTID": "c6", "MODE": "rate", "GENERATOR": "openloop",
           "PATHS": "tcp-lo", "INTERLEAVE": "0", "ROUNDS": "1", "DURATION": "1"}
    env["OPENLOOP"] = str(sleeper)  # openloop's container, which Ctrl-C finds running
    # Ctrl-C at its default, as make in a terminal has it: a shell without job
    # control starts its background commands with SIGINT ignored, and so would
    # lab_run.py be (CI's run).
    proc = subprocess.Popen(HOST_PYTHON + [str(LAB_RUN), "compose"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    calls = tmp_path / "calls"
    for _ in range(300):
        if calls.exists() and '"uds-lab-c6-openloop"' in calls.read_text():
            break
        time.sleep(0.1)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert "make: interrupted: uds-lab-c6-openloop stopped and removed; results/c6 holds what the run wrote" in out
    assert any(c["args"] == ["rm", "-f", "uds-lab-c6-openloop"] for c in
               (json.loads(line) for line in calls.read_text().splitlines()))


# Kubernetes (lab_run.py k8s load): helm and kubectl played by one program.
# helm upgrade with load.enabled=true runs the chart's Job here: plan.py with
# the run's settings (the --set ones the judge named over the environment's),
# then one real openloop per pod (OPENLOOP_SEGMENT i/n, OPENLOOP_START_AT the
# start instant, load.json in its log between marker lines); kubectl answers
# for the Job's status, its pods' logs and the release's pods and node.
FAKE_CLUSTER = r'''#!/usr/bin/env python3
import json, os, subprocess, sys
args, job = sys.argv[1:], os.environ["JOB_DIR"]
with open(os.environ["CALLS"], "a") as f:
    f.write(json.dumps({"tool": os.path.basename(sys.argv[0]), "args": args}) + "\n")
if os.path.basename(sys.argv[0]) == "helm":
    sets = dict(a.split("=", 1) for a in args if "=" in a and a.startswith("load."))
    if args[:2] == ["get", "values"]:
        print("{}")
    if sets.get("load.enabled") != "true":
        sys.exit(0)
    names = {"load.firstRound": "FIRST_ROUND", "load.rounds": "ROUNDS", "load.seed": "SEED", "load.paths": "PATHS",
             "load.sweepStep": "SWEEP_STEP", "load.sweepTo": "SWEEP_TO", "load.testid": "TESTID"}
    env = {**os.environ, "RESULTS": job, "GENERATOR": "openloop", "SWEEP": "rate",
           **{names[k]: v.strip("{}") for k, v in sets.items() if k in names}}
    if subprocess.run([os.environ["PY"], os.environ["LOADGEN"] + "/plan.py"], env=env).returncode:
        sys.exit(1)
    pods = int(sets["load.pods"])
    procs = []
    for i in range(pods):
        pod = {**env, "PLAN": "%s/%s/%s" % (job, env["TESTID"], sets.get("load.planFile", "plan.json")),
               "OPENLOOP_SEGMENT": "%d/%d" % (i, pods), "OPENLOOP_LOG_LOAD_JSON": "true",
               "OPENLOOP_METRICS_ADDR": "off"}
        if "load.startAt" in sets:
            pod["OPENLOOP_START_AT"] = sets["load.startAt"]
        procs.append(subprocess.Popen([os.environ["OPENLOOP"]], env=pod, stdout=open("%s/pod-%d.log" % (job, i), "w")))
    rcs = [p.wait() for p in procs]
    json.dump({"succeeded": rcs.count(0), "failed": len(rcs) - rcs.count(0)}, open(job + "/status", "w"))
    sys.exit(0)
if args[0] == "--namespace":
    args = args[2:]
pod = lambda name, component: {"metadata": {"name": name, "labels": {"app.kubernetes.io/component": component}},
                               "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "app:t"},
                                                                         {"name": "nginx", "image": "nginx:t"}]}}
if args[:2] == ["get", "job"] and "-o" in args and args[-1].startswith("jsonpath"):
    print(json.load(open(job + "/status"))[args[-1].split(".")[-1].rstrip("}")])
elif args[:2] == ["get", "job"]:
    print(json.dumps({"spec": {"template": {"spec": {"containers": [{"image": "openloop:t"}]}}}}))
elif args[:2] == ["get", "pods"] and args[-1] == "name":
    print("pod/openloop-" + args[3].rsplit("=", 1)[1])
elif args[:2] == ["get", "pods"]:
    mine = [pod("lab-app-1", "app")] + ([] if "component=app" in args[3] else [pod("lab-openloop-0", "openloop")])
    print(json.dumps({"items": mine}))
elif args[:1] == ["logs"]:
    print(open("%s/pod-%s.log" % (job, args[1].rsplit("-", 1)[1])).read(), end="")
elif args[:1] == ["exec"]:
    print(0)
elif args[:3] == ["get", "node", "n1"]:
    print(json.dumps({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "2"}, "nodeInfo": {
        "kubeletVersion": "v1.37.2", "kernelVersion": "6.1", "osImage": "Debian",
        "containerRuntimeVersion": "containerd"}}}))
'''


@pytest.fixture
def cluster(tmp_path, lab):
    bin_dir = tmp_path / "bin"
    for name in ("helm", "kubectl"):
        (bin_dir / name).write_text(FAKE_CLUSTER)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "job").mkdir()
    return {**lab, "JOB_DIR": str(tmp_path / "job"), "PYTHON": sys.executable, "K8S_START_LEAD": "3"}


def test_k8s_precision_with_two_pods_merges_each_batch_and_runs_the_second(tmp_path, cluster):
    """make k8s-load K8S_PODS=2 with PRECISION: each batch's two pods share
    one start instant and every other request; the judge merges their
    load.json exactly and sizes one more batch (FIRST_ROUND=3), which the
    Job runs from the chart's values; load.json holds every planned request."""
    testid = "k1"
    env = {**cluster, "TESTID": testid, "K8S_PODS": "2", "MODE": "rate", "PATHS": "tcp-lo,uds-lo", "RATE": "20",
           "INTERLEAVE": "0", "ROUNDS": "2", "DURATION": "1", "PRECISION": "0.01%", "MAX_ROUNDS": "3"}
    run, last = runplan.ROOT / "results" / testid, runplan.ROOT / "results" / "last"
    was = last.read_text() if last.exists() else None  # the checkout's last run, put back after
    res = subprocess.run(HOST_PYTHON + [str(LAB_RUN), "k8s", "load"], env=env, capture_output=True, text=True,
                         timeout=120)
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        load = json.loads((run / "load.json").read_text())
        assert [(p["round"], p["requests"]) for p in load["phases"]] == [(1, 20), (1, 20), (2, 20), (2, 20), (3, 20),
                                                                         (3, 20)]
        assert load["segments"]["pods"] == 2 and load["precision"]["met"] is False
        assert "not met: stopped at MAX_ROUNDS=3" in res.stdout
        jobs = [c["args"] for c in map(json.loads, (tmp_path / "calls").read_text().splitlines())
                if c["tool"] == "helm" and "load.enabled=true" in c["args"]]
        assert len(jobs) == 2 and all(any(a.startswith("load.startAt=") for a in j) for j in jobs)
        assert {"load.firstRound=3", "load.rounds=1", "load.planFile=plan-r3.json"} <= set(jobs[1])
        cluster_json = json.loads((run / "cluster.json").read_text())
        assert cluster_json["placement"] == {"app": ["n1"], "openloop": ["n1"]} and cluster_json["kubelet"] == "v1.37.2"
        assert last.read_text().strip() == testid
    finally:
        subprocess.run(["rm", "-rf", str(run)])
        if was is None:
            last.unlink(missing_ok=True)
        else:
            last.write_text(was)


def test_a_stop_from_a_backend_is_one_line_not_a_traceback():
    """The backends raise lab_run.Stop; run as a script, the program must
    catch that class, not its own __main__.Stop (a traceback before)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COMPOSE", "TESTID", "MODE")}
    res = subprocess.run([sys.executable, str(LAB_RUN), "compose"], env=env, capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and res.stderr == "lab_run.py compose: COMPOSE, TESTID, MODE unset (make load sets them)\n"
