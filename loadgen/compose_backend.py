"""lab_run.py's Compose backend: each generator a one-off container of
compose.yaml's service (its CPU set, network namespace and limits), the
judge (drive.py) one in the report's image with no network, and what only
the host can do: the settings the run ran with (compose.json), make floor's
servers, APP_LO_NOTRACK's rules and TRAFFIC's files.

From make: COMPOSE, TESTID, MODE, GENERATOR and the settings settings.toml
marks for the host (APP_LO_NOTRACK, TRAFFIC); the rest of the run's settings
reach the containers from the environment, as compose passes them on."""
import os
import re
import shlex
import subprocess
from pathlib import Path

import machine
from lab_run import Stop
from plan import REPLAY_FILE

BUILD_S = 1800  # building the generators' and the report's images
JUDGE_S = 600  # one call of drive.py: a plan, a merge and a judge
UP_S = 600  # make floor's servers, APP_LO_NOTRACK's services, healthy
STOP_S = 60  # removing a container
SLACK_S = 600  # a generator's time past its plan's length (start, the last scrape)


def traffic_mounts(traffic):
    """make load TRAFFIC=<your access logs, a comma list>: each file read-only
    into the judge's container alone (/traffic/<k>/<its name>), which writes
    the replay's schedule (loadgen/replay.py), and TRAFFIC there naming them;
    nothing else of a log reaches a container. compose run's arguments."""
    args, inside = [], []
    for f in (x for x in traffic.split(",") if x):
        if not os.path.isfile(f) or not os.access(f, os.R_OK):
            raise Stop(f"make: TRAFFIC: {f}: no such readable file", 2)
        name = f"/traffic/{len(inside)}/" + re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(f))
        args += ["-v", f"{os.path.realpath(f)}:{name}:ro"]
        inside.append(name)
    return args + ["-e", "TRAFFIC=" + ",".join(inside)] if inside else []


def generator_timeout(length_s):
    """A generator's run may take its plan's length, half again and SLACK_S."""
    return int(1.5 * (length_s or 3600)) + SLACK_S


class Compose:
    def __init__(self, compose, testid, mode, generator, env):
        self.compose = shlex.split(compose)
        self.testid = testid
        self.mode = mode
        self.run_dir = Path("results") / testid
        self.env = {**env, "TESTID": testid, "MODE": mode, "GENERATOR": generator}
        self.user = f"{os.getuid()}:{os.getgid()}"
        self.traffic = traffic_mounts(env.get("TRAFFIC", ""))
        self.built = self.floor_up = False
        self.running = None  # the generator's container, while it runs

    @classmethod
    def from_env(cls, env=os.environ):
        missing = [k for k in ("COMPOSE", "TESTID", "MODE") if not env.get(k)]
        if missing:
            raise Stop(f"lab_run.py compose: {', '.join(missing)} unset (make load sets them)", 2)
        return cls(env["COMPOSE"], env["TESTID"], env["MODE"], env.get("GENERATOR", ""), dict(env))

    def sh(self, args, timeout, what, **kw):
        """compose with args; its exit code, or Stop naming what ran past its timeout."""
        try:
            return subprocess.run(self.compose + args, env=kw.pop("env", self.env), timeout=timeout, **kw).returncode
        except subprocess.TimeoutExpired:
            raise Stop(f"make: {what}: not done after {timeout} s", 2)

    def build(self):
        for profile, services in (("load", ["openloop", "wrk"]), ("report", ["report"])):
            if self.sh(["--profile", profile, "build", *services], BUILD_S, "building " + " ".join(services),
                       stdout=subprocess.DEVNULL):
                raise Stop(f"make: building {' '.join(services)} failed (above)", 2)
        self.built = True

    def judge(self, last_rc):
        """drive.py in the report's image, TRAFFIC's files mounted into it alone."""
        if not self.built:
            self.build()
        args = ["--profile", "load", "run", "--rm", "--no-deps", "--user", self.user, *self.traffic,
                "drive", "--run", self.testid, "--results", "results", "--last-rc", str(last_rc)]
        rc = self.sh(args, JUDGE_S, "loadgen/drive.py")
        if rc != 0 and self.run_dir.is_dir() and not any(self.run_dir.iterdir()):
            self.run_dir.rmdir()
        return rc

    def prepare(self):
        """Before the first generator: the settings the run ran with, the machine (machine.py), then what the run
        needs up."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.record_settings()
        machine.write(self.run_dir, machine.on_compose(self.compose, self.env, self.run_dir))
        if self.mode == "floor":
            self.floor_servers()
        if self.env.get("APP_LO_NOTRACK") == "1":
            self.notrack()

    def record_settings(self):
        """compose.json: images, limits, CPU sets; no secrets (every service but Grafana)."""
        profiles = ["--profile", "load", "--profile", "floor"]
        try:
            out = subprocess.run(self.compose + profiles + ["config", "--services"], env=self.env, timeout=JUDGE_S,
                                 capture_output=True, text=True, check=True).stdout
            services = [s for s in out.split() if s != "grafana"]
            with open(self.run_dir / "compose.json", "w") as f:
                subprocess.run(self.compose + profiles + ["config", "--format", "json", *services], env=self.env,
                               timeout=JUDGE_S, stdout=f, check=True)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            raise Stop(f"make: compose.json: docker compose config failed ({e})", 2)

    def floor_servers(self):
        """make floor: the two echo servers up (healthy: both listeners answer); close() takes them down."""
        self.sh(["--profile", "floor", "build", "floor-near"], BUILD_S, "building floor-near",
                stdout=subprocess.DEVNULL)
        self.floor_up = True
        if self.sh(["--profile", "floor", "up", "-d", "--no-build", "--wait", "floor-near", "floor-far"], UP_S,
                   "make floor's servers"):
            raise Stop("make: make floor's servers did not start (above)", 2)

    def notrack(self):
        """APP_LO_NOTRACK=1 (services/notrack): the app as its settings say
        first (compose recreates it, and its network namespace, when one
        changed, as the generator's start would), then the rules."""
        log = self.run_dir / "notrack.log"
        with open(log, "w") as f:
            ok = self.sh(["up", "-d", "--no-build", "--wait", "app", "nginx", "nginx-lo"], UP_S, "APP_LO_NOTRACK",
                         stdout=f, stderr=subprocess.STDOUT) == 0
            env = {**self.env, "COMPOSE": shlex.join(self.compose)}
            ok = ok and subprocess.run(["scripts/up.sh", "notrack"], env=env, stdout=f, stderr=subprocess.STDOUT,
                                       timeout=UP_S).returncode == 0
        if not ok:
            raise Stop(f"make: APP_LO_NOTRACK=1 could not be applied ({log} says why)", 2)

    def start(self, service, settings, length_s):
        """The generator drive.py named, with its settings; its exit code."""
        self.running = f"uds-lab-{self.testid}-{service}"
        args = {
            "floor": ["--profile", "floor", "run", "--rm", "--no-deps"],
            # Prometheus scrapes it by its service name, which run gives only with --use-aliases.
            "openloop": ["--profile", "load", "run", "--rm", "--use-aliases"],
        }.get(service, ["--profile", "load", "run", "--rm"])
        timeout = generator_timeout(length_s)
        try:
            rc = subprocess.run(self.compose + args + ["--name", self.running, "--user", self.user, service],
                                env={**self.env, **settings}, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            self.remove_generator()
            raise Stop(f"make: {service} ran past {timeout} s (its plan: about {length_s} s): stopped", 1)
        self.running = None
        return rc

    def remove_generator(self):
        if self.running:
            subprocess.run(["docker", "rm", "-f", self.running], capture_output=True, timeout=STOP_S)

    def interrupt(self):
        """Ctrl-C: the generator's container removed; what the run left."""
        name = self.running
        self.remove_generator()
        gone = f"{name} stopped and removed; " if name else ""
        return f"{gone}{self.run_dir} holds what the run wrote before (no load.json: make report keeps the last run)"

    def close(self):
        # The replay's schedule holds your paths (TRAFFIC_SEND=logged): drive.py
        # deletes it when the run is done, this when the run stops before.
        (self.run_dir / REPLAY_FILE).unlink(missing_ok=True)
        if self.floor_up:
            self.sh(["--profile", "floor", "rm", "-fsv", "floor-near", "floor-far"], UP_S,
                    "removing make floor's servers", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
