#!/bin/sh
# Runs in the app's network namespace (compose: network_mode service:app).
# Docker's embedded DNS puts NAT rules into every container's namespace, and
# with them connection tracking: each new TCP connection over loopback (tcp-lo)
# is a conntrack entry for 120 s, which a pod's sidecar would not pay.
# APP_LO_NOTRACK=1 adds two raw-table rules that keep loopback out of tracking;
# 0 removes them. Then it prints the raw table, for the log.
set -eu
case ${APP_LO_NOTRACK:-} in
  0 | 1) ;;
  *) echo "notrack: APP_LO_NOTRACK=\"${APP_LO_NOTRACK:-}\": must be 0 or 1" >&2; exit 2 ;;
esac
rule() { iptables -w -t raw "$1" "$2" "$3" lo -j NOTRACK; }
for hook in "PREROUTING -i" "OUTPUT -o"; do
  # shellcheck disable=SC2086 # the chain and its flag, split on purpose
  set -- $hook
  if [ "$APP_LO_NOTRACK" = 1 ]; then
    rule -C "$1" "$2" 2>/dev/null || rule -I "$1" "$2"
  else
    while rule -C "$1" "$2" 2>/dev/null; do rule -D "$1" "$2"; done
  fi
done
iptables -w -t raw -S
