#!/usr/bin/env python3
"""`make contract APP_IMAGE=<image>`: checks an app image against the lab's app
contract (docs/your-app.md, "The app and its contract") and prints two tables: the
required clauses (pass or FAIL, and why) and the optional ones (pass or
missing, and what that costs: the dashboard panels left empty, the workloads
that cannot run).

The app runs alone, from compose.yaml's own app service (same user, settings,
read-only root and socket volume), in a compose project of its own
(CONTRACT_PROJECT) with a fresh socket volume, so a running lab is untouched.
The checker (contract/checker) runs in that project as nginx's user, one step
at a time; this script starts, kills and stops the app between the steps:

  start     if the container has a healthcheck (its image's or compose's),
            it turns healthy: nginx waits for it
  check     serves (HTTP or FastCGI) on both listeners, socket mode; optional: health,
            routes, metrics
  others    the socket refuses a user outside nginx's group
  SIGKILL, start, wait   a stale socket does not block a restart
  pitfalls  the socket pitfalls (docker run in the app's network and PID
            namespaces, as the app's user): each listener's backlog, the
            client's address over both, the workers' share, the pooled
            path's (the app's idle keep-alive timeout against nginx's
            upstream keepalive_timeout, read from the lab's nginx template;
            connections left in CLOSE_WAIT), the failure envelope at the
            app's net.core.somaxconn (APP_SOMAXCONN)
  drain + docker compose stop   optional: requests in flight answered, exit 0,
            socket removed
  up at somaxconn 16, wait, envelope   the failure envelope at a low backlog:
            where the socket refuses (nginx's 502) and TCP queues

The pitfalls are a third table, never required: each row says what was
measured and, where it fails, the fix in a line. net.core.somaxconn is set
only through contract/somaxconn.yaml, added to COMPOSE_FILE where a value is
asked for (APP_SOMAXCONN, and 16 for the envelope): compose.yaml sets no
sysctl, which a rootless engine on an older kernel would refuse.

Writes results/contract.json (CONTRACT_OUT). Exit status 0 when every required
clause passes, 1 when one fails, 2 when the check could not run or a setting
is wrong.
"""
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from contract_render import render
from contract_settings import (  # noqa: F401 (contract's names, as its tests take them)
    NGINX_TEMPLATE, SettingError, idle_wait_setting, nginx_keepalive_timeout, nginx_time, pooled_settings,
    read_dotenv, somaxconn_setting)

ROOT = Path(__file__).resolve().parent.parent
STOP_TIMEOUT = 10  # seconds docker compose stop waits before SIGKILL
HEALTHY_WITHIN = 60
OTHER_USER = "65534:65534"  # nobody: neither the app's user nor nginx's group
SERVES = "serves on the TCP port and on the socket"  # the checker's first clause
HEALTHY = "image HEALTHCHECK turns healthy"
NO_HEALTHCHECK = "nothing: the lab takes the app as ready when its port and its socket answer"
STOP_COST = "a stop cuts requests in flight; make down waits for SIGKILL"
OVERLAY = ROOT / "contract" / "somaxconn.yaml"  # the app's net.core.somaxconn
LOW_SOMAXCONN = 16  # the failure envelope's, low enough to show the socket refusing
PITFALLS = "socket pitfalls"


class Lab:
    """docker compose, in the contract's own project. run and popen are
    subprocess's, or a test's stand-ins."""

    def __init__(self, compose, project, run=subprocess.run, popen=subprocess.Popen, sleep=time.sleep, environ=None,
                 pooled=None):
        self.base = shlex.split(compose) + ["-p", project, "--profile", "contract"]
        self.run, self.popen, self.sleep = run, popen, sleep
        self.environ = dict(os.environ if environ is None else environ)
        self.env = None  # compose's environment: None, this process's
        self.somaxconn = ""
        # The pooled rows' settings for the pitfalls step (main sets them).
        self.pooled = dict(pooled or {})

    def set_somaxconn(self, value):
        """The app's net.core.somaxconn from its next start: contract/somaxconn.yaml
        after the compose files in use, with APP_SOMAXCONN; '' leaves it out."""
        self.somaxconn = value
        if not value:
            self.env = None
            return
        files = (self.environ.get("COMPOSE_FILE") or str(ROOT / "compose.yaml")).split(
            self.environ.get("COMPOSE_PATH_SEPARATOR") or os.pathsep)
        self.env = {**self.environ, "APP_SOMAXCONN": value,
                    "COMPOSE_FILE": (self.environ.get("COMPOSE_PATH_SEPARATOR") or os.pathsep).join(files + [str(OVERLAY)])}

    def compose(self, *args, check=True, **kw):
        if self.env is not None:
            kw.setdefault("env", self.env)
        return self.run(self.base + list(args), check=check, text=True, **kw)

    def checker_cmd(self, step, user=None):
        extra = ["--user", user] if user else []
        return self.base + ["run", "--rm", "--no-deps", "-T", *extra, "contract", step]

    def checker(self, step, user=None):
        """Runs one checker step; returns its clauses."""
        out = self.run(self.checker_cmd(step, user), check=True, text=True, stdout=subprocess.PIPE,
                       **({"env": self.env} if self.env is not None else {})).stdout
        return parse(out)

    def ns_checker(self, step):
        """Runs one checker step in the app's network and PID namespaces as
        the app's user (docker run: compose cannot join a PID namespace), with
        the contract service's settings, reaching the TCP port on loopback."""
        cid = self.container()
        user = self.inspect(cid, "{{.Config.User}}")
        config = json.loads(self.compose("config", "--format", "json", stdout=subprocess.PIPE).stdout)
        svc = config["services"]["contract"]
        env = {k: v for k, v in (svc.get("environment") or {}).items() if v is not None}
        env["CONTRACT_TCP"] = "127.0.0.1:" + env.get("CONTRACT_TCP", "app:8080").rpartition(":")[2]
        env.update(self.pooled)
        cmd = ["docker", "run", "--rm", "--network", f"container:{cid}", "--pid", f"container:{cid}",
               "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true",
               "--volumes-from", f"{cid}:ro"]
        if user:
            cmd += ["--user", user]
        for k in sorted(env):
            cmd += ["-e", f"{k}={env[k]}"]
        cmd += [svc["image"], step]
        return parse(self.run(cmd, check=True, text=True, stdout=subprocess.PIPE).stdout)

    def container(self):
        return self.compose("ps", "-a", "-q", "app", stdout=subprocess.PIPE).stdout.strip()

    def inspect(self, ref, fmt):
        return self.run(["docker", "inspect", "-f", fmt, ref], check=True, text=True,
                        stdout=subprocess.PIPE).stdout.strip()


def parse(out):
    """The clauses among a checker step's JSON lines (drain also says "inflight")."""
    rows = (json.loads(line) for line in out.splitlines() if line.startswith("{"))
    return [r for r in rows if "clause" in r]


def clause(name, ok, why, required=True, effect=None):
    c = {"clause": name, "required": required, "pass": bool(ok), "why": why}
    if effect:
        c["effect"] = effect
    return c


def healthcheck_test(config_json):
    """The container's healthcheck command (from .Config.Healthcheck), or None."""
    hc = json.loads(config_json or "null") or {}
    test = hc.get("Test") or []
    return None if not test or test[0] == "NONE" else test


def healthy(lab, cid):
    """Where the container has a healthcheck (its image's, or one compose
    gives it), nginx starts only once it is healthy: then it is required.
    Without one the lab decides readiness itself, and this is optional."""
    test = healthcheck_test(lab.inspect(cid, "{{json .Config.Healthcheck}}"))
    if test is None:
        return clause(HEALTHY, False, "no healthcheck in the image or from compose", required=False,
                      effect=NO_HEALTHCHECK)
    start, status = time.monotonic(), ""
    while time.monotonic() - start < HEALTHY_WITHIN:
        status = lab.inspect(cid, "{{if .State.Health}}{{.State.Health.Status}}{{end}} {{.State.Status}}")
        if status.startswith("healthy"):
            return clause(HEALTHY, True, f"{shlex.join(test)}: healthy {time.monotonic() - start:.1f} s after start")
        if "exited" in status or status.startswith("unhealthy"):
            break
        lab.sleep(0.5)
    logs = lab.compose("logs", "--tail=5", "app", check=False, stdout=subprocess.PIPE).stdout.strip()
    return clause(HEALTHY, False, f"{shlex.join(test)}: {status or 'no status'} after "
                  f"{time.monotonic() - start:.0f} s; nginx waits for it, so make up would fail; last logs: {logs}")


def pitfall_row(name, status, why):
    """A pitfall row the driver writes itself (a step that could not run)."""
    return {"clause": name, "required": False, "pass": status in ("pass", "info"), "why": why,
            "pitfall": True, "status": status}


def pitfalls(lab, step):
    try:
        return lab.ns_checker(step)
    except subprocess.CalledProcessError as e:
        return [pitfall_row(PITFALLS, "n/a", f"`{shlex.join(e.cmd[:2] + ['...', e.cmd[-1]])}` in the app's "
                            f"network and PID namespaces failed (exit {e.returncode}): not measured")]


def envelope(lab):
    """The failure envelope at a low somaxconn: the app (stopped) starts again
    with it, serves, and the bursts run."""
    before = lab.somaxconn
    lab.set_somaxconn(str(LOW_SOMAXCONN))
    try:
        r = lab.compose("up", "-d", "--no-build", "app", check=False, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT)
        if r.returncode != 0:
            last = (r.stdout or "").strip().splitlines()[-1:] or ["no message"]
            return [pitfall_row(f"failure envelope (net.core.somaxconn {LOW_SOMAXCONN})", "n/a",
                                f"the engine refused net.core.somaxconn={LOW_SOMAXCONN} for the app: {last[0]} "
                                "(a rootless engine on a kernel older than about 6.3 exports no net.core sysctl in a container)")]
        lab.checker("wait")
        return pitfalls(lab, "envelope")
    finally:
        lab.set_somaxconn(before)


def drain(lab):
    """Slow requests in flight on both listeners, then docker compose stop."""
    proc = lab.popen(lab.checker_cmd("drain"), stdout=subprocess.PIPE, text=True,
                     **({"env": lab.env} if lab.env is not None else {}))
    for line in proc.stdout:
        if '"inflight"' in line:
            break
    cid, start = lab.container(), time.monotonic()
    lab.compose("stop", "-t", str(STOP_TIMEOUT), "app", stderr=subprocess.DEVNULL)
    took = time.monotonic() - start
    code = int(lab.inspect(cid, "{{.State.ExitCode}}"))
    rest = proc.stdout.read()
    proc.wait()
    ok = code == 0 and took < STOP_TIMEOUT
    why = f"exit code {code} {took:.1f} s after SIGTERM"
    if took >= STOP_TIMEOUT:
        why += f": did not exit within {STOP_TIMEOUT} s and was killed"
    return parse(rest) + [clause(f"SIGTERM: exits 0 within {STOP_TIMEOUT} s", ok, why,
                                 required=False, effect=STOP_COST)]


def run_contract(lab):
    lab.compose("down", "-v", "--remove-orphans", stderr=subprocess.DEVNULL)
    lab.compose("up", "-d", "--no-build", "app")
    clauses = [healthy(lab, lab.container())]
    checked = lab.checker("check")
    clauses += checked
    if not any(c["clause"] == SERVES and c["pass"] for c in checked):
        return clauses  # it does not serve: the other steps would only repeat that
    clauses += pitfalls(lab, "pitfalls")
    clauses += lab.checker("others", user=OTHER_USER)
    # A killed app leaves its socket file behind; the next start must cope.
    lab.compose("kill", "-s", "SIGKILL", "app", stderr=subprocess.DEVNULL)
    lab.compose("start", "app", stderr=subprocess.DEVNULL)
    clauses += lab.checker("wait")
    clauses += drain(lab)
    clauses += envelope(lab)
    return clauses


def main(environ=os.environ, lab=None):
    image = environ.get("APP_IMAGE") or "uds-lab/app:" + (environ.get("LAB_IMAGE_TAG") or read_dotenv("LAB_IMAGE_TAG"))
    try:
        somaxconn = somaxconn_setting(environ)
        pooled = pooled_settings(environ)
    except SettingError as e:
        print(f"contract: {e}", file=sys.stderr)
        return 2
    lab = lab or Lab(environ.get("COMPOSE", "docker compose"), environ.get("CONTRACT_PROJECT", "uds-lab-contract"),
                     environ=environ)
    lab.set_somaxconn(somaxconn)
    lab.pooled.update(pooled)
    out = Path(environ.get("CONTRACT_OUT") or ROOT / "results" / "contract.json")
    try:
        clauses = run_contract(lab)
    except subprocess.CalledProcessError as e:
        cmd = shlex.join(e.cmd) if isinstance(e.cmd, list) else e.cmd
        print(f"contract: `{cmd}` failed (exit {e.returncode}): the check could not run", file=sys.stderr)
        return 2
    finally:
        lab.compose("down", "-v", "--remove-orphans", check=False,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text, ok = render(image, clauses)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"image": image, "ok": ok, "clauses": clauses}, indent=1) + "\n")
    print(f"Clauses as JSON: {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
