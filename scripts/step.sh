#!/usr/bin/env bash
# step.sh NAME CMD...: runs CMD and stamps, on stderr, when it started and
# ended and how it ended, for scripts/ci_timings.py to turn a CI log into a
# table. Exits with CMD's status.
set -u
name=$1
shift
t0=$(date +%s)
printf '[step %s] start %s\n' "$name" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >&2
rc=0
"$@" || rc=$?
printf '[step %s] end %s %ss exit %s\n' "$name" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(($(date +%s) - t0))" "$rc" >&2
exit "$rc"
