#!/usr/bin/env python3
"""`make contract APP_IMAGE=<image>`: checks an app image against the lab's app
contract (README, "Swap in your app") and prints a table: each clause, pass or
fail, and why; for a failed metric, the dashboard panels it leaves empty; for a
failed route, the workloads that cannot run.

The app runs alone, from compose.yaml's own app service (same user, settings,
read-only root and socket volume), in a compose project of its own
(CONTRACT_PROJECT) with a fresh socket volume, so a running lab is untouched.
The checker (contract/checker) runs in that project as nginx's user, one step
at a time; this script starts, kills and stops the app between the steps:

  start     the image's HEALTHCHECK turns healthy (nginx waits for it)
  check     routes on both listeners, health, metrics, socket mode
  others    the socket refuses a user outside nginx's group
  SIGKILL, start, wait   a stale socket does not block a restart
  drain + docker compose stop   requests in flight answered, exit 0, socket removed

Writes results/contract.json. Exit status 1 when a required clause fails.
"""
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STOP_TIMEOUT = 10  # seconds docker compose stop waits before SIGKILL
HEALTHY_WITHIN = 60
OTHER_USER = "65534:65534"  # nobody: neither the app's user nor nginx's group


class Lab:
    """docker compose, in the contract's own project."""

    def __init__(self, compose, project):
        self.base = shlex.split(compose) + ["-p", project, "--profile", "contract"]

    def compose(self, *args, check=True, **kw):
        return subprocess.run(self.base + list(args), check=check, text=True, **kw)

    def checker(self, step, user=None):
        """Runs one checker step; returns its clauses."""
        extra = ["--user", user] if user else []
        out = self.compose("run", "--rm", "--no-deps", "-T", *extra, "contract", step,
                           stdout=subprocess.PIPE).stdout
        return parse(out)

    def container(self):
        return self.compose("ps", "-a", "-q", "app", stdout=subprocess.PIPE).stdout.strip()


def parse(out):
    """The clauses among a checker step's JSON lines (drain also says "inflight")."""
    rows = (json.loads(line) for line in out.splitlines() if line.startswith("{"))
    return [r for r in rows if "clause" in r]


def inspect(ref, fmt):
    return subprocess.run(["docker", "inspect", "-f", fmt, ref], check=True, text=True,
                          stdout=subprocess.PIPE).stdout.strip()


def clause(name, ok, why, required=True):
    return {"clause": name, "required": required, "pass": bool(ok), "why": why}


def healthy(lab, image):
    """The image's own HEALTHCHECK: nginx starts only once the app is healthy."""
    name = "image HEALTHCHECK turns healthy"
    if inspect(image, "{{json .Config.Healthcheck}}") in ("null", "", "{}"):
        return clause(name, False, "the image has no HEALTHCHECK: nginx waits for a healthy app, so make up would fail")
    cid, start = lab.container(), time.monotonic()
    while time.monotonic() - start < HEALTHY_WITHIN:
        status = inspect(cid, "{{if .State.Health}}{{.State.Health.Status}}{{end}} {{.State.Status}}")
        if status.startswith("healthy"):
            return clause(name, True, f"healthy {time.monotonic() - start:.1f} s after start")
        if "exited" in status or status.startswith("unhealthy"):
            break
        time.sleep(0.5)
    logs = lab.compose("logs", "--tail=5", "app", check=False, stdout=subprocess.PIPE).stdout.strip()
    return clause(name, False, f"{status or 'no status'} after {time.monotonic() - start:.0f} s; last logs: {logs}")


def drain(lab):
    """Slow requests in flight on both listeners, then docker compose stop."""
    proc = subprocess.Popen(lab.base + ["run", "--rm", "--no-deps", "-T", "contract", "drain"],
                            stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if '"inflight"' in line:
            break
    cid, start = lab.container(), time.monotonic()
    lab.compose("stop", "-t", str(STOP_TIMEOUT), "app", stderr=subprocess.DEVNULL)
    took = time.monotonic() - start
    code = int(inspect(cid, "{{.State.ExitCode}}"))
    rest = proc.stdout.read()
    proc.wait()
    ok = code == 0 and took < STOP_TIMEOUT
    why = f"exit code {code} {took:.1f} s after SIGTERM"
    if took >= STOP_TIMEOUT:
        why += f": did not exit within {STOP_TIMEOUT} s and was killed"
    return parse(rest) + [clause(f"SIGTERM: exits 0 within {STOP_TIMEOUT} s", ok, why)]


def run_contract(lab, image):
    lab.compose("down", "-v", "--remove-orphans", stderr=subprocess.DEVNULL)
    lab.compose("up", "-d", "--no-build", "app")
    clauses = [healthy(lab, image)]
    clauses += lab.checker("check")
    clauses += lab.checker("others", user=OTHER_USER)
    # A killed app leaves its socket file behind; the next start must cope.
    lab.compose("kill", "-s", "SIGKILL", "app", stderr=subprocess.DEVNULL)
    lab.compose("start", "app", stderr=subprocess.DEVNULL)
    clauses += lab.checker("wait")
    clauses += drain(lab)
    return clauses


def render(image, clauses):
    """The table, what failing clauses mean for the lab, and the verdict."""
    width = max(len(c["clause"]) for c in clauses)
    lines = [f"Contract check of {image}", "",
             f"  {'result':<6}  {'clause':<{width}}  why"]
    for c in clauses:
        result = "pass" if c["pass"] else ("FAIL" if c["required"] else "fail")
        lines.append(f"  {result:<6}  {c['clause']:<{width}}  {c['why']}")
    failed = [c for c in clauses if not c["pass"]]
    panels = [(c["clause"], p) for c in failed for p in c.get("panels") or []]
    if panels:
        lines += ["", "Dashboard panels this image leaves empty:"]
        lines += [f"  {p}  ({name})" for name, p in panels]
    workloads = sorted(c["workload"] for c in failed if c.get("workload"))
    if workloads:
        lines += ["", "Workloads (SCENARIO=) this image cannot run: " + ", ".join(workloads)]
    req = [c for c in clauses if c["required"]]
    opt = [c for c in clauses if not c["required"]]
    ok = all(c["pass"] for c in req)
    lines += ["", f"Required: {sum(c['pass'] for c in req)} of {len(req)} pass. "
              f"Optional: {sum(c['pass'] for c in opt)} of {len(opt)} pass (FAIL: required, fail: optional).",
              f"{image} {'keeps' if ok else 'breaks'} the contract."]
    return "\n".join(lines), ok


def main():
    image = os.environ.get("APP_IMAGE") or "uds-lab/app:local"
    project = os.environ.get("CONTRACT_PROJECT", "uds-lab-contract")
    lab = Lab(os.environ.get("COMPOSE", "docker compose"), project)
    try:
        clauses = run_contract(lab, image)
    finally:
        lab.compose("down", "-v", "--remove-orphans", check=False,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text, ok = render(image, clauses)
    print(text)
    out = ROOT / "results" / "contract.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"image": image, "ok": ok, "clauses": clauses}, indent=1) + "\n")
    print(f"Clauses as JSON: {out.relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
