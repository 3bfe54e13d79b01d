#!/usr/bin/env bash
# make doctor: can this machine run the lab, and what will be missing?
#
#   scripts/doctor.sh          the table; exit 1 when the lab cannot start
#   scripts/doctor.sh --up     for `make up`: the rows that are not ok (stderr),
#                              then the plan as shell assignments (stdout)
#   scripts/doctor.sh --cadvisor-check
#                              after make up: fails if the running cAdvisor
#                              labels no container within 20 s
#   scripts/doctor.sh --facts  `docker info` text (stdin) -> key=value facts
#   scripts/doctor.sh --judge  facts (stdin) -> rows and plan (for the tests)
#
# Three steps: gather (docker info, compose and buildx versions, two probe
# containers, the ports, the settings) -> facts, one key=value a line ->
# judge -> rows "status|check|what|fix" and "plan|NAME=value". Only gather
# touches the machine, so the judge is tested on recorded `docker info` outputs
# (tests/doctor). Settings come from the environment, else from .env.
# Written for bash 3.2 (macOS) and POSIX awk: no associative arrays.
set -u
cd "$(dirname "$0")/.." || exit 2

# Which services make up treats as optional: they watch, they are not measured.
OPTIONAL="node-exporter cadvisor"
MIN_ENGINE=20.10 # cgroup v2, and what the lab was tested on
MIN_COMPOSE=2.17 # depends_on: restart
MIN_BUILDX=0.17  # Compose's Bake builds refuse older buildx

# ------------------------------------------------------------------ gather

setting() { # setting NAME: the environment's value (even empty), else .env's
  if eval "[ \"\${$1+set}\" = set ]"; then eval "printf '%s' \"\$$1\""; return; fi
  scripts/dotenv.sh "$1" | tr -d '\n'
}

# facts_from_info: docker info's text (stdin) -> facts. Knows the formats of
# Docker CLI 20.10 to 29; unknown lines are ignored.
facts_from_info() {
  awk '
    function val() { v = $0; sub(/^[^:]*: */, "", v); return v }
    /^ *Server Version:/  { print "server=yes"; print "server_version=" val() }
    /^ *Operating System:/ { print "os=" val() }
    /^ *Cgroup Driver:/   { print "cgroup_driver=" val() }
    /^ *Cgroup Version:/  { print "cgroup_version=" val() }
    /^ *CPUs:/            { print "ncpu=" val() }
    /^ *Storage Driver:/  { print "storage_driver=" val() }
    /^ *driver-type:/     { print "driver_type=" val() }
    /^ *Docker Root Dir:/ { print "docker_root=" val() }
    /^ *Security Options:/ { sec = 1; next }
    sec && /^   *[a-z]/ && !/^    / { o = $1; if (o == "rootless") print "rootless=yes"; if (o == "userns") print "userns=yes"; next }
    sec && !/^   / { sec = 0 }
    /WARNING: Running in rootless-mode without cgroups/ { print "no_cgroups=yes" }
    /WARNING: No cpuset support/         { print "no_cpuset=yes" }
    /WARNING: No cpu cfs quota support/  { print "no_cfs_quota=yes" }
    (/ERROR:|Cannot connect|error during connect|permission denied/) && !err { err = $0; sub(/^ *(ERROR: *)?/, "", err); print "server_error=" err }
  '
}

# probe ARGS...: runs a throwaway container of the node-exporter image (busybox
# sh; the lab pulls it anyway) and prints "ok" or the error's first line.
probe() {
  local out
  if out=$(docker run --rm --network none --user 0 --entrypoint /bin/sh "$@" 2>&1); then echo ok; else
    printf '%s\n' "$out" | awk '/[Ee]rror/ { sub(/^docker: /, ""); print; exit }'; fi
}

# port_state PORT: free, lab (published by this project) or taken.
port_state() {
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then echo free; return; fi
  if [ -n "$(docker ps -q --filter "label=com.docker.compose.project=$(setting COMPOSE_PROJECT_NAME)" --filter "publish=$1" 2>/dev/null)" ]; then echo lab; else echo taken; fi
}

# cadvisor_labels: compose-labelled series in the running cAdvisor's metrics
# (none when it cannot reach the container runtime, google/cadvisor#3772).
cadvisor_labels() {
  docker compose exec -T cadvisor wget -qO- http://127.0.0.1:8080/metrics 2>/dev/null \
    | grep -c 'container_label_com_docker_compose_service="[^"]'
}

selected() { # selected SERVICE: is it among $SERVICES (empty: all)?
  case " $SERVICES " in "  "|*" $1 "*) return 0 ;; *) return 1 ;; esac
}

gather() {
  local n v img info rc ran=no
  SERVICES=$(setting SERVICES)
  for n in SERVICES APP_CPUSET NGINX_CPUSET LOADGEN_CPUSET MONITORING_CPUSET APP_CPUS NGINX_CPUS LOADGEN_CPUS NGINX_PORT PROMETHEUS_PORT GRAFANA_PORT; do
    echo "set_$n=$(setting "$n")"
  done
  echo "make_version=$(make --version 2>/dev/null | awk 'NR == 1 { print $NF }')"
  echo "python3=$(command -v python3 >/dev/null 2>&1 && echo yes || echo no)"
  command -v docker >/dev/null 2>&1 || { echo "cli=no"; return; }
  echo "cli=yes"
  info=$(docker info 2>&1); rc=$?
  printf '%s\n' "$info" | facts_from_info
  [ $rc = 0 ] || return 0
  v=$(docker compose version --short 2>/dev/null) && echo "compose_version=${v#v}"
  echo "services_all=$(docker compose config --services 2>/dev/null | tr '\n' ' ')"
  v=$(docker buildx version 2>/dev/null | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^v?[0-9]+\.[0-9]+/) { print $i; exit } }') && echo "buildx_version=${v#v}"
  for n in NGINX_PORT PROMETHEUS_PORT GRAFANA_PORT; do echo "port_$n=$(port_state "$(setting "$n")")"; done
  img=$(setting NODE_EXPORTER_IMAGE)
  if selected node-exporter || selected cadvisor; then
    # What compose asks for node-exporter, then the fallback without rslave.
    v=$(probe -v /:/host:ro,rslave "$img" -c true)
    if [ "$v" = ok ]; then echo "root_mount=rslave"; else
      echo "root_mount_error=$v"
      if [ "$(probe -v /:/host:ro "$img" -c true)" = ok ]; then echo "root_mount=ro"; else echo "root_mount=none"; fi
    fi
    # cAdvisor finds containerd's socket through compose's /var/run mount.
    v=$(probe -v /var/run:/var/run:ro "$img" -c 'test -S /var/run/containerd/containerd.sock')
    case $v in ok) echo "containerd_sock=yes" ;; '') echo "containerd_sock=no" ;; *) echo "containerd_sock=unknown" ;; esac
    case $v in ok|'') ran=yes ;; esac
  fi
  # compose runs cAdvisor privileged: does this engine start a privileged
  # container? (One whose host lacks a capability in its bounding set, as a
  # sandboxed or nested engine may, refuses every one: "unable to apply caps".)
  # Asked only where the same image ran unprivileged just above, so that a
  # refusal is the privilege's.
  if [ "$ran" = yes ] && selected cadvisor && docker compose config cadvisor 2>/dev/null | grep -q '^ *privileged: true'; then
    echo "cadvisor_privileged=yes"
    echo "privileged_run=$(probe --privileged "$img" -c true | tr '|' '/')"
  fi
  if [ -n "$(docker compose ps -q --status running cadvisor 2>/dev/null)" ]; then
    echo "cadvisor_running=yes"; echo "cadvisor_labels=$(cadvisor_labels)"
  fi
}

# ------------------------------------------------------------------ judge

vge() { # vge A B: version A >= B (numeric parts; -rc and the like ignored)
  awk -v a="$1" -v b="$2" 'BEGIN { na = split(a, x, /[^0-9]+/); nb = split(b, y, /[^0-9]+/)
    for (i = 1; i <= 4; i++) { if (x[i] + 0 > y[i] + 0) exit 0; if (x[i] + 0 < y[i] + 0) exit 1 } exit 0 }'
}

row() { printf 'row|%s|%s|%s|%s\n' "$1" "$2" "$3" "${4:-}"; }
plan() { printf 'plan|%s\n' "$1"; }
f() { eval "printf '%s' \"\${F_$1:-}\""; } # f NAME: a fact, or empty

# highest_cpu LIST: the highest core a cpuset list ("0-3,5") names.
highest_cpu() { printf '%s\n' "$1" | tr ',' '\n' | awk -F- '$NF + 0 > m { m = $NF + 0 } END { print m + 0 }'; }

# The doctor's verdicts, from the facts (NAME=value lines on stdin), as rows
# and make up's plan. Each check below adds its rows; they share left (the
# services left out), missing (what that costs), mount (node-exporter's mount
# of /) and fail (a FAIL row: make up is blocked), judge's locals.
judge() {
  local k v left="" missing="" mount="ro,rslave" fail=0
  while IFS= read -r k; do
    case $k in *=*) ;; *) continue ;; esac
    v=${k#*=}; k=${k%%=*}
    case $k in *[!a-zA-Z0-9_]*|'') continue ;; esac
    printf -v "F_$k" '%s' "$v"
  done
  SERVICES=$(f set_SERVICES)
  check_engine || return 0
  check_versions
  check_kind
  check_node_exporter
  check_cadvisor
  check_ports
  check_cores
  check_host_tools
  plan_up
}

# A CLI, and an engine that answers it; else nothing more to judge (1).
check_engine() {
  local k v n
  if [ "$(f cli)" = no ]; then
    row FAIL "Docker CLI" "docker is not on PATH" "install Docker Desktop, or Docker Engine with its compose plugin"
    plan "UP_BLOCKED=1"; return 1
  fi
  if [ "$(f server)" != yes ]; then
    v=$(f server_error)
    case $v in
      *"permission denied"*) k="add yourself to the docker group (sudo usermod -aG docker \$USER), then log in again" ;;
      *) k="start Docker (Docker Desktop, or: sudo systemctl start docker); docker context ls shows where the CLI looks" ;;
    esac
    row FAIL "Docker engine" "no engine answers: ${v:-docker info failed}" "$k"
    plan "UP_BLOCKED=1"; return 1
  fi
}

# The engine and its kind; Compose and buildx new enough.
check_versions() {
  local k v n
  v=$(f server_version)
  if ! vge "$v" $MIN_ENGINE; then row FAIL "Docker engine" "$v is older than $MIN_ENGINE" "update Docker"; fail=1
  else
    k="rootful"; [ "$(f rootless)" = yes ] && k="rootless"; [ "$(f userns)" = yes ] && k="userns-remap"
    n=$(f storage_driver); [ "$(f driver_type)" = io.containerd.snapshotter.v1 ] && n="$n (containerd image store)"
    row ok "Docker engine" "$v on $(f os), $k, cgroup v$(f cgroup_version) ($(f cgroup_driver)), $n"
  fi
  v=$(f compose_version)
  if [ -z "$v" ]; then row FAIL "Compose" "docker compose (v2) is not installed" "install the Compose plugin (docker-compose-plugin)"; fail=1
  elif ! vge "$v" $MIN_COMPOSE; then row FAIL "Compose" "$v is older than $MIN_COMPOSE (depends_on: restart)" "update the Compose plugin"; fail=1
  else row ok "Compose" "$v"; fi
  v=$(f buildx_version)
  if [ -z "$v" ]; then row warn "buildx" "not installed: Compose builds the lab's images without Bake (2.40 and later fall back to the classic builder, with a warning)" "install docker-buildx-plugin to build with BuildKit"
  elif ! vge "$v" $MIN_BUILDX && vge "$(f compose_version)" 2.40; then
    # Compose 2.40 and 5.x build with Bake by default and refuse older buildx.
    row FAIL "buildx" "$v: Compose $(f compose_version) builds with Bake, which needs buildx $MIN_BUILDX or later" "update docker-buildx-plugin"; fail=1
  else row ok "buildx" "$v"; fi
}

# What the engine's kind does to the lab.
check_kind() {
  if [ "$(f os)" = "Docker Desktop" ]; then
    row info "Docker Desktop" "containers run in Desktop's Linux VM: cores, memory, / and /var/lib/docker are the VM's" ""
  fi
  if [ "$(f no_cgroups)" = yes ]; then
    row warn "cgroups" "rootless without cgroups: the CPU and memory limits are ignored, so the services are not kept apart" "boot with cgroup v2 and systemd (Docker's rootless docs: Limiting resources)"
  fi
  if [ "$(f userns)" = yes ]; then
    row info "userns-remap" "node-exporter and cAdvisor run in the host's user namespace (userns_mode: host); the load generator and the report write results/ as a remapped uid" "if make load cannot write results/, make it writable: chmod o+w results"
  fi
}

# node-exporter: the host's / read-only, rslave where / is a shared mount.
check_node_exporter() {
  if selected node-exporter; then
    case $(f root_mount) in
      rslave) row ok "/ for node-exporter" "/ is a shared mount: node-exporter mounts it read-only, rslave" ;;
      ro) mount=ro
        row warn "/ for node-exporter" "/ is not a shared mount ($(f root_mount_error)): node-exporter starts with a plain read-only mount of /; host CPU, memory and context switches are unaffected, only mounts made later stay unseen" "on Linux: sudo mount --make-rshared / (systemd hosts have it so); elsewhere nothing to do" ;;
      none) left="$left node-exporter"
        row warn "/ for node-exporter" "no container may mount / ($(f root_mount_error)): node-exporter is left out" "on Linux: sudo mount --make-rshared /"
        missing="$missing; node-exporter: context switches per request, the host CPU panels, the report's cores and memory" ;;
      *) row warn "/ for node-exporter" "not checked (no probe result): make up tries rslave and leaves node-exporter out if refused" "" ;;
    esac
  fi
}

# cAdvisor: per-container CPU (nginx CPU per request), memory, network.
check_cadvisor() {
  local v
  if selected cadvisor; then
    v=""
    if [ "$(f os)" = "Docker Desktop" ]; then v="it cannot start on Docker Desktop (privileged, /dev/kmsg, the VM's /var/lib/docker)"
    elif [ "$(f rootless)" = yes ]; then v="it cannot start on rootless Docker (privileged, /dev/kmsg, /var/lib/docker)"
    elif [ "$(f cadvisor_privileged)" = yes ] && [ -n "$(f privileged_run)" ] && [ "$(f privileged_run)" != ok ]; then
      v="compose runs it privileged, and this engine starts no privileged container ($(f privileged_run))"
    elif [ "$(f driver_type)" = io.containerd.snapshotter.v1 ] && [ "$(f containerd_sock)" = no ]; then
      v="the engine keeps images in containerd, whose socket (/run/containerd/containerd.sock) containers cannot reach here: cAdvisor would start and label no container (google/cadvisor#3772)"
    elif [ "$(f cadvisor_running)" = yes ] && [ "$(f cadvisor_labels)" = 0 ]; then
      v="it runs but labels no container (google/cadvisor#3772)"
    fi
    if [ -n "$v" ]; then
      left="$left cadvisor"
      row warn "cAdvisor" "left out: $v" "none needed: the rest of the lab works without it"
      missing="$missing; cAdvisor: nginx CPU per request, the load generator's CPU, per-container CPU, memory and network panels"
    elif [ "$(f cadvisor_running)" = yes ]; then row ok "cAdvisor" "running; $(f cadvisor_labels) series labelled by compose service"
    else row ok "cAdvisor" "can start (make up checks that it labels containers)"; fi
  fi
}

# Ports on 127.0.0.1.
check_ports() {
  local n v
  for n in NGINX_PORT:nginx PROMETHEUS_PORT:prometheus GRAFANA_PORT:grafana; do
    selected "${n#*:}" || continue
    n=${n%:*}; v=$(f "set_$n")
    if ! [[ $v =~ ^[0-9]{1,5}$ ]] || [ "$((10#$v))" -lt 1 ] || [ "$((10#$v))" -gt 65535 ]; then
      row FAIL "$n" "$n=$v is not a port" "set $n to a free port from 1 to 65535 in .env or on the command line (make up $n=...)"
      fail=1; continue
    fi
    case $(f "port_$n") in
      free) row ok "port $v" "free ($n)" ;;
      lab) row ok "port $v" "in use by this lab ($n)" ;;
      taken) row FAIL "port $v" "127.0.0.1:$v is taken by another process ($n)" "set $n to a free port in .env or on the command line (make up $n=...)"; fail=1 ;;
    esac
  done
}

# CPU sets and limits against the engine's cores.
check_cores() {
  local k v n cores
  cores=$(f ncpu); n=0
  if [ -n "$cores" ]; then
    for k in APP NGINX LOADGEN MONITORING; do # (no MONITORING_CPUS: its limit is a CPU set)
      v=$(f "set_${k}_CPUSET")
      if [ -n "$v" ]; then
        if [ "$(f no_cpuset)" = yes ]; then
          row FAIL "${k}_CPUSET" "${k}_CPUSET=$v but the engine has no cpuset support (rootless: the cpuset controller is not delegated)" "leave ${k}_CPUSET empty, or delegate cpuset to the user's systemd"; fail=1; n=1
        elif [ "$(highest_cpu "$v")" -ge "$cores" ]; then
          row FAIL "${k}_CPUSET" "${k}_CPUSET=$v names core $(highest_cpu "$v"); the engine has $cores (0-$((cores - 1)))" "pick cores below $cores (see .env)"; fail=1; n=1
        fi
      fi
      v=$(f "set_${k}_CPUS")
      if [ -n "$v" ] && awk -v a="$v" -v c="$cores" 'BEGIN { exit !(a + 0 > c + 0) }'; then
        row FAIL "${k}_CPUS" "${k}_CPUS=$v is more than the engine's $cores cores: Docker refuses it" "set ${k}_CPUS to $cores or less"; fail=1; n=1
      fi
    done
    [ $n = 0 ] && row ok "cores" "$cores cores; the CPU sets and limits fit"
  fi
}

# What runs on the host: make report needs nothing; make contract needs python3; GNU make.
check_host_tools() {
  local v
  row ok "make report" "runs in a container: no Python needed on this machine" ""
  if [ "$(f python3)" = no ]; then
    row info "python3" "not on this machine: make up, load, max and report need none; make contract and the tests (make test) do" "install Python 3 for make contract"
  fi
  v=$(f make_version)
  if [ -n "$v" ] && ! vge "$v" 3.82; then
    row warn "make" "GNU make $v ignores .SHELLFLAGS: a failing command inside a pipe goes unnoticed" "use a newer GNU make (macOS: brew install make, then gmake)"
  fi
}

# What make up starts: the lab first, then the watchers one by one.
plan_up() {
  local k core="" optional=""
  for k in ${SERVICES:-$(f services_all)}; do
    case " $OPTIONAL " in
      *" $k "*) case " $left " in *" $k "*) ;; *) optional="$optional $k" ;; esac ;;
      *) core="$core $k" ;;
    esac
  done
  plan "NODE_EXPORTER_ROOT_MOUNT=$mount"
  plan "UP_CORE='${core# }'"
  plan "UP_OPTIONAL='${optional# }'"
  plan "UP_LEFT_OUT='${left# }'"
  [ -n "$missing" ] && row missing "missing" "${missing#; }" ""
  [ $fail = 0 ] || plan "UP_BLOCKED=1"
}

# ------------------------------------------------------------------ output

table() { # rows (stdin) -> the table; exit 1 if a row failed
  awk -F'|' '
    $1 == "row" && $2 != "missing" { printf "%-7s %-20s %s\n", ($2 == "ok" ? "ok" : $2), $3, $4; if ($5 != "") printf "%-28s fix: %s\n", "", $5; if ($2 == "FAIL") bad = 1 }
    $1 == "row" && $2 == "missing" { miss = $4 }
    END {
      print ""
      if (bad) print "The lab cannot start: fix the FAIL rows above."
      else print "The lab can start."
      if (miss != "") { n = split(miss, m, /; /); print "Missing without the left-out services:"; for (i = 1; i <= n; i++) print "  " m[i] }
      exit bad
    }'
}

case ${1:-} in
  --facts) facts_from_info ;;
  --cadvisor-check) # after make up: does the running cAdvisor label containers?
    [ -n "$(docker compose ps -q --status running cadvisor 2>/dev/null)" ] || exit 0
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ "$(cadvisor_labels)" -gt 0 ] 2>/dev/null && exit 0
      sleep 2
    done
    echo "doctor: cAdvisor runs but labels no container (google/cadvisor#3772): left out; nginx CPU per request and the per-container panels stay empty" >&2
    exit 1 ;;
  --judge) judge ;;
  --up)
    out=$(gather | judge)
    printf '%s\n' "$out" | awk -F'|' '$1 == "row" && $2 != "ok" && $2 != "info" && $2 != "missing" { printf "doctor: %s %s: %s\n", $2, $3, $4; if ($5 != "") printf "doctor:   fix: %s\n", $5 }' >&2
    printf '%s\n' "$out" | sed -n 's/^plan|//p'
    case $out in *"plan|UP_BLOCKED=1"*) echo "doctor: the lab cannot start (make doctor shows every check)" >&2; exit 1 ;; esac ;;
  '')
    echo "uds-lab doctor: what this machine's Docker can run"
    echo
    gather | judge | table ;;
  *) echo "usage: $0 [--up|--facts|--judge]" >&2; exit 2 ;;
esac
