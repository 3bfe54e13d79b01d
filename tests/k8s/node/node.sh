#!/usr/bin/env bash
# The test bed's single-node Kubernetes, from the binaries scripts/test-deps.sh
# k8s-node builds: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, containerd with runc, the CNI bridge plugin, CoreDNS,
# kube-proxy and the kubelet, all real, as one node.
#
#   node.sh up DIR     start it (DIR: its files, logs and kubeconfig) and wait
#                      until the node is Ready
#   node.sh in DIR CMD run CMD in the node's network namespace, KUBECONFIG set
#                      and kubectl on PATH
#   node.sh down DIR   stop it and remove what it left on the host
#
# Kept apart from the host and its Docker: the node runs in new network, mount,
# PID and UTS namespaces (unshare), so its iptables rules, bridge, pod network
# namespaces, overlay and tmpfs mounts exist only there and go with it; its
# processes die with the namespace's first process. Its ports are fixed since
# the namespace is its own. What it leaves on the host: its pods' cgroups
# (under /uds-lab-node in each hierarchy) and three kernel settings the kubelet
# writes at start (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops),
# which down removes and puts back.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:?usage: node.sh up|in|down DIR [CMD...]}
dir=${2:?usage: node.sh up|in|down DIR [CMD...]}
shift 2
CACHE=${UDS_LAB_CACHE:-$HOME/.cache/uds-lab}
# The node's binaries (scripts/test-deps.sh k8s-node prints their folder);
# up records it for the commands after it.
BIN=${UDS_LAB_NODE_BIN:-$(cat "$dir/bin" 2>/dev/null || true)}
IP=10.250.0.2 # the node's address, on a link of its namespace's own
CGROUP=uds-lab-node
# Where the cgroup hierarchies are (a test points it at a folder of its own).
CGROUP_ROOT=${UDS_LAB_CGROUP_ROOT:-/sys/fs/cgroup}
SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops"
log() { printf '[node %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# fill FILE: a config of this folder with its placeholders filled, into DIR.
fill() { sed -e "s#@DIR@#$dir#g" -e "s#@BIN@#$BIN#g" "$here/$1" >"$dir/$1"; }

cgroups() { # each hierarchy's folder for the pods (cgroup v1 here; v2 too)
  local h
  for h in "$CGROUP_ROOT"/*/ "$CGROUP_ROOT"/; do
    [ -e "$h/cgroup.procs" ] && echo "${h%/}/$CGROUP"
  done
}

# certs: a CA for the API server's certificate (the pods check it), the
# service accounts' key, and an admin token every component uses.
certs() {
  local c=$dir/pki
  mkdir -p "$c"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=uds-lab-node-ca \
    -keyout "$c/ca.key" -out "$c/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$c/apiserver.key" \
    -out "$c/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:%s,IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n' "$IP" >"$c/san.ext"
  openssl x509 -req -in "$c/apiserver.csr" -CA "$c/ca.crt" -CAkey "$c/ca.key" -CAcreateserial \
    -days 2 -extfile "$c/san.ext" -out "$c/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$c/sa.key" 2048 2>/dev/null
  openssl rsa -in "$c/sa.key" -pubout -out "$c/sa.pub" 2>/dev/null
  local token
  token=$(openssl rand -hex 24)
  echo "$token,admin,admin,system:masters" >"$c/tokens.csv"
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: node, cluster: {server: "https://$IP:6443", certificate-authority: "$c/ca.crt"}}]
users: [{name: admin, user: {token: "$token"}}]
contexts: [{name: node, context: {cluster: node, user: admin}}]
current-context: node
EOF
}

# inside: the namespace's first process. It starts each component in turn,
# waiting for those the next needs, then waits; when it ends, the kernel ends
# every process of the namespace.
inside() {
  hostname uds-lab-node
  # containerd finds its shim on PATH: this one, not Docker's older one.
  export PATH=$BIN:$PATH
  ip link set lo up
  # A veth pair with both ends here (this kernel has no dummy links).
  ip link add node0 type veth peer name node1
  ip addr add "$IP/24" dev node0
  ip link set node1 up
  ip link set node0 up
  ip route add default dev node0
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  # The namespace's own /run: containerd's shims and the pods' network
  # namespaces are kept there, apart from the host's and Docker's.
  mount -t tmpfs tmpfs /run
  # The kubelet's cAdvisor asks containerd for each container's pod and name
  # (the labels of /metrics/cadvisor) at containerd's default socket, a path
  # no kubelet flag sets: without it, no series names a pod or a container.
  mkdir -p /run/containerd
  ln -s "$dir/containerd.sock" /run/containerd/containerd.sock
  local logs=$dir/logs k=$dir/kubeconfig p=$dir/pki
  local pids=() names=()
  bg() {
    local name=$1; shift
    "$@" >"$logs/$name.log" 2>&1 &
    pids+=("$!") names+=("$name")
  }
  wait_for() { # wait_for WHAT SECONDS CMD...
    local what=$1 s=$2; shift 2
    for ((i = 0; i < s * 2; i++)); do "$@" >/dev/null 2>&1 && return; sleep 0.5; done
    echo "node: $what did not come up in ${s}s" >&2; exit 1
  }
  bg etcd "$CACHE/bin/etcd" --name node --data-dir "$dir/etcd" --log-level warn \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster node=http://127.0.0.1:2380
  bg kube-apiserver "$CACHE/bin/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --advertise-address "$IP" --bind-address 0.0.0.0 --secure-port 6443 \
    --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" --client-ca-file "$p/ca.crt" \
    --token-auth-file "$p/tokens.csv" --authorization-mode Node,RBAC \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$p/sa.pub" \
    --service-account-signing-key-file "$p/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
    --kubelet-preferred-address-types InternalIP
  wait_for kube-apiserver 120 "$BIN/kubectl" --kubeconfig "$k" get --raw /readyz
  bg kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$k" \
    --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" --leader-elect=false
  bg kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$k" --leader-elect=false
  bg containerd "$BIN/containerd" --config "$dir/containerd.toml"
  wait_for containerd 60 "$BIN/ctr" --address "$dir/containerd.sock" version
  "$BIN/ctr" --address "$dir/containerd.sock" -n k8s.io images import "$dir/pause.tar" >/dev/null
  bg coredns "$BIN/coredns" -conf "$dir/Corefile"
  bg kube-proxy "$BIN/kube-proxy" --config "$dir/kube-proxy.yaml"
  # cAdvisor's samples every 5 s under load, as compose's cAdvisor takes them
  # (the kubelet's default is 10 s): a 5 s phase has samples around it.
  bg kubelet "$BIN/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$k" \
    --hostname-override uds-lab-node --node-ip "$IP" --root-dir "$dir/kubelet" \
    --housekeeping-interval 5s
  touch "$dir/started"
  # Until a component stops: then the node stops with it (its log says why).
  while :; do
    for i in "${!pids[@]}"; do
      kill -0 "${pids[$i]}" 2>/dev/null || { echo "node: ${names[$i]} stopped (logs/${names[$i]}.log)" >&2; exit 1; }
    done
    sleep 1
  done
}

up() {
  [ ! -e "$dir/pid" ] || { echo "node.sh: $dir/pid exists: node.sh down $dir first" >&2; exit 1; }
  mkdir -p "$dir/logs" "$dir/cni" "$dir/pod-logs"
  [ -n "$BIN" ] || BIN=$("$here/../../../scripts/test-deps.sh" k8s-node)
  [ -x "$BIN/kubelet" ] || { echo "node.sh: no $BIN/kubelet: run scripts/test-deps.sh k8s-node" >&2; exit 1; }
  echo "$BIN" >"$dir/bin"
  for f in kubelet.yaml containerd.toml kube-proxy.yaml Corefile; do fill "$f"; done
  # The pods' sandbox image, under the name containerd.toml gives it.
  python3 "$here/pause_image.py" "$BIN/pause" "$dir/pause.tar" \
    "$(sed -n "s/^ *sandbox = '\(.*\)'\$/\1/p" "$here/containerd.toml")"
  fill cni.conflist && mv "$dir/cni.conflist" "$dir/cni/10-uds-lab.conflist"
  grep -v '^nameserver' /etc/resolv.conf >"$dir/resolv.conf" || true
  echo "nameserver $IP" >>"$dir/resolv.conf"
  certs
  for s in $SYSCTLS; do echo "$s=$(sysctl -n "$s")"; done >"$dir/sysctls"
  local c
  for c in $(cgroups); do
    mkdir -p "$c"
    # cpuset: a new v1 folder starts with no CPUs or memory nodes.
    [ ! -e "$c/cpuset.cpus" ] || { cat "$c/../cpuset.cpus" >"$c/cpuset.cpus"; cat "$c/../cpuset.mems" >"$c/cpuset.mems"; }
  done
  unshare --net --mount --pid --uts --fork --mount-proc --propagation private \
    "$0" inside "$dir" >"$dir/logs/node.log" 2>&1 &
  echo $! >"$dir/pid"
  log "started (pid $!, logs in $dir/logs)"
  for ((i = 0; i < 600; i++)); do
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      tail -20 "$dir/logs/node.log" >&2
      echo "node.sh: the node stopped while starting" >&2
      exit 1
    fi
    if [ -e "$dir/started" ] && in_node "$BIN/kubectl" wait --for=condition=Ready node/uds-lab-node --timeout=1s >/dev/null 2>&1; then
      log "node Ready after $((i / 2)) s"
      return
    fi
    sleep 0.5
  done
  echo "node.sh: the node was not Ready in 300 s (logs in $dir/logs)" >&2
  exit 1
}

# in: KUBECONFIG set, and the node's kubectl (and the test tools) on PATH.
in_node() { KUBECONFIG=$dir/kubeconfig PATH=$CACHE/bin:$PATH nsenter --net --target "$(cat "$dir/pid")" -- "$@"; }

down() {
  if [ -e "$dir/pid" ]; then
    local pid
    pid=$(cat "$dir/pid")
    # unshare's child is the namespace's first process: killing it ends all.
    pkill -KILL -P "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    rm -f "$dir/pid" "$dir/started"
  fi
  # Every step runs whatever the one before it did: a cgroup that cannot be
  # removed is said, and the kernel settings are put back all the same.
  local c s left=0
  for c in $(cgroups); do
    [ ! -d "$c" ] || find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
    if [ -d "$c" ]; then echo "node.sh: $c is still there" >&2; left=1; fi
  done
  if [ -e "$dir/sysctls" ]; then
    while IFS= read -r s; do sysctl -qw "$s" || { echo "node.sh: could not put back $s" >&2; left=1; }; done <"$dir/sysctls"
  fi
  log "stopped"
  return "$left"
}

case $cmd in
up) up ;;
in) in_node "$@" ;;
down) down ;;
inside) inside ;;
*) echo "node.sh: unknown command $cmd (up, in, down)" >&2; exit 2 ;;
esac
