"""machine.json: the machine a run's figures came from, written when the run
starts (the backends' prepare). The pooled socket's cost measured here is a
wake-up cost of idle cores, which depends on the machine: whether it is a
virtual machine, its cpuidle driver and governor, halt-polling.

Read for what each field is, and None where it cannot be read (the report
says so), never guessed: the kernel, virtualisation (systemd-detect-virt
--vm on the host, the CPU's hypervisor flag, the DMI vendor and product),
the cpuidle driver and governor, halt-polling (the haltpoll governor's
guest_halt_poll_ns: how long this guest polls before it halts; kvm's
halt_poll_ns: how long this kernel's KVM polls for the guests it hosts),
the CPU's model and count, nginx's version (from the running nginx) and the
app's idle keep-alive timeout as the last `make contract` of the same image
measured it (results/contract.json). Nothing else: no host name, address or
user, and each value bounded.

On Compose the host reads its own /sys and /proc (PROBE, a POSIX sh script)
and nginx's container says its version (nginx -V); on Kubernetes the app pod's nginx
container runs PROBE (the node's kernel and /sys as a pod sees them).
The host's Python, its standard library alone."""
import json
import re
import subprocess
from pathlib import Path

from lab_run import Stop

PROBE_S = 20  # one probe, or one `nginx -v`
MAX_OUT = 8192  # a probe's output read, at most
MAX_VALUE = 200  # one value, at most

# $1: the root the files are read under ("" on a live machine; a test's
# folder); $2: "host" (systemd-detect-virt asked, on a live machine only) or
# "pod" (nginx -v asked).
# key=value lines; a file that cannot be read gives no line.
PROBE = r'''
R=$1
field() { v=$(head -c 200 "$R$2" 2>/dev/null) && printf '%s=%s\n' "$1" "$(printf '%s' "$v" | head -n 1)"; }
field kernel /proc/sys/kernel/osrelease
field dmi_vendor /sys/class/dmi/id/sys_vendor
field dmi_product /sys/class/dmi/id/product_name
field cpuidle_driver /sys/devices/system/cpu/cpuidle/current_driver
field cpuidle_governor /sys/devices/system/cpu/cpuidle/current_governor ||
  field cpuidle_governor /sys/devices/system/cpu/cpuidle/current_governor_ro
field guest_halt_poll_ns /sys/module/haltpoll/parameters/guest_halt_poll_ns
field kvm_halt_poll_ns /sys/module/kvm/parameters/halt_poll_ns
C=$R/proc/cpuinfo
if [ -r "$C" ]; then
  printf 'cpus=%s\n' "$(grep -c '^processor' "$C")"
  printf 'cpu_model=%s\n' "$(grep -m 1 '^model name' "$C" | cut -d : -f 2- | head -c 200)"
  if grep -m 1 '^flags' "$C" | grep -qw hypervisor; then echo hypervisor=yes
  elif grep -q '^flags' "$C"; then echo hypervisor=no; fi
fi
if [ -z "$R" ] && [ "$2" = host ] && command -v systemd-detect-virt >/dev/null 2>&1; then
  printf 'detect_virt=%s\n' "$(systemd-detect-virt --vm 2>/dev/null)"
fi
if [ "$2" = pod ] && command -v nginx >/dev/null 2>&1; then
  printf 'nginx=%s\n' "$(nginx -v 2>&1 | head -c 200)"
fi
'''
KEYS = ("kernel", "dmi_vendor", "dmi_product", "cpuidle_driver", "cpuidle_governor", "guest_halt_poll_ns",
        "kvm_halt_poll_ns", "cpus", "cpu_model", "hypervisor", "detect_virt", "nginx")
# Where each source was read, as the report words a field it could not read.
WHERE = {"host": "the host", "pod": "the app pod's nginx container"}
CONTRACT = Path("results") / "contract.json"
KEEPALIVE_ROW = "keep-alive:"
# The keep-alive row's measurement per listener (contract/checker/pooled.go's judgeIdle).
LISTENER_IDLE = re.compile(r"\b(tcp|unix): (closed by the app after [0-9.]+ s idle|still open after [0-9.]+ s idle"
                           r"|not kept \(the app closes each connection with its response\))")


def parse(text):
    """PROBE's output: {key: value} for the known keys, each bounded; an empty value is None."""
    out = dict.fromkeys(KEYS)
    for line in text[:MAX_OUT].splitlines():
        key, _, value = line.partition("=")
        if key in out:
            out[key] = value.strip()[:MAX_VALUE] or None
    return out


def probe(root="", mode="host", runner=None):
    """PROBE's fields, run by sh here (runner None) or by runner(argv) -> its output."""
    argv = ["sh", "-c", PROBE, "probe", root, mode]
    if runner is not None:
        return parse(runner(argv))
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_S)
    except (OSError, subprocess.TimeoutExpired):
        return parse("")
    return parse(res.stdout)


def whole(v):
    return int(v) if v is not None and v.isdigit() else None


def nginx_version(said):
    """`nginx -v`'s line ("nginx version: nginx/1.27.3") -> "nginx/1.27.3"; None if it said nothing of the kind."""
    m = re.search(r"nginx version: (\S+)", said or "")
    return m.group(1)[:MAX_VALUE] if m else None


def virtualisation(raw):
    """Whether this is a virtual machine, each source as read."""
    dv = raw["detect_virt"]
    return {"virtual_machine": (dv != "none") if dv else {"yes": True, "no": None}.get(raw["hypervisor"]),
            "systemd_detect_virt": dv, "hypervisor_flag": {"yes": True, "no": False}.get(raw["hypervisor"]),
            "dmi_vendor": raw["dmi_vendor"], "dmi_product": raw["dmi_product"]}


def state(raw, where, nginx, keepalive):
    """machine.json's content from PROBE's fields, nginx's version and the keep-alive row."""
    return {
        "read_from": WHERE[where],
        "kernel": raw["kernel"],
        "virtualisation": virtualisation(raw),
        "cpuidle": {"driver": raw["cpuidle_driver"], "governor": raw["cpuidle_governor"]},
        "halt_polling": {"guest_halt_poll_ns": whole(raw["guest_halt_poll_ns"]),
                         "kvm_halt_poll_ns": whole(raw["kvm_halt_poll_ns"])},
        "cpu": {"model": raw["cpu_model"], "count": whole(raw["cpus"])},
        "nginx": nginx,
        "app_keepalive": keepalive,
    }


def keepalive(app_image, contract=CONTRACT):
    """The app's idle keep-alive timeout as make contract measured it for this
    image: {"measured": each listener's outcome, "image"} or {"measured": None, "why"}."""
    try:
        doc = json.loads(Path(contract).read_text())
    except (OSError, ValueError):
        return {"measured": None, "why": "not measured (run make contract)"}
    if not isinstance(doc, dict) or doc.get("image") != app_image:
        return {"measured": None, "why": f"not measured for this app's image (run make contract): {contract} is of "
                f"another image"}
    row = next((c for c in doc.get("clauses") or [] if str(c.get("clause", "")).startswith(KEEPALIVE_ROW)), None)
    parts = [f"{m.group(1)} {m.group(2)}" for m in LISTENER_IDLE.finditer(str((row or {}).get("why", "")))]
    if not parts:
        return {"measured": None, "why": f"not measured ({contract} has no keep-alive row: run make contract)"}
    return {"measured": "; ".join(parts), "image": app_image[:MAX_VALUE]}


def write(run_dir, content):
    (Path(run_dir) / "machine.json").write_text(json.dumps(content, indent=1) + "\n")


def on_compose(compose, env, run_dir):
    """The host's state, the lab's nginx's version (nginx -V in its container)
    and the keep-alive row for compose.json's app image."""
    try:
        # -V (its build too; its first line is -v's): compose's -v is a volume, and reads so in its calls.
        res = subprocess.run(compose + ["exec", "-T", "nginx", "nginx", "-V"], env=env, capture_output=True,
                             text=True, timeout=PROBE_S)
        said = res.stderr + res.stdout
    except (OSError, subprocess.TimeoutExpired):
        said = ""
    try:
        image = json.loads((Path(run_dir) / "compose.json").read_text())["services"]["app"]["image"]
    except (OSError, ValueError, KeyError, TypeError):
        image = None
    return state(probe(), "host", nginx_version(said), keepalive(image))


def on_kubernetes(cluster, release):
    """The app pod's view (PROBE in its nginx container, nginx -v there) and
    the keep-alive row for its app image; cluster: k8s_backend's Cluster."""
    try:
        pods = cluster.pods(f"app.kubernetes.io/instance={release},app.kubernetes.io/component=app")
        pod = pods[0]["metadata"]["name"]
        image = next((c["image"] for c in pods[0]["spec"]["containers"] if c["name"] == "app"), None)
        raw = probe(mode="pod", runner=lambda argv: cluster.kubectl("exec", pod, "-c", "nginx", "--", *argv,
                                                                     timeout=PROBE_S, check=False))
    except (Stop, IndexError, KeyError, TypeError):  # no app pod, or kubectl did not answer
        raw, image = parse(""), None
    return state(raw, "pod", nginx_version(raw["nginx"]), keepalive(image))
