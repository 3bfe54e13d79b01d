#!/usr/bin/env bash
# make k8s-up, k8s-load, k8s-report: the lab on the cluster of kubectl's
# current context (docs/kubernetes.md), with the chart in k8s/uds-lab.
#   k8s.sh up       install or upgrade the lab, wait until it is ready
#   k8s.sh load     a run: the openloop Job (K8S_PODS pods, each every
#                   K8S_PODS-th request of the stream), then
#                   results/<id>/load.json (merged exactly) and cluster.json.
#                   The Job is the release's (helm upgrade), so helm list
#                   shows the run and helm uninstall removes it.
#   k8s.sh cluster ID  cluster.json of run ID (load writes it): where the run
#                   took place, each of the release's pods' node among it
#   k8s.sh report   the report of a run (RUN=<id>, default the last) against
#                   the release's Prometheus (with its login) or the one
#                   K8S_PROMETHEUS names (this release's series alone there),
#                   through a port-forward
# Settings: K8S_NAMESPACE (uds-lab), K8S_RELEASE (lab), K8S_VALUES (a values
# file of yours), K8S_SET ("key=value ..." as helm --set, e.g.
# "load.rate=200 load.scenario=ping"), K8S_PODS (generator pods, 1-16; 1),
# K8S_TIMEOUT (seconds a run may take; 1800), K8S_START_LEAD (seconds from
# making the Job to the run's start instant that its pods wait for, with
# K8S_PODS above 1; 20), K8S_NETWORK_PLUGIN (its name,
# for the report: Kubernetes does not say), K8S_PROMETHEUS (the cluster's
# Prometheus for the report, <namespace>/<service>:<port>, where the release
# runs none: prometheus.enabled=false), TESTID (the run's id), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:?usage: k8s.sh up|load|report|cluster ID}
ns=${K8S_NAMESPACE:-uds-lab} release=${K8S_RELEASE:-lab} pods=${K8S_PODS:-1} timeout=${K8S_TIMEOUT:-1800} lead=${K8S_START_LEAD:-20}
PYTHON=${PYTHON:-python3}
fail() { echo "k8s.sh: $*" >&2; exit 2; }
log() { printf '[k8s %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
if ! [[ $pods =~ ^[0-9]+$ ]] || ((pods < 1 || pods > 16)); then fail "K8S_PODS=$pods: a whole number of generator pods, 1 to 16"; fi
if ! [[ $timeout =~ ^[0-9]+$ ]] || ((timeout < 1)); then fail "K8S_TIMEOUT=$timeout: seconds, a whole number above 0"; fi
if ! [[ $lead =~ ^[0-9]+$ ]] || ((lead < 1 || lead > 3600)); then
  fail "K8S_START_LEAD=$lead: seconds from making the Job to the run's start, a whole number, 1 to 3600"
fi
[[ $ns =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || fail "K8S_NAMESPACE=$ns: not a namespace's name"
[ -z "${K8S_VALUES:-}" ] || [ -r "$K8S_VALUES" ] || fail "K8S_VALUES=$K8S_VALUES: no such file"
[ -z "${K8S_PROMETHEUS:-}" ] || [[ $K8S_PROMETHEUS =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?:[0-9]+$ ]] ||
  fail "K8S_PROMETHEUS=$K8S_PROMETHEUS: the cluster's Prometheus as <namespace>/<service>:<port>"
args=(--namespace "$ns")
[ -z "${K8S_VALUES:-}" ] || args+=(--values "$K8S_VALUES")
for kv in ${K8S_SET:-}; do
  [[ $kv == *=* ]] || fail "K8S_SET: \"$kv\" is not key=value"
  args+=(--set "$kv")
done
kc() { kubectl --namespace "$ns" "$@"; }

up() {
  helm upgrade --install "$release" k8s/uds-lab "${args[@]}" --create-namespace --wait --timeout 5m
}

# segment I ID: pod I's load.json, from between the marker lines of its log;
# none there (a pod that came up after the run's start instant sends nothing
# and says so): the log's last lines.
segment() {
  local pod log doc
  pod=$(kc get pods -l "job-name=$release-openloop-$2,batch.kubernetes.io/job-completion-index=$1" -o name | head -1)
  [ -n "$pod" ] || fail "no pod of job/$release-openloop-$2 with index $1"
  log=$(kc logs "$pod" -c openloop)
  doc=$(printf '%s\n' "$log" | sed -n "/^--- uds-lab load.json $1\/$pods ---\$/,/^--- end of load.json ---\$/p" | sed '1d;$d')
  [ -n "$doc" ] || fail "$pod wrote no load.json; its log ends: $(printf '%s\n' "$log" | tail -n 2 | tr '\n' ' ')"
  printf '%s\n' "$doc"
}

# cluster.json: where the run took place, for the report (compose.json's part).
cluster() {
  local app node entries
  app=$(kc get pods -l "app.kubernetes.io/instance=$release,app.kubernetes.io/component=app" -o name | head -1)
  node=$(kc get "$app" -o jsonpath='{.spec.nodeName}')
  # Conntrack entries in the app pod's network namespace, read by its nginx
  # sidecar after the run: none after thousands of loopback connections means
  # loopback is not tracked there (the file is absent where the kernel has no
  # conntrack at all).
  entries=$(kc exec "$app" -c nginx -- sh -c 'cat /proc/sys/net/netfilter/nf_conntrack_count 2>/dev/null || echo 0') || entries=null
  local images
  images=$(kc get "$app" -o jsonpath='app={.spec.containers[?(@.name=="app")].image} nginx={.spec.containers[?(@.name=="nginx")].image}')
  images+=" openloop=$(kc get job "$release-openloop-$1" -o jsonpath='{.spec.template.spec.containers[0].image}')"
  # The node of each of the release's pods, by component: whether nginx's pod
  # ran on another node than the app's (tcp across the network between them).
  local placement
  placement=$(kc get pods -l "app.kubernetes.io/instance=$release" \
    -o jsonpath='{range .items[*]}{.metadata.labels.app\.kubernetes\.io/component}={.spec.nodeName} {end}')
  kubectl get node "$node" -o json | NODE_ENTRIES=$entries NET=${K8S_NETWORK_PLUGIN:-} IMAGES=$images PLACEMENT=$placement "$PYTHON" -c '
import json, os, sys
n = json.load(sys.stdin)
i = n["status"]["nodeInfo"]
e = os.environ["NODE_ENTRIES"].strip()
placement = {}
for kv in os.environ["PLACEMENT"].split():
    component, _, where = kv.partition("=")
    if component and where:
        placement.setdefault(component, set()).add(where)
print(json.dumps({
    "node": n["metadata"]["name"], "kubelet": i["kubeletVersion"], "kernel": i["kernelVersion"],
    "os": i["osImage"], "runtime": i["containerRuntimeVersion"], "cores": n["status"]["capacity"].get("cpu"),
    "network_plugin": os.environ["NET"] or None,
    "lo_conntrack_entries": int(e) if e.isdigit() else None,
    "images": dict(kv.split("=", 1) for kv in os.environ["IMAGES"].split()),
    "placement": {c: sorted(n) for c, n in sorted(placement.items())},
}, indent=1))'
}

load() {
  local id=${TESTID:-k8s-$(date +%Y%m%d-%H%M%S)} out
  out=results/$id
  mkdir -p "$out"
  log "run $id: $pods generator pod(s) in namespace $ns"
  # The Job joins the release, so that helm uninstall leaves nothing behind.
  # The release keeps its values (helm get values: its last install's or
  # upgrade's) but load.*, which come from this run's K8S_VALUES and K8S_SET
  # alone, as a run's settings always have: a setting of the last run does
  # not leak into this one; one given now (sysctls.*, resources) changes the
  # release as make k8s-up would.
  # Global: the EXIT trap runs after this function has returned.
  tmp=$(mktemp)
  trap 'rm -f "$tmp" "$tmp.in" "$tmp.err"' EXIT
  helm get values "$release" --namespace "$ns" -o json >"$tmp.in" 2>"$tmp.err" ||
    fail "no release $release in namespace $ns (make k8s-up first): $(cat "$tmp.err")"
  "$PYTHON" -c 'import json, sys; v = json.load(open(sys.argv[1])) or {}; v.pop("load", None); json.dump(v, open(sys.argv[2], "w"))' "$tmp.in" "$tmp"
  # First the lab as this checkout's chart has it, ready, and the last run's
  # Job gone; then the Job alone is added (nothing else depends on load.*),
  # so the run never starts against pods still restarting.
  helm upgrade "$release" k8s/uds-lab --values "$tmp" "${args[@]}" --set load.enabled=false --wait --timeout 5m >/dev/null
  # Several pods share one start instant (load.startAt, unix ms), K8S_START_LEAD
  # seconds from now: long enough for the Job's pods to be scheduled, plan
  # and start on a warm node. A pod that comes up more than 5 ms after it
  # sends nothing and fails, naming its lateness (segment says it).
  local start=()
  ((pods == 1)) || start=(--set "load.startAt=$((($(date +%s) + lead) * 1000))")
  helm upgrade "$release" k8s/uds-lab --values "$tmp" "${args[@]}" --set load.enabled=true --set "load.testid=$id" \
    --set "load.pods=$pods" ${start[@]+"${start[@]}"} >/dev/null
  local t0=$SECONDS done="" failed=""
  while ((SECONDS - t0 < timeout)); do
    done=$(kc get job "$release-openloop-$id" -o jsonpath='{.status.succeeded}')
    failed=$(kc get job "$release-openloop-$id" -o jsonpath='{.status.failed}')
    (("${done:-0}" + "${failed:-0}" == pods)) && break
    sleep 5
  done
  (("${done:-0}" + "${failed:-0}" == pods)) || fail "job/$release-openloop-$id: not finished after K8S_TIMEOUT=$timeout s"
  if ((pods == 1)); then
    segment 0 "$id" >"$out/load.json"
    "$PYTHON" -c 'import json, sys; json.load(open(sys.argv[1]))' "$out/load.json" ||
      fail "$out/load.json: the pod's log did not hold load.json whole between its marker lines"
  else
    local i files=()
    for ((i = 0; i < pods; i++)); do segment "$i" "$id" >"$out/load-segment-$i.json"; files+=("$out/load-segment-$i.json"); done
    "$PYTHON" loadgen/merge_segments.py "$out/load.json" "${files[@]}"
  fi
  cluster "$id" >"$out/cluster.json"
  echo "$id" >results/last
  log "wrote $out/load.json and cluster.json ($((SECONDS - t0)) s)"
  # As make load: a run whose generator failed (more than 1% of requests
  # failed) is written, and reported, but ends in failure.
  [ "${failed:-0}" = 0 ] || { log "${failed} of $pods generator pod(s) failed: their log says why"; exit 1; }
}

report() {
  local id=${RUN:-$(cat results/last 2>/dev/null)} port values pns=$ns svc=$release-prometheus sport=9090 select=()
  [ -n "$id" ] || fail "no run: make k8s-load first, or RUN=<id>"
  # Global: the EXIT trap runs after this function has returned.
  dir=$(mktemp -d) pf=""
  trap '[ -z "$pf" ] || kill "$pf" 2>/dev/null || true; rm -rf "$dir"' EXIT
  if [ -n "${K8S_PROMETHEUS:-}" ]; then
    # The cluster's Prometheus (the chart's PodMonitors feed it): its own
    # login, if it asks one, is PROMETHEUS_USER and PROMETHEUS_PASSWORD_FILE
    # from the environment, as the report reads them.
    pns=${K8S_PROMETHEUS%%/*} svc=${K8S_PROMETHEUS#*/} sport=${svc##*:} svc=${svc%:*}
    # It may scrape other workloads, and other releases of the lab, with the
    # same job names: the report reads this release's series alone, by the
    # namespace the operator labels each target with and the release the
    # PodMonitors label it with (uds_lab_release).
    select=(--select "namespace=\"$ns\",uds_lab_release=\"$release\"")
  else
    values=$(helm get values "$release" --namespace "$ns" --all -o json)
    [ "$(echo "$values" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["prometheus"].get("enabled", True))')" = True ] ||
      fail "release $release runs no Prometheus (prometheus.enabled=false): name the cluster's, K8S_PROMETHEUS=<namespace>/<service>:<port>"
    kc get secret "$release-prometheus-auth" -o jsonpath='{.data.password}' | base64 -d >"$dir/password"
    export PROMETHEUS_PASSWORD_FILE=$dir/password
    PROMETHEUS_USER=$(echo "$values" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["prometheus"]["user"])')
    export PROMETHEUS_USER
  fi
  # The log exists before the loop reads it: the background job may not have
  # opened it yet (sed then failed, and with it the report, on a busy machine).
  : >"$dir/pf.log"
  kubectl --namespace "$pns" port-forward "svc/$svc" ":$sport" >>"$dir/pf.log" 2>&1 &
  pf=$!
  for _ in $(seq 50); do
    port=$(sed -n 's/^Forwarding from 127.0.0.1:\([0-9]*\) .*/\1/p' "$dir/pf.log" | head -1)
    [ -z "$port" ] || break
    sleep 0.2
  done
  [ -n "$port" ] || fail "kubectl port-forward to svc/$svc in $pns did not start: $(cat "$dir/pf.log")"
  MARGIN=${MARGIN:-$(scripts/dotenv.sh MARGIN)} "$PYTHON" -m report --run "$id" --prometheus "http://127.0.0.1:$port" "${select[@]}"
}

case $cmd in
up) up ;;
load) load ;;
report) report ;;
cluster) cluster "${2:?usage: k8s.sh cluster <run id>}" ;;
*) fail "unknown command $cmd (up, load, report, cluster)" ;;
esac
