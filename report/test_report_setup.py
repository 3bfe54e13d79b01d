"""What the report says the run ran on: compose's limits and images, the
stack that ran and its stack.env, the server cores' time by mode (pinned,
unpinned, shared with the generator), connection tracking and loopback's,
and a Kubernetes run's placement of its pods."""

import pytest

from report import context, markdown, queries
from report.testkit import CLUSTER, COMPOSE, build, fake_query, make_k6, server_table


# ---------------------------------------------------------------- compose, images and the stack


def test_compose_info_accepts_list_environment():
    comp = {"services": {"nginx": {"image": "nginx:x", "environment": ["A=1", "NGINX_WORKER_PROCESSES=2"]}}}
    info = context.compose_info(comp)
    assert info["limits"]["nginx"]["worker_processes"] == "2"
    assert info["limits"]["app"] == {"cpus": None, "cpuset": None, "mem_limit": None}
    assert context.compose_info(None)["images"] == {}


def test_images_are_of_the_services_the_run_used():
    services = {n: {"image": f"img/{n}"} for n in ("app", "nginx", "k6", "wrk", "cadvisor", "node-exporter", "floor",
                                                   "floor-near", "prometheus")}
    got = context.compose_info({"services": services}, "wrk", {"cadvisor": False, "node-exporter": True})["images"]
    assert sorted(got) == ["app", "nginx", "node-exporter", "prometheus", "wrk"]
    k6 = make_k6(paths=("tcp", "uds"), rounds=2)
    assert context.ran(k6, fake_query({'up{job="cadvisor"}': 0, 'up{job="node"}': 1})) == {
        "cadvisor": False, "node-exporter": True}


def test_the_stack_that_ran_is_make_ups_label_and_its_facts_its_stack_env(tmp_path):
    from report import lab
    assert lab.stack_of("node", "uds-lab-standin/stack-node:1") == "node"  # make up STACK=node, a stand-in image
    assert lab.stack_of("", None) == lab.stack_of("", "uds-lab/app:local") == lab.stack_of("", "uds-lab/app:e2e-apps") == "go"
    assert lab.stack_of("", "uds-lab/apps:local") is None
    assert lab.stack_of("", "me/app:1") is None  # an app the lab does not ship
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "stack.env").write_text(
        "# a comment\nSTACK_ABOUT=my stack, closes connections # a note\nSTACK_LACKS=cpu,sleep\nSTACK_POOLS=false\n"
        "STACK_POOLS_WITH=MY_MODE=keep\nAPP_IMAGE=me/stack:1\nAPP_PROTOCOL=fastcgi\n")
    s = lab.read_stacks(tmp_path)
    assert s["mine"] == {"dir": "stacks/mine", "about": "my stack, closes connections", "protocol": "fastcgi",
                         "lacks": ["cpu", "sleep"], "pools": False, "pools_with": {"MY_MODE": "keep"},
                         "image": "me/stack:1"}
    assert s["go"]["pools"] and list(s) == ["go", "mine"]
    # The repository's own folders, each a stack.
    assert set(lab.STACKS) == {"go"} | {f.parent.name for f in (lab.ROOT / "stacks").glob("*/stack.env")} >= {
        "go", "php-fpm", "gunicorn", "node"}
    assert not lab.pools("gunicorn") and lab.pools("gunicorn", {"GUNICORN_WORKER_CLASS": "gthread"}.get)


# ---------------------------------------------------------------- server cores by mode


def test_server_cores_are_nginx_and_the_apps_when_both_are_pinned_apart_from_the_generator():
    lim = lambda nginx, app, gen="": {"nginx": {"cpuset": nginx}, "app": {"cpuset": app}, "k6": {"cpuset": gen}}  # noqa: E731
    assert queries.server_cores(lim("0", "1-2", "3")) == ([0, 1, 2], None)
    assert queries.server_cores(lim("0", "0")) == ([0], None)
    assert queries.server_cores(lim("0", "")) == (None, queries.UNPINNED)
    cores, why = queries.server_cores(lim("0,1", "1", "1"))
    assert cores is None and "the load generator shares the server cores (LOADGEN_CPUSET)" in why
    # Every generator of catalogue.json's list, oha too (it once went unwarned).
    for gen in ("wrk", "oha"):
        cores, why = queries.server_cores({"nginx": {"cpuset": "0"}, "app": {"cpuset": "0"}, gen: {"cpuset": "0"}})
        assert cores is None and "shares the server cores" in why, gen


def test_the_cores_time_by_mode_per_request_with_its_resolution():
    pinned = {"services": {**COMPOSE["services"], "app": {**COMPOSE["services"]["app"], "cpuset": "1"},
                           "k6": {**COMPOSE["services"]["k6"], "cpuset": "2,3"}}}
    k6 = make_k6(paths=("tcp-lo", "uds-lo"), rounds=2, duration=10)  # 1000 requests a phase
    modes = {("node_cpu_seconds_total", 'cpu=~"0|1"', f'mode="{m}"'): v
             for m, v in (("user", 0.05), ("system", 0.03), ("softirq", 0.02), ("irq", None))}
    rep = build(k6, server_table(k6, modes), pinned)
    assert rep["server_cores"] == {"cores": [0, 1], "missing": None}
    ph = rep["phases"][0]
    assert ph["figures"]["core_user_us_per_req"] == pytest.approx(50)
    assert ph["figures"]["core_softirq_us_per_req"] == pytest.approx(20)
    assert ph["figures"]["core_irq_us_per_req"] is None and "core_irq_us_per_req" in ph["missing"]
    # 0.03 s is 3 ticks of 10 ms, each a sample: uncertain by sqrt(3) ticks, over 1000 requests.
    assert ph["resolution"]["core_system_us_per_req"] == pytest.approx(10 * 3 ** 0.5)
    assert ph["resolution"]["core_user_us_per_req"] == pytest.approx(10 * 5 ** 0.5)
    md = markdown.render_markdown(rep)
    assert "The server cores' time by mode (cores 0,1:" in md
    assert "| tcp-lo | 50.0 | 30.0 | 20.0 | n/a" in md
    assert "server cores' softirq per request (µs)" in md  # a breakdown column, pinned


def test_unpinned_cores_say_why_once_and_raise_no_warning():
    k6 = make_k6(paths=("tcp-lo", "uds-lo"), rounds=2)
    rep = build(k6)
    assert rep["server_cores"]["missing"] == queries.UNPINNED
    md = markdown.render_markdown(rep)
    assert f"The server cores' time by mode is not given: {queries.UNPINNED}." in md
    assert "server cores" not in " ".join(w["message"] for w in rep["warnings"])
    assert "softirq per request" not in md  # no breakdown column of n/a


# ---------------------------------------------------------------- connection tracking and placement


def test_conntrack_entries_fill_and_a_table_near_full():
    k6 = make_k6(paths=("tcp-lo", "uds-lo"), rounds=2, duration=10)
    table = server_table(k6, {"app_netns_conntrack_entries_limit": 1000, "app_netns_conntrack_entries{": 850,
                              "app_netns_conntrack_drops_total": 0})
    rep = build(k6, table)
    ph = rep["phases"][0]
    assert (ph["figures"]["conntrack_entries"], ph["figures"]["conntrack_drops"]) == (850, 0)
    assert ph["figures"]["conntrack_fill"] == pytest.approx(0.85)
    md = markdown.render_markdown(rep)
    assert "Entries at the end of a phase, at most: tcp-lo 850, uds-lo 850; the table at most 85% full; 0 connections" in md
    (w,) = [w for w in rep["warnings"] if w["kind"] == "conntrack_full"]
    assert "reached 85% of its limit" in w["message"] and len(w["phases"]) == 4


def test_no_conntrack_series_is_neither_a_line_nor_a_warning():
    rep = build(make_k6(paths=("tcp-lo", "uds-lo"), rounds=2))
    assert "Connection tracking" not in markdown.render_markdown(rep)
    assert not [w for w in rep["warnings"] if "conntrack" in w["message"]]


def test_the_report_says_whether_loopback_was_tracked():
    k6 = make_k6(paths=("tcp-lo", "uds-lo"), rounds=2)
    assert "Loopback in the app's network namespace: tracked, as Docker sets it up" in markdown.render_markdown(build(k6))
    off = {"services": {**COMPOSE["services"],
                        "app": {**COMPOSE["services"]["app"], "labels": {"uds-lab.lo-notrack": "1"}}}}
    rep = build(k6, compose=off)
    assert rep["compose"]["lo_notrack"] == "1"
    assert "not tracked (APP_LO_NOTRACK=1" in markdown.render_markdown(rep)


@pytest.mark.parametrize("placement, says", [
    ({"app": ["n1"], "nginx": ["n1"], "openloop": ["n1"]},
     "Placement: nginx and the app on one node (`n1`): the `tcp` path crosses the pod network inside that node, "
     "not a wire between nodes; the generator on `n1` (beside the app: its CPU is taken from the app's node)"),
    ({"app": ["n1"], "nginx": ["n2"], "openloop": ["n3", "n4"], "prometheus": ["n3"]},
     "Placement: nginx and the app on different nodes (nginx on `n2`, the app on `n1`): the `tcp` path crosses "
     "the network between them; the generator on `n3`, `n4`"),
    ({"app": ["n1"], "nginx": ["n2"], "openloop": ["n1", "n2"]},
     "nginx and the app on different nodes (nginx on `n2`, the app on `n1`): the `tcp` path crosses the network "
     "between them; the generator on `n1`, `n2` (beside the app"),
    ({"app": ["n1"]}, "Placement: n/a (cluster.json names no node of the app's pod or nginx's)"),
])
def test_a_kubernetes_run_says_whether_tcp_crossed_nodes(placement, says):
    """cluster.json's placement (scripts/k8s.sh: each pod's node by
    component): the report's where-it-ran lines say whether the nginx of the
    tcp path ran on the app's node, and where the generator ran."""
    md = "\n".join(markdown.cluster_lines({**CLUSTER, "placement": placement}, None))
    assert says in md
    # A cluster.json from before the placement was recorded: no line.
    old = {k: v for k, v in CLUSTER.items() if k != "placement"}
    assert "Placement" not in "\n".join(markdown.cluster_lines(old, None))
