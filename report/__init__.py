"""uds-lab report: one run's figures per path, against tcp (`python3 -m report`).

Modules, in the order the data flows: lab (the catalogue and the PromQL
selectors, shared with grafana/dashboards.py), values (the figures, Prometheus's
answers as numbers), prometheus (the client: the only network I/O), queries
(per phase: window, PromQL, figures), stats (aggregates, ratios to tcp and
their spread), breakdown (where the time goes, the answer), warnings, context
(machine, limits, build_report), markdown and charts (rendering), cli (files
and main). Everything but prometheus, charts and cli is pure.
"""
