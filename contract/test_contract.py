"""Tests of contract/contract.py without Docker: the command lines it runs and
in which order, reading the checker's lines, the healthcheck's verdicts, the
table, the exit codes. Docker is played by FakeDocker (in-process) or by a fake
`docker` on PATH (the script end to end); `make e2e` runs it for real."""
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("uds_lab_contract", HERE / "contract.py")
ct = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ct)

BASE = ["docker", "compose", "-p", "p", "--profile", "contract"]


def line(name, ok=True, required=True, **kw):
    return json.dumps({"clause": name, "required": required, "pass": ok, "why": "w", **kw})


class FakeDocker:
    """Answers each command by the first rule each of whose words is part of
    one of its arguments, and records the commands."""

    def __init__(self, rules):
        self.rules, self.calls, self.envs = rules, [], []

    def answer(self, cmd):
        self.calls.append(cmd)
        for words, out, *rc in self.rules:
            if all(any(w in arg for arg in cmd) for w in words.split()):
                return out, (rc or [0])[0]
        return "", 0

    def run(self, cmd, check=False, **kw):
        self.envs.append(kw.get("env"))
        out, rc = self.answer(cmd)
        if check and rc:
            raise subprocess.CalledProcessError(rc, cmd)
        return subprocess.CompletedProcess(cmd, rc, stdout=out)

    def popen(self, cmd, **kw):
        self.envs.append(kw.get("env"))
        out, _ = self.answer(cmd)
        return type("Proc", (), {"stdout": io.StringIO(out), "wait": lambda self: 0})()

    def lab(self, environ=None):
        return ct.Lab("docker compose", "p", run=self.run, popen=self.popen, sleep=lambda s: None,
                      environ=environ or {})


HC = '{"Test":["CMD","/app","healthcheck"]}'
CONFIG = json.dumps({"services": {"contract": {"image": "uds-lab/contract:local", "environment": {
    "CONTRACT_TCP": "app:8080", "CONTRACT_SOCKET": "/sock/app.sock", "APP_PROTOCOL": "http", "ENDPOINT": None}}}})


def pit(name, status="pass", **kw):
    return json.dumps({"clause": name, "required": False, "pass": status in ("pass", "info"), "why": "w",
                       "pitfall": True, "status": status, **kw})


def good_rules(healthcheck=HC):
    return [
        ("ps -a -q app", "cid\n"),
        ("inspect .Config.Healthcheck", healthcheck),
        ("inspect .State.Health", "healthy running"),
        ("inspect .State.ExitCode", "0"),
        ("contract check", line(ct.SERVES) + "\n" + line("route /cpu/1", False, False, workload="cpu",
                                                          effect="SCENARIO=cpu cannot run") + "\n"),
        ("config --format json", CONFIG),
        ("inspect .Config.User", "10001:101"),
        ("contract pitfalls", pit("listen backlog of each listener") + "\n" + pit("client address", "WARN", fix="f") + "\n"),
        ("contract envelope", pit("failure envelope (net.core.somaxconn 16)", "info") + "\n"),
        ("contract others", line("socket: refused to other users") + "\n"),
        ("contract wait", line("restart over a stale socket") + "\n"),
        ("contract drain", '{"event":"inflight"}\n' + line("SIGTERM: requests in flight answered, socket removed",
                                                           required=False) + "\n"),
    ]


def test_parse_keeps_clauses_only():
    out = '{"event":"inflight"}\nnoise\n{"clause":"a","required":true,"pass":true,"why":"ok"}\n'
    assert ct.parse(out) == [{"clause": "a", "required": True, "pass": True, "why": "ok"}]


def test_the_steps_in_order_with_their_command_lines():
    d = FakeDocker(good_rules())
    clauses = ct.run_contract(d.lab())
    assert d.calls[0] == BASE + ["down", "-v", "--remove-orphans"]
    assert d.calls[1] == BASE + ["up", "-d", "--no-build", "app"]
    assert d.envs[1] is None, "the app starts at the namespace's own somaxconn where APP_SOMAXCONN is empty"
    steps = [c[:2] + c[-1:] if c[:2] == ["docker", "run"] else c for c in d.calls
             if (c[:len(BASE)] == BASE and c[len(BASE)] in ("run", "kill", "start", "stop", "up"))
             or c[:2] == ["docker", "run"]]
    assert steps == [
        BASE + ["up", "-d", "--no-build", "app"],
        BASE + ["run", "--rm", "--no-deps", "-T", "contract", "check"],
        ["docker", "run", "pitfalls"],
        BASE + ["run", "--rm", "--no-deps", "-T", "--user", "65534:65534", "contract", "others"],
        BASE + ["kill", "-s", "SIGKILL", "app"],
        BASE + ["start", "app"],
        BASE + ["run", "--rm", "--no-deps", "-T", "contract", "wait"],
        BASE + ["run", "--rm", "--no-deps", "-T", "contract", "drain"],
        BASE + ["stop", "-t", "10", "app"],
        BASE + ["up", "-d", "--no-build", "app"],
        BASE + ["run", "--rm", "--no-deps", "-T", "contract", "wait"],
        ["docker", "run", "envelope"],
    ]
    # The envelope's app: contract/somaxconn.yaml after compose.yaml, at 16.
    low = d.envs[d.calls.index(BASE + ["up", "-d", "--no-build", "app"], 2)]
    assert low["APP_SOMAXCONN"] == "16"
    assert low["COMPOSE_FILE"] == f"{ct.ROOT / 'compose.yaml'}:{ct.OVERLAY}"
    assert ["docker", "inspect", "-f", "{{.State.ExitCode}}", "cid"] in d.calls
    names = [c["clause"] for c in clauses]
    assert names == [ct.HEALTHY, ct.SERVES, "route /cpu/1", "listen backlog of each listener", "client address",
                     "socket: refused to other users", "restart over a stale socket",
                     "SIGTERM: requests in flight answered, socket removed", "SIGTERM: exits 0 within 10 s",
                     "failure envelope (net.core.somaxconn 16)"]
    assert all(c["pass"] for c in clauses if c["required"])


def test_an_app_that_does_not_serve_stops_after_the_check():
    rules = good_rules()
    rules[4] = ("contract check", line(ct.SERVES, ok=False) + "\n")
    d = FakeDocker(rules)
    clauses = ct.run_contract(d.lab())
    assert not any("others" in c or "SIGKILL" in c or "drain" in c for c in d.calls)
    assert [c["clause"] for c in clauses] == [ct.HEALTHY, ct.SERVES]


def test_no_healthcheck_is_optional():
    for config in ("null", "", '{"Test":["NONE"]}', "{}"):
        c = ct.healthy(FakeDocker(good_rules(healthcheck=config)).lab(), "cid")
        assert not c["pass"] and not c["required"] and c["effect"] == ct.NO_HEALTHCHECK, config


def test_a_healthcheck_must_turn_healthy():
    c = ct.healthy(FakeDocker(good_rules()).lab(), "cid")
    assert c["pass"] and c["required"] and "/app healthcheck" in c["why"]
    rules = [("inspect .State.Health", "unhealthy running")] + good_rules()
    c = ct.healthy(FakeDocker(rules).lab(), "cid")
    assert not c["pass"] and c["required"] and "make up would fail" in c["why"]


def test_a_slow_or_failed_stop_is_optional():
    rules = [("inspect .State.ExitCode", "137")] + good_rules()
    c = ct.drain(FakeDocker(rules).lab())[-1]
    assert c["clause"] == "SIGTERM: exits 0 within 10 s" and not c["pass"] and not c["required"]
    assert "exit code 137" in c["why"] and c["effect"] == ct.STOP_COST


def test_render_two_tables_panels_workloads_and_verdict():
    clauses = [
        ct.clause(ct.SERVES, True, "200 on both"),
        ct.clause("metric app_netns_tcp_sockets", False, "absent", required=False, effect="panels left empty")
        | {"panels": ["paths / TIME_WAIT"]},
        ct.clause("route /cpu/1", False, "404", required=False, effect="SCENARIO=cpu cannot run") | {"workload": "cpu"},
        ct.clause(ct.HEALTHY, False, "none", required=False, effect=ct.NO_HEALTHCHECK),
    ]
    text, ok = ct.render("me/app:1", clauses)
    assert ok
    req, opt = text.index("Required (the lab"), text.index("Optional (what")
    assert req < text.index("  pass     " + ct.SERVES) < opt < text.index("  missing  metric app_netns")
    assert "Panels left empty:\n  paths / TIME_WAIT  (metric app_netns_tcp_sockets: absent)" in text
    assert "cannot run: cpu" in text
    assert f"Also missing:\n  {ct.HEALTHY}: {ct.NO_HEALTHCHECK}" in text
    assert "Required: 1 of 1 pass. Optional: 0 of 3 pass." in text
    assert text.endswith("me/app:1 keeps the contract.")


def test_a_failed_required_clause_breaks_the_contract():
    text, ok = ct.render("x", [ct.clause("socket: refused to other users", False, "connected")])
    assert not ok
    assert "  FAIL     socket: refused" in text and "x breaks the contract." in text


def test_main_exit_codes_and_json(tmp_path, capsys):
    out = tmp_path / "r" / "contract.json"
    env = {"APP_IMAGE": "me/app:1", "CONTRACT_OUT": str(out), "APP_SOMAXCONN": ""}
    assert ct.main(env, FakeDocker(good_rules()).lab()) == 0
    got = json.loads(out.read_text())
    assert got["image"] == "me/app:1" and got["ok"] and len(got["clauses"]) == 10

    rules = [("contract others", line("socket: refused to other users", ok=False) + "\n")] + good_rules()
    d = FakeDocker(rules)
    assert ct.main(env, d.lab()) == 1
    assert not json.loads(out.read_text())["ok"]
    assert d.calls[-1] == BASE + ["down", "-v", "--remove-orphans"], "the project is removed at the end"

    d = FakeDocker([("up -d", "", 1)] + good_rules())
    assert ct.main(env, d.lab()) == 2
    assert "`docker compose -p p --profile contract up -d --no-build app` failed (exit 1)" in capsys.readouterr().err
    assert d.calls[-1] == BASE + ["down", "-v", "--remove-orphans"]


FAKE_DOCKER = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
clause = lambda name: json.dumps({"clause": name, "required": True, "pass": True, "why": "w"})
joined = " ".join(args)
if "ps -a -q app" in joined: print("cid")
elif ".Config.Healthcheck" in joined: print("null")
elif ".State.ExitCode" in joined: print("0")
elif ".Config.User" in joined: print("10001:101")
elif "config --format json" in joined: print(json.dumps({"services": {"contract": {"image": "c:1", "environment": {}}}}))
elif args[:2] == ["run", "--rm"] and args[-1] in ("pitfalls", "envelope"): print(json.dumps({"clause": args[-1], "required": False, "pass": True, "why": "w", "pitfall": True, "status": "pass"}))
elif joined.endswith("contract check"): print(clause("serves on the TCP port and on the socket"))
elif joined.endswith("contract others"): print(clause("socket: refused to other users"))
elif joined.endswith("contract wait"): print(clause("restart over a stale socket"))
elif joined.endswith("contract drain"): print('{"event":"inflight"}')
'''


def test_the_script_end_to_end_with_a_fake_docker(tmp_path):
    """As make runs it: COMPOSE and CONTRACT_PROJECT from the environment, an
    image with no healthcheck and no metrics keeps the contract."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker"
    fake.write_text(FAKE_DOCKER)
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(tmp_path / "log"),
           "COMPOSE": "docker compose", "CONTRACT_PROJECT": "lab-contract", "APP_IMAGE": "plain:1",
           "CONTRACT_OUT": str(tmp_path / "contract.json"), "APP_SOMAXCONN": "64"}
    r = subprocess.run([sys.executable, str(HERE / "contract.py")], env=env, text=True, capture_output=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "plain:1 keeps the contract." in r.stdout
    calls = [json.loads(x) for x in (tmp_path / "log").read_text().splitlines()]
    assert calls[0] == ["compose", "-p", "lab-contract", "--profile", "contract", "down", "-v", "--remove-orphans"]
    assert ["compose", "-p", "lab-contract", "--profile", "contract", "run", "--rm", "--no-deps", "-T",
            "--user", "65534:65534", "contract", "others"] in calls
    assert "Socket pitfalls" in r.stdout and "Pitfalls: 2 pass." in r.stdout
    # As the app runs in the pitfalls step: its namespaces, its user, loopback.
    ns = next(c for c in calls if c[-1] == "pitfalls")
    assert ns[:2] == ["run", "--rm"] and ns[-2] == "c:1"
    for flag, value in [("--network", "container:cid"), ("--pid", "container:cid"), ("--user", "10001:101"),
                        ("-e", "CONTRACT_TCP=127.0.0.1:8080"), ("--volumes-from", "cid:ro")]:
        assert any(ns[i:i + 2] == [flag, value] for i in range(len(ns))), (flag, value, ns)


def test_app_somaxconn_is_checked_first(capsys):
    for bad in ("abc", "0", "65536", "-1", "1.5"):
        d = FakeDocker(good_rules())
        assert ct.main({"APP_SOMAXCONN": bad}, d.lab()) == 2, bad
        assert f'APP_SOMAXCONN="{bad}": must be a whole number from 1 to 65535' in capsys.readouterr().err
        assert d.calls == [], "nothing runs with a bad setting"
    assert ct.somaxconn_setting({}, dotenv=lambda name: " 128 ") == "128"
    assert ct.somaxconn_setting({"APP_SOMAXCONN": ""}, dotenv=lambda name: "9") == ""


def test_app_somaxconn_set_adds_the_overlay_to_the_compose_files_in_use():
    d = FakeDocker(good_rules())
    lab = d.lab({"COMPOSE_FILE": "/l/compose.yaml:/l/testbed.yaml"})
    lab.set_somaxconn("512")
    ct.run_contract(lab)
    first = d.envs[d.calls.index(BASE + ["up", "-d", "--no-build", "app"])]
    assert first["APP_SOMAXCONN"] == "512" and first["COMPOSE_FILE"] == f"/l/compose.yaml:/l/testbed.yaml:{ct.OVERLAY}"
    # After the envelope (at 16) the project is removed as it was started.
    assert lab.somaxconn == "512" and lab.env["APP_SOMAXCONN"] == "512"


def test_an_engine_that_refuses_the_sysctl_is_said_in_a_row():
    rules = [("up -d", "Error response from daemon: open /proc/sys/net/core/somaxconn: no such file or directory", 1)]
    d = FakeDocker(rules + good_rules())
    lab = d.lab()
    lab.set_somaxconn("")
    rows = ct.envelope(lab)
    assert len(rows) == 1 and rows[0]["status"] == "n/a" and rows[0]["pitfall"] and not rows[0]["required"]
    assert "refused net.core.somaxconn=16" in rows[0]["why"] and "/proc/sys/net/core/somaxconn" in rows[0]["why"]
    assert lab.env is None, "back to the app's own setting"


def test_a_pitfalls_step_that_cannot_run_is_a_row_not_a_broken_contract():
    rules = [("contract pitfalls", "", 125)] + good_rules()
    clauses = ct.run_contract(FakeDocker(rules).lab())
    row = next(c for c in clauses if c["clause"] == ct.PITFALLS)
    assert row["status"] == "n/a" and "failed (exit 125)" in row["why"]
    text, ok = ct.render("x", clauses)
    assert ok


def test_render_pitfalls_apart_with_their_fix():
    clauses = [ct.clause(ct.SERVES, True, "200 on both"),
               json.loads(pit("listen backlog of each listener", why="tcp :8080 4096")),
               json.loads(pit("client address: the same over both listeners", "WARN", fix="trust X-Real-IP")),
               json.loads(pit("failure envelope", "info"))]
    text, ok = ct.render("me/app:1", clauses)
    assert ok
    assert text.index("Required (") < text.index("Socket pitfalls (") < text.index("Required: 1 of 1 pass.")
    assert "  WARN     client address: the same over both listeners\n           w\n           fix: trust X-Real-IP" in text
    assert "Pitfalls: 1 WARN, 1 info, 1 pass." in text
    assert "Optional: 0 of 0 pass." in text, "pitfalls are not optional clauses"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_a_panel_two_missing_metrics_feed_is_listed_once():
    clauses = [ct.clause(ct.SERVES, True, "200 on both")] + [
        ct.clause(f"metric {m}", False, "absent", required=False, effect="panels left empty")
        | {"panels": ["paths / App CPU per request"]}
        for m in ("process_cpu_seconds_total", "app_process_cpu_seconds_total")]
    text, _ = ct.render("me/app:1", clauses)
    assert text.count("paths / App CPU per request") == 1
    assert ("  paths / App CPU per request  (metric process_cpu_seconds_total: absent; "
            "metric app_process_cpu_seconds_total: absent)") in text


def test_nginx_keepalive_timeout_is_read_from_the_config():
    conf = """
    # upstream old { keepalive 2; keepalive_timeout 5s; }
    upstream plain { server ${APP_TCP_UPSTREAM}; }
    upstream a { server ${APP_TCP_UPSTREAM}; keepalive ${NGINX_UPSTREAM_KEEPALIVE}; keepalive_timeout 1m30s; }
    upstream b {
        server unix:${APP_UNIX_SOCKET};
        keepalive 4;  # keepalive_timeout 3s;
        keepalive_timeout 90;
    }
    """
    assert ct.nginx_keepalive_timeout(conf) == 90
    assert ct.nginx_keepalive_timeout("upstream a { server x; keepalive 4; }") == 60, "nginx's default"
    assert ct.nginx_keepalive_timeout("upstream a { server x; keepalive_timeout 5s; }") is None, "not pooled"
    assert ct.nginx_keepalive_timeout("upstream a { keepalive 4; keepalive_timeout 500ms; }") == 0.5
    with pytest.raises(ct.SettingError, match=r"t.conf: the pooled upstreams' keepalive_timeout differ \(a 60 s, b 5 s\)"):
        ct.nginx_keepalive_timeout("upstream a { keepalive 4; } upstream b { keepalive 4; keepalive_timeout 5s; }", "t.conf")
    with pytest.raises(ct.SettingError, match="upstream a: keepalive_timeout 5x"):
        ct.nginx_keepalive_timeout("upstream a { keepalive 4; keepalive_timeout 5x; }")
    # The lab's own: 60 s (docs/design.md), passed to the pitfalls step.
    assert ct.pooled_settings({}) == {"CONTRACT_NGINX_KEEPALIVE_TIMEOUT": "60000ms"}


def test_contract_idle_wait_is_checked_first_and_reaches_the_pitfalls_step(capsys):
    for bad in ("abc", "0s", "11m", "-1s", "65"):
        d = FakeDocker(good_rules())
        assert ct.main({"CONTRACT_IDLE_WAIT": bad, "APP_SOMAXCONN": ""}, d.lab()) == 2, bad
        assert f'CONTRACT_IDLE_WAIT="{bad}": must be a duration such as 65s' in capsys.readouterr().err
        assert d.calls == [], "nothing runs with a bad setting"
    d = FakeDocker(good_rules())
    lab = d.lab()
    lab.pooled.update(ct.pooled_settings({"CONTRACT_IDLE_WAIT": "1m5s"}))
    ct.run_contract(lab)
    ns = next(c for c in d.calls if c[:2] == ["docker", "run"] and c[-1] == "pitfalls")
    for value in ("CONTRACT_IDLE_WAIT=1m5s", "CONTRACT_NGINX_KEEPALIVE_TIMEOUT=60000ms"):
        assert any(ns[i:i + 2] == ["-e", value] for i in range(len(ns))), (value, ns)
