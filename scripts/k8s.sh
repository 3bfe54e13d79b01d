#!/usr/bin/env bash
# The lab on Kubernetes: scripts/k8s.sh up|load|report|cluster ID, as
# make k8s-up, k8s-load and k8s-report run them. The run's program,
# loadgen/lab_run.py, does each (its settings: loadgen/k8s_backend.py).
set -euo pipefail
exec python3 "$(dirname "$0")/../loadgen/lab_run.py" k8s "$@"
