"""machine.json (loadgen/machine.py): PROBE, the real sh script, pointed at a
fake /proc and /sys written here, must give exactly the fields written, and
None for each file that is not there; the keep-alive row is read from a
contract.json in the checker's own words, for the same image only."""
import json
import os
import subprocess
from pathlib import Path

import machine

CPUINFO_CPU = "processor\t: {i}\nvendor_id\t: X\nmodel name\t: {model}\nflags\t\t: fpu vme{flags} sse2\n\n"


def fake_root(tmp_path, files):
    for rel, text in files.items():
        f = tmp_path / rel.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return str(tmp_path)


def cpuinfo(n, model, hypervisor):
    return "".join(CPUINFO_CPU.format(i=i, model=model, flags=" hypervisor" if hypervisor else "") for i in range(n))


def test_a_kvm_guest_with_haltpoll(tmp_path):
    root = fake_root(tmp_path, {
        "/proc/sys/kernel/osrelease": "6.1.0-28-cloud-amd64\n",
        "/proc/cpuinfo": cpuinfo(2, "AMD EPYC 7B13", True),
        "/sys/class/dmi/id/sys_vendor": "QEMU\n",
        "/sys/class/dmi/id/product_name": "Standard PC (Q35 + ICH9, 2009)\n",
        "/sys/devices/system/cpu/cpuidle/current_driver": "haltpoll\n",
        # no current_governor: a kernel without cpuidle_sysfs_switch has the read-only one alone
        "/sys/devices/system/cpu/cpuidle/current_governor_ro": "haltpoll\n",
        "/sys/module/haltpoll/parameters/guest_halt_poll_ns": "200000\n",
    })
    got = machine.state(machine.probe(root), "host", "nginx/1.30.4", {"measured": None, "why": "w"})
    assert got == {
        "read_from": "the host", "kernel": "6.1.0-28-cloud-amd64",
        "virtualisation": {"virtual_machine": True, "systemd_detect_virt": None, "hypervisor_flag": True,
                           "dmi_vendor": "QEMU", "dmi_product": "Standard PC (Q35 + ICH9, 2009)"},
        "cpuidle": {"driver": "haltpoll", "governor": "haltpoll"},
        "halt_polling": {"guest_halt_poll_ns": 200000, "kvm_halt_poll_ns": None},
        "cpu": {"model": "AMD EPYC 7B13", "count": 2},
        "nginx": "nginx/1.30.4", "app_keepalive": {"measured": None, "why": "w"},
    }


def test_a_bare_machine_with_intel_idle_and_menu(tmp_path):
    root = fake_root(tmp_path, {
        "/proc/sys/kernel/osrelease": "6.12.9-amd64\n",
        "/proc/cpuinfo": cpuinfo(4, "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", False),
        "/sys/class/dmi/id/sys_vendor": "Dell Inc.\n",
        "/sys/class/dmi/id/product_name": "PowerEdge R650\n",
        "/sys/devices/system/cpu/cpuidle/current_driver": "intel_idle\n",
        "/sys/devices/system/cpu/cpuidle/current_governor": "menu\n",
        "/sys/devices/system/cpu/cpuidle/current_governor_ro": "ladder\n",  # the writable one is read first
        "/sys/module/kvm/parameters/halt_poll_ns": "200000\n",
    })
    got = machine.state(machine.probe(root), "host", None, None)
    # No hypervisor flag: bare metal, or a hypervisor that hides it: not a verdict of its own.
    assert got["virtualisation"] == {"virtual_machine": None, "systemd_detect_virt": None, "hypervisor_flag": False,
                                     "dmi_vendor": "Dell Inc.", "dmi_product": "PowerEdge R650"}
    assert got["cpuidle"] == {"driver": "intel_idle", "governor": "menu"}
    assert got["halt_polling"] == {"guest_halt_poll_ns": None, "kvm_halt_poll_ns": 200000}
    assert got["cpu"] == {"model": "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "count": 4}
    assert got["kernel"] == "6.12.9-amd64"


def test_a_machine_with_no_cpuidle_reads_none_not_a_guess(tmp_path):
    root = fake_root(tmp_path, {
        "/proc/sys/kernel/osrelease": "6.6.0-arm64\n",
        # arm64's cpuinfo: no model name, no flags line (Features instead)
        "/proc/cpuinfo": "processor\t: 0\nFeatures\t: fp asimd\n\nprocessor\t: 1\nFeatures\t: fp asimd\n\n",
    })
    got = machine.state(machine.probe(root), "pod", None, None)
    assert got["read_from"] == "the app pod's nginx container"
    assert got["virtualisation"] == {"virtual_machine": None, "systemd_detect_virt": None, "hypervisor_flag": None,
                                     "dmi_vendor": None, "dmi_product": None}
    assert got["cpuidle"] == {"driver": None, "governor": None}
    assert got["halt_polling"] == {"guest_halt_poll_ns": None, "kvm_halt_poll_ns": None}
    assert got["cpu"] == {"model": None, "count": 2}
    assert machine.probe(str(tmp_path / "nothing")) == dict.fromkeys(machine.KEYS)


def test_in_a_pod_the_probe_asks_nginx_its_version(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nginx").write_text("#!/bin/sh\necho 'nginx version: nginx/1.29.8' >&2\n")
    (bin_dir / "nginx").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    raw = machine.probe(str(tmp_path), "pod", lambda argv: subprocess.run(argv, env=env, capture_output=True,
                                                                          text=True, timeout=10).stdout)
    assert raw["nginx"] == "nginx version: nginx/1.29.8"
    assert machine.nginx_version(raw["nginx"]) == "nginx/1.29.8"
    assert machine.nginx_version("OCI runtime exec failed: container not running") is None


def contract(tmp_path, image, why):
    rows = [{"clause": "serves on the TCP port and on the socket", "why": "tcp: closed by the app after 1.00 s idle"},
            {"clause": "keep-alive: the app's idle timeout against nginx's upstream keepalive_timeout", "why": why}]
    p = tmp_path / "contract.json"
    p.write_text(json.dumps({"image": image, "ok": True, "clauses": rows}))
    return p


def test_the_keepalive_row_is_the_contracts_for_the_same_image_only(tmp_path):
    why = ("one request on a kept connection, then idle until the app closes it (at most CONTRACT_IDLE_WAIT=1m5s): "
           "tcp: closed by the app after 5.00 s idle; unix: not kept (the app closes each connection with its "
           "response); nginx keeps an idle upstream connection 60.00 s (keepalive_timeout in the lab's nginx config)")
    p = contract(tmp_path, "uds-lab/stack-uvicorn:t1", why)
    assert machine.keepalive("uds-lab/stack-uvicorn:t1", p) == {
        "measured": "tcp closed by the app after 5.00 s idle; unix not kept (the app closes each connection with its "
                    "response)", "image": "uds-lab/stack-uvicorn:t1"}
    assert machine.keepalive("uds-lab/app:t1", p)["why"].startswith("not measured for this app's image")
    assert machine.keepalive("uds-lab/app:t1", tmp_path / "none.json") == {
        "measured": None, "why": "not measured (run make contract)"}
    assert machine.keepalive("a", contract(tmp_path, "a", "the checker said nothing measured"))["measured"] is None


def test_the_rows_words_are_the_checkers():
    """LISTENER_IDLE reads judgeIdle's words: the checker must still write them."""
    src = (Path(machine.__file__).parent.parent / "contract" / "checker" / "pooled.go").read_text()
    for words in ('"%s: closed by the app after %s idle"', '"%s: still open after %s idle"',
                  '": not kept (the app closes each connection with its response)"', '"keep-alive: the app'):
        assert words in src


# `docker compose` as Compose.prepare calls it: its config (the services, then
# compose.json) and nginx -V in the nginx container.
FAKE_COMPOSE = """#!/bin/sh
case "$*" in
  *"config --services"*) echo app ;;
  *"config --format json"*) echo '{"services": {"app": {"image": "img:1"}}}' ;;
  "exec -T nginx nginx -V") printf 'nginx version: nginx/1.30.4\\nbuilt by gcc\\n' >&2 ;;
  *) exit 1 ;;
esac
"""


def test_a_compose_run_writes_machine_json_when_it_starts(tmp_path, monkeypatch):
    """Compose.prepare (the real backend, compose played by FAKE_COMPOSE):
    machine.json beside compose.json, nginx's version from its container, the
    keep-alive row of make contract's run on compose.json's app image."""
    import compose_backend
    monkeypatch.chdir(tmp_path)
    fake = tmp_path / "compose"
    fake.write_text(FAKE_COMPOSE)
    fake.chmod(0o755)
    (tmp_path / "results").mkdir()
    contract(tmp_path / "results", "img:1", "x: tcp: still open after 10.00 s idle; unix: still open after 10.00 s idle")
    compose_backend.Compose(str(fake), "t1", "rate", "openloop", {"PATH": os.environ["PATH"]}).prepare()
    got = json.loads((tmp_path / "results" / "t1" / "machine.json").read_text())
    assert got["nginx"] == "nginx/1.30.4" and got["read_from"] == "the host"
    assert got["app_keepalive"] == {"measured": "tcp still open after 10.00 s idle; unix still open after 10.00 s idle",
                                    "image": "img:1"}


class FakeCluster:
    """k8s_backend.Cluster's two calls on_kubernetes makes: the app pods, and
    kubectl, which answers an exec with what the pod's probe printed."""

    def __init__(self, said, pods=True):
        self.said, self.calls = said, []
        self.items = [{"metadata": {"name": "lab-app-7"}, "spec": {"containers": [
            {"name": "nginx", "image": "nginx:1.30.4"}, {"name": "app", "image": "img:2"}]}}] if pods else []

    def pods(self, selector):
        self.calls.append(("pods", selector))
        return self.items

    def kubectl(self, *args, **kw):
        self.calls.append(args)
        if isinstance(self.said, Exception):
            raise self.said
        return self.said


def test_on_kubernetes_reads_the_app_pods_nginx_container_and_says_where(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    k = FakeCluster("kernel=6.8.0-1015-gcp\ncpuidle_driver=haltpoll\nhypervisor=yes\nnginx=nginx version: nginx/1.30.4\n")
    got = machine.on_kubernetes(k, "lab")
    assert k.calls == [("pods", "app.kubernetes.io/instance=lab,app.kubernetes.io/component=app"),
                       ("exec", "lab-app-7", "-c", "nginx", "--", "sh", "-c", machine.PROBE, "probe", "", "pod")]
    assert got["read_from"] == "the app pod's nginx container" and got["kernel"] == "6.8.0-1015-gcp"
    assert got["nginx"] == "nginx/1.30.4" and got["cpuidle"] == {"driver": "haltpoll", "governor": None}
    assert got["virtualisation"]["virtual_machine"] is True
    assert got["app_keepalive"] == {"measured": None, "why": "not measured (run make contract)"}
    # No app pod, or kubectl that does not answer: every field None, the run goes on.
    for k in (FakeCluster("", pods=False), FakeCluster(machine.Stop("k8s: kubectl exec: no answer after 20 s", 2))):
        got = machine.on_kubernetes(k, "lab")
        assert got["kernel"] is None and got["nginx"] is None and got["cpu"] == {"model": None, "count": None}
