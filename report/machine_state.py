"""The machine a run's figures came from (its machine.json, which
loadgen/machine.py writes when the run starts), in one line of the report:
the pooled socket's cost is a wake-up cost of idle cores, so the idle
driver and virtualisation belong beside every figure. A run folder from
before machine.json was written says "not recorded"."""
import json
from pathlib import Path

NOT_RECORDED = "not recorded (the run's folder has no machine.json: a run from before lab_run.py wrote it)"
POD = "the app pod's nginx container"


def read(run_dir):
    """machine.json's content; None where the run has none; {"unreadable": why} where it is not JSON."""
    p = Path(run_dir) / "machine.json"
    if not p.is_file():
        return None
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        return {"unreadable": f"{p}: {e}"}
    return doc if isinstance(doc, dict) else {"unreadable": f"{p}: not a JSON object"}


def virtual_words(v, na):
    """Whether it is a virtual machine, by the source that said so, and the DMI's names where read."""
    if v.get("systemd_detect_virt") == "none":
        said = "not a virtual machine (systemd-detect-virt)"
    elif v.get("systemd_detect_virt"):
        said = f"a virtual machine ({v['systemd_detect_virt']}, systemd-detect-virt)"
    elif v.get("hypervisor_flag") is True:
        said = "a virtual machine (the CPU's hypervisor flag)"
    elif v.get("hypervisor_flag") is False:
        said = "no hypervisor flag (bare metal, or a hypervisor that hides it)"
    else:
        said = f"virtualisation {na}"
    dmi = " ".join(x for x in (v.get("dmi_vendor"), v.get("dmi_product")) if x)
    return said + (f", DMI `{dmi}`" if dmi else f", DMI {na}")


def halt_words(h, na):
    """Halt-polling as read: this machine's idle cores (haltpoll's guest_halt_poll_ns) and
    this kernel's KVM for the guests it hosts (kvm.halt_poll_ns)."""
    guest, kvm = h.get("guest_halt_poll_ns"), h.get("kvm_halt_poll_ns")
    return ("halt-polling: " + (f"an idle core polls up to {guest:,} ns before it halts (haltpoll's guest_halt_poll_ns)"
                                if guest is not None else f"haltpoll's guest_halt_poll_ns {na}") + ", "
            + (f"this kernel's KVM polls {kvm:,} ns for its own guests (kvm.halt_poll_ns)" if kvm is not None
               else f"kvm.halt_poll_ns {na}"))


def keepalive_words(ka):
    if not ka:
        return "the app's idle keep-alive timeout: not recorded"
    if ka.get("measured"):
        return f"the app's idle keep-alive timeout (make contract of `{ka.get('image')}`): {ka['measured']}"
    return f"the app's idle keep-alive timeout: {ka.get('why') or 'not measured'}"


def line(ms):
    """The report's "Machine:" line."""
    if ms is None:
        return f"Machine: {NOT_RECORDED}"
    if "unreadable" in ms:
        return f"Machine: not readable ({ms['unreadable']})"
    na = "not readable from a pod" if ms.get("read_from") == POD else "not readable here"
    idle, cpu = ms.get("cpuidle") or {}, ms.get("cpu") or {}
    count = cpu.get("count")
    parts = [
        f"kernel {ms.get('kernel') or na}",
        virtual_words(ms.get("virtualisation") or {}, na),
        f"cpuidle driver {idle.get('driver') or na}, governor {idle.get('governor') or na}",
        halt_words(ms.get("halt_polling") or {}, na),
        f"CPU {cpu.get('model') or na}" + (f" x {count}" if count else ""),
        ms.get('nginx') or f"nginx's version {na}",
        keepalive_words(ms.get("app_keepalive")),
    ]
    return f"Machine (read from {ms.get('read_from') or 'n/a'} at the run's start): " + "; ".join(parts)


def bullet(rep):
    """The line as a list item of report.md's settings."""
    return "- " + line(rep.get("machine_state"))
