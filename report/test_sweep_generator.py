"""make sweep's all_short warning and the generator's column (report/sweep.py,
report/sweep_render.py): a step every path fell short of is said to be
possibly the generator's unless its lateness, or its CPU with a full pool,
says the paths were the limit."""
import pytest

from report import sweep, sweep_render
from report.test_sweep import load, phase


def test_every_path_short_at_once_without_errors_is_said_to_be_possibly_k6s():
    ph = [phase(p, 1, 100, r, rps=80) for p in ("tcp-lo", "uds-lo") for r in (1, 2)]
    (w,) = sweep.build(load(ph))["warnings"]
    assert w["kind"] == "all_short" and w["workload"] == "ping"
    assert w["message"].startswith("at 100 req/s every path fell short of the rate at once, none with errors")
    ph = [phase("tcp-lo", 1, 100, r, rps=80) for r in (1, 2)] + [phase("uds-lo", 1, 100, r) for r in (1, 2)]
    assert sweep.build(load(ph))["warnings"] == []


@pytest.mark.parametrize("late, warned, generator", [(0.004, False, None), (0.05, False, None), (None, True, None),
                                                    (0.08, True, None)])
def test_a_generator_that_says_it_sent_on_time_clears_a_shortfall(late, warned, generator):
    """openloop on time (to 5%): the shortfall is the paths'; late or silent (k6, wrk): either's."""
    got = load([dict(phase(p, 1, 100, r, rps=80), late_rate=late and late / (3 - r)) for p in ("tcp-lo", "uds-lo") for r in (1, 2)])
    got["settings"]["generator"] = "openloop"
    rep = sweep.build(got)
    assert [w["kind"] for w in rep["warnings"]] == (["all_short"] if warned else [])
    assert [rep["steps"]["1"][p]["generator"] for p in ("tcp-lo", "uds-lo")] == [generator] * 2
    assert rep["steps"]["1"]["uds-lo"]["late_share"] == late  # the worse round's


@pytest.mark.parametrize("cpu, dropped, warned", [(0.6, 500, False), (None, 500, True), (0.6, 0, True),
                                                  (0.95, 500, False)])
def test_a_late_generator_under_its_cpu_whose_pools_filled_leaves_the_shortfall_to_the_paths(cpu, dropped, warned):
    """openloop 10% late at a step every path fell short of: its CPU (cAdvisor) under 90% of its limit and every
    connection of each path busy (an overflow) say the paths were the limit; without either, either's; at 90% of
    its CPU the step is the generator's (marked, no all_short)."""
    got = load([dict(phase(p, 1, 100, r, rps=80), late_rate=0.10, dropped_iterations=dropped)
                for p in ("tcp-lo", "uds-lo") for r in (1, 2)])
    got["settings"]["generator"] = "openloop"
    server = {f"ping__{p}__s1__r{r}": {"generator_cpu_cores": cpu} for p in ("tcp-lo", "uds-lo") for r in (1, 2)}
    rep = sweep.build(got, server, generator_cpus=1)
    assert [w["kind"] for w in rep["warnings"]] == (["all_short"] if warned else [])
    if warned:  # what would tell: cAdvisor where it was down, else nothing more
        tail = "(with cAdvisor up, openloop's CPU tells)" if cpu is None else "no path had all its connections busy)"
        assert rep["warnings"][0]["message"].endswith(tail)
    assert rep["steps"]["1"]["tcp-lo"]["generator_cpu_share"] == (pytest.approx(cpu) if cpu else None)
    assert (rep["steps"]["1"]["tcp-lo"]["generator"] is not None) == (cpu == 0.95)
    row = next(x for x in sweep_render.step_lines(rep, "ping", False) if x.startswith("| 100 | tcp-lo |"))
    assert "| 10.0% late" + (f", CPU {cpu:.0%} |" if cpu else " |") in row
