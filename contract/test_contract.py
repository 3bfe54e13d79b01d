"""Tests of contract/contract.py's pure parts: reading the checker's lines, the table."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("uds_lab_contract", Path(__file__).resolve().parent / "contract.py")
ct = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ct)


def test_parse_keeps_clauses_only():
    out = '{"event":"inflight"}\nnoise\n{"clause":"a","required":true,"pass":true,"why":"ok"}\n'
    assert ct.parse(out) == [{"clause": "a", "required": True, "pass": True, "why": "ok"}]


def test_render_names_panels_workloads_and_verdict():
    clauses = [
        ct.clause("socket", True, "0660"),
        {**ct.clause("metric app_netns_tcp_sockets", False, "absent", required=False),
         "panels": ["paths / TIME_WAIT"]},
        {**ct.clause("route /cpu/1", False, "404", required=False), "workload": "cpu"},
    ]
    text, ok = ct.render("me/app:1", clauses)
    assert ok
    assert "paths / TIME_WAIT  (metric app_netns_tcp_sockets)" in text
    assert "cannot run: cpu" in text
    assert "Required: 1 of 1 pass. Optional: 0 of 2 pass" in text
    assert "me/app:1 keeps the contract." in text
    assert "  fail    route /cpu/1" in text


def test_a_failed_required_clause_breaks_the_contract():
    text, ok = ct.render("x", [ct.clause("SIGTERM: exits 0 within 10 s", False, "exit code 137")])
    assert not ok
    assert "  FAIL    SIGTERM" in text and "x breaks the contract." in text
