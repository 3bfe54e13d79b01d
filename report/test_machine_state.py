"""The machine's line (report/machine_state.py) in every report cli writes:
make report's, a sweep's, a floor's, and make compare's from report.json;
from a machine.json of known fields, and "not recorded" for a run folder
from before machine.json (never a crash)."""
import json

from report import cli, compare, machine_state, markdown
from report.test_floor import floor_doc
from report.testkit import build, fake_query, make_k6, server_table
from report.test_sweep import sweep_run

# A KVM guest with the haltpoll driver and governor, as loadgen/machine.py writes it.
GUEST = {
    "read_from": "the host", "kernel": "6.1.0-28-cloud-amd64",
    "virtualisation": {"virtual_machine": True, "systemd_detect_virt": "kvm", "hypervisor_flag": True,
                       "dmi_vendor": "QEMU", "dmi_product": "Standard PC (Q35 + ICH9, 2009)"},
    "cpuidle": {"driver": "haltpoll", "governor": "haltpoll"},
    "halt_polling": {"guest_halt_poll_ns": 200000, "kvm_halt_poll_ns": None},
    "cpu": {"model": "AMD EPYC 7B13", "count": 2}, "nginx": "nginx/1.30.4",
    "app_keepalive": {"measured": "tcp closed by the app after 5.00 s idle; unix closed by the app after 5.00 s idle",
                      "image": "uds-lab/stack-uvicorn:t1"},
}
GUEST_LINE = (
    "Machine (read from the host at the run's start): kernel 6.1.0-28-cloud-amd64; a virtual machine (kvm, "
    "systemd-detect-virt), DMI `QEMU Standard PC (Q35 + ICH9, 2009)`; cpuidle driver haltpoll, governor haltpoll; "
    "halt-polling: an idle core polls up to 200,000 ns before it halts (haltpoll's guest_halt_poll_ns), "
    "kvm.halt_poll_ns not readable here; CPU AMD EPYC 7B13 x 2; nginx/1.30.4; "
    "the app's idle keep-alive "
    "timeout (make contract of `uds-lab/stack-uvicorn:t1`): tcp closed by the app after 5.00 s idle; unix closed "
    "by the app after 5.00 s idle")
NOT_RECORDED = "Machine: " + machine_state.NOT_RECORDED


def test_each_field_is_said_as_read_and_what_a_pod_cannot_read_says_so():
    assert machine_state.line(GUEST) == GUEST_LINE
    bare = {"read_from": "the app pod's nginx container", "kernel": "6.12.9", "virtualisation": {
        "systemd_detect_virt": None, "hypervisor_flag": False}, "cpuidle": {"driver": "intel_idle", "governor": None},
        "halt_polling": {}, "cpu": {}, "nginx": None, "app_keepalive": {"measured": None,
                                                                         "why": "not measured (run make contract)"}}
    assert machine_state.line(bare) == (
        "Machine (read from the app pod's nginx container at the run's start): kernel 6.12.9; no hypervisor flag "
        "(bare metal, or a hypervisor that hides it), DMI not readable from a pod; cpuidle driver intel_idle, governor not readable from a pod; "
        "halt-polling: haltpoll's guest_halt_poll_ns not readable from a pod, kvm.halt_poll_ns not readable from a "
        "pod; CPU not readable from a pod; nginx's version not readable from a pod; the app's idle keep-alive timeout: not "
        "measured (run make contract)")
    assert machine_state.line({"virtualisation": {"systemd_detect_virt": "none"}}).count(
        "not a virtual machine (systemd-detect-virt)") == 1


def load_run(tmp_path, name, doc, machine=None):
    run = tmp_path / name
    run.mkdir()
    (run / name.split("-")[0].replace("floor", "floor.json").replace("load", "load.json")).write_text(json.dumps(doc))
    if machine is not None:
        (run / "machine.json").write_text(machine if isinstance(machine, str) else json.dumps(machine))
    return run


def test_make_report_says_the_machine_and_an_older_run_says_not_recorded(tmp_path):
    k6 = make_k6(paths=("tcp", "uds"), rounds=2)
    run = load_run(tmp_path, "load-new", k6, GUEST)
    rep = cli.run("load-new", "http://127.0.0.1:1", tmp_path, query=fake_query(server_table(k6)), margin_pct=5.0)
    settings = (run / "report.md").read_text().split("## Machine, versions, settings")[1].split("##")[0]
    assert "- " + GUEST_LINE + "\n" in settings
    assert json.loads((run / "report.json").read_text())["machine_state"] == rep["machine_state"] == GUEST
    # A run folder from before machine.json: its report.json has no machine_state either.
    assert machine_state.read(tmp_path) is None
    assert f"- {NOT_RECORDED}\n" in markdown.render_markdown(build(k6))
    (run / "machine.json").write_text("{")
    assert machine_state.line(machine_state.read(run)) == (
        f"Machine: not readable ({run}/machine.json: Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1))")


def test_a_sweep_a_floor_and_compare_say_it_too(tmp_path):
    load_run(tmp_path, "load-sweep", sweep_run(), GUEST)
    cli.run("load-sweep", "http://127.0.0.1:1", tmp_path, query=fake_query({}))
    assert GUEST_LINE + ".\n" in (tmp_path / "load-sweep" / "report.md").read_text()
    load_run(tmp_path, "floor-1", floor_doc())
    cli.run("floor-1", "http://127.0.0.1:1", tmp_path)
    assert f"- {NOT_RECORDED}\n" in (tmp_path / "floor-1" / "report.md").read_text()
    reports = {"go": {"testid": "a", "settings": {"generator": "openloop"}, "warnings": [], "phases": [], "workloads": {},
                      "machine_state": GUEST},
               "php-fpm": {"testid": "b", "settings": {"generator": "openloop"}, "warnings": [], "phases": [], "workloads": {}}}
    md = compare.render(compare.compare(reports))
    assert f"- go: `results/a/report.md`, load from openloop (0 warnings); {GUEST_LINE}\n" in md
    assert f"- php-fpm: `results/b/report.md`, load from openloop (0 warnings); {NOT_RECORDED}\n" in md
