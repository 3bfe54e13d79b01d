#!/usr/bin/env bash
# Builds the test bed's stand-in images, where missing, and prints the env
# lines that point compose at them (IMAGE=name:tag). Nothing here changes what
# users run: compose.yaml, the configs and the Makefile are used as they are.
#   debian base  debootstrap bookworm, `docker import`     (cached tarball)
#   nginx        Debian's nginx 1.22 + the official entrypoint's template step
#   exporter     Debian's prometheus-nginx-exporter 0.11
#   prometheus, node-exporter   built from module sources at .env's versions
#   cadvisor     the project's own main (standins/cadvisor) over cAdvisor's
#                library at .env's version (its command's module is not served)
#   oha          built from its crate at .env's version, on the debian base
#   golang       this machine's Go + the modules of every Go image (GO_IMAGE build arg)
#   debian base  also WRK_BASE_IMAGE: loadgen/wrk installs Debian's wrk on it
#   python       Debian's Python 3.11 with pip and report/requirements.txt's
#                wheels (PYTHON_IMAGE of report/Dockerfile)
#   stacks       each stacks/<name> on Debian's packages (its stack.env's
#                STACK_TEST_PACKAGES, its standin.Dockerfile), or a Rust one's
#                binary built here (scripts/test-deps.sh stack-<name>), or a
#                Java one's jar built here (the same), or a
#                Python one's PyPI pins on Debian's python3 (pypi_base):
#                STACK_<NAME>_IMAGE, for make up STACK=<name> APP_IMAGE=...
set -euo pipefail
cd "$(dirname "$0")/../.."
dotenv=$(scripts/dotenv.sh --export) # fails the script on a line it cannot read
eval "$dotenv"
CACHE=${UDS_LAB_CACHE:-$HOME/.cache/uds-lab}
HERE=tests/e2e/standins
export DOCKER_BUILDKIT=0
log() { printf '[standins %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

have() { docker image inspect "$1" >/dev/null 2>&1; }

# recipe DOCKERFILE [BUILD-ARG...]: a hash of what an image is built from (its
# Dockerfile, the files beside it in a folder of its own, its build args), kept
# as a label so that an edited stand-in is rebuilt and an unchanged one is not.
recipe() {
  local file=$1; shift
  { cat "$file"; [ "$(dirname "$file")" = $HERE ] || cat "$(dirname "$file")"/*; echo "$@"; } | sha256sum | cut -c1-16
}
current() { # current IMAGE RECIPE: the image exists and was built from RECIPE
  [ "$(docker image inspect -f '{{index .Config.Labels "uds-lab.recipe"}}' "$1" 2>/dev/null)" = "$2" ]
}

# build IMAGE DOCKERFILE CONTEXT [BUILD-ARG...]
build() {
  local image=$1 file=$2 ctx=$3; shift 3
  local r
  r=$(recipe "$file" "$@")
  current "$image" "$r" && return
  log "building $image"
  local args=()
  for a in "$@"; do args+=(--build-arg "$a"); done
  docker build -q -t "$image" --label "uds-lab.recipe=$r" -f "$file" "${args[@]}" "$ctx" >/dev/null
}

BASE=uds-lab-standin/debian:bookworm
if ! have "$BASE"; then
  tarball=$CACHE/debian-bookworm-minbase.tar
  if [ ! -s "$tarball" ]; then
    mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
    log "debootstrap bookworm from ${mirror:=http://deb.debian.org/debian} (about a minute)"
    root=$(mktemp -d)
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
    tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
  fi
  log "importing $BASE"
  docker import "$tarball" "$BASE" >/dev/null
fi

TOOLS=uds-lab-standin/tools:bookworm
build "$TOOLS" $HERE/tools.Dockerfile $HERE "BASE=$BASE"

# Containers here reach Debian's mirror but not PyPI: the wheels of
# report/requirements.txt, downloaded on this machine (its Python is 3.11 on
# bookworm too), go into the image, and pip installs from them.
PYTHON=uds-lab-standin/python:3.11-debian
reqs=$(sha256sum report/requirements.txt | cut -c1-16)
if ! current "$PYTHON" "$(recipe $HERE/python.Dockerfile "BASE=$BASE" "REQUIREMENTS=$reqs")"; then
  ctx=$(mktemp -d)
  log "downloading the wheels of report/requirements.txt"
  python3 -m pip download -q --only-binary=:all: -r report/requirements.txt -d "$ctx/wheels" >&2
  build "$PYTHON" $HERE/python.Dockerfile "$ctx" "BASE=$BASE" "REQUIREMENTS=$reqs"
  rm -rf "$ctx"
fi

NGINX=uds-lab-standin/nginx:1.22-debian
build "$NGINX" $HERE/nginx/Dockerfile $HERE/nginx "TOOLS=$TOOLS"
EXPORTER=uds-lab-standin/nginx-exporter:0.11-debian
build "$EXPORTER" $HERE/nginx-exporter.Dockerfile $HERE "TOOLS=$TOOLS"

# binary NAME IMAGE-TAG DEPS-NAME [WORKDIR]: a Go tool built by scripts/test-deps.sh
binary() {
  local name=$1 image=$2 dep=$3 workdir=${4:-/data}
  local args=("TOOLS=$TOOLS" "NAME=$name" "WORKDIR=$workdir")
  current "$image" "$(recipe $HERE/binary.Dockerfile "${args[@]}")" && { echo "$image"; return; }
  local bin ctx
  bin=$(scripts/test-deps.sh "$dep")
  ctx=$(mktemp -d)
  cp "$bin" "$ctx/$name"
  build "$image" $HERE/binary.Dockerfile "$ctx" "${args[@]}"
  rm -rf "$ctx"
  echo "$image"
}
PROMETHEUS=$(binary prometheus "uds-lab-standin/prometheus:${PROMETHEUS_IMAGE##*:}" prometheus /prometheus)
NODE_EXPORTER=$(binary node_exporter "uds-lab-standin/node-exporter:${NODE_EXPORTER_IMAGE##*:}" node-exporter)

# cAdvisor: its command's module is not in the Go module proxy, its library
# is. tests/e2e/standins/cadvisor is a main of the project's own that wires
# cAdvisor's container manager (raw and Docker handlers, the host's cgroups)
# and its Prometheus collectors, built here at the library version its go.mod
# pins, which should be CADVISOR_IMAGE's tag (docs/tests.md says what differs
# from the official command).
CADVISOR_TAG=${CADVISOR_IMAGE##*:}
CADVISOR=uds-lab-standin/cadvisor:$CADVISOR_TAG
if ! current "$CADVISOR" "$(recipe $HERE/cadvisor/Dockerfile "TOOLS=$TOOLS")"; then
  lib=$(cd $HERE/cadvisor && go list -m -f '{{.Version}}' github.com/google/cadvisor)
  [ "$lib" = "$CADVISOR_TAG" ] || log "note: cAdvisor's library is $lib in $HERE/cadvisor/go.mod, CADVISOR_IMAGE is $CADVISOR_TAG"
  ctx=$(mktemp -d)
  log "building cAdvisor's stand-in on its library $lib"
  (cd $HERE/cadvisor && CGO_ENABLED=0 go build -trimpath -o "$ctx/cadvisor" .)
  build "$CADVISOR" $HERE/cadvisor/Dockerfile "$ctx" "TOOLS=$TOOLS"
  rm -rf "$ctx"
fi

# oha (make max GENERATOR=oha): containers here do not reach crates.io, so the
# binary is built on this machine (scripts/test-deps.sh, as loadgen/oha builds
# it) and put on the debian base with python3, as loadgen/oha's last stage is.
OHA=uds-lab-standin/oha:$OHA_VERSION
if ! current "$OHA" "$(recipe $HERE/oha.Dockerfile "BASE=$BASE")"; then
  ctx=$(mktemp -d)
  cp "$(scripts/test-deps.sh oha)" "$ctx/oha"
  build "$OHA" $HERE/oha.Dockerfile "$ctx" "BASE=$BASE"
  rm -rf "$ctx"
fi

# The Go image is keyed by the go.sum files of every module built in an image
# (services/*, contract/*, loadgen/openloop): their modules are baked in. A module without
# dependencies (services/floor) has no go.sum.
GO_VERSION=$(go env GOVERSION)
GO_MODULES=$(ls services/*/go.mod contract/*/go.mod loadgen/*/go.mod)
GO_SUMS=$(for m in $GO_MODULES; do [ ! -f "${m%go.mod}go.sum" ] || echo "${m%go.mod}go.sum"; done)
# shellcheck disable=SC2086 # a list of go.sum paths (no spaces), split into arguments on purpose
GOLANG=uds-lab-standin/golang:${GO_VERSION#go}-$(cat $GO_SUMS | sha256sum | cut -c1-12)
if ! have "$GOLANG"; then
  ctx=$(mktemp -d)
  log "collecting the modules of services/*, contract/* and loadgen/* for $GOLANG"
  for mod in $GO_MODULES; do
    (cd "$(dirname "$mod")" && GOMODCACHE=$ctx/mod GOFLAGS=-mod=mod go mod download)
  done
  mv "$ctx/mod/cache/download" "$ctx/goproxy"
  chmod -R u+w "$ctx/mod" && rm -rf "$ctx/mod"
  cp -al "$(go env GOROOT)" "$ctx/go" 2>/dev/null || cp -a "$(go env GOROOT)" "$ctx/go"
  build "$GOLANG" $HERE/golang.Dockerfile "$ctx" "TOOLS=$TOOLS"
  rm -rf "$ctx"
fi

# The reference stacks (stacks/*) on Debian's packages, running the stack's own
# code and config (its folder is the build context, its standin.Dockerfile the
# recipe). Tagged by a hash of that folder, so an edited stack is rebuilt.
# pypi_base NAME: an image of Debian's python3 and pip with stacks/NAME's
# requirements.txt installed from wheels downloaded here (--no-deps: the file
# pins every package), tagged by that file; its name printed.
pypi_base() {
  local name=$1 image ctx
  image=uds-lab-standin/pypi-$name:$(sha256sum "stacks/$name/requirements.txt" | cut -c1-12)
  if ! have "$image"; then
    ctx=$(mktemp -d)
    log "downloading the wheels of stacks/$name/requirements.txt"
    python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --no-deps \
      -r "stacks/$name/requirements.txt" -d "$ctx/wheels" >&2
    cat >"$ctx/Dockerfile" <<'DOCKERFILE'
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-pip \
 && rm -rf /var/lib/apt/lists/*
COPY wheels/ /tmp/wheels/
RUN python3 -m pip install --no-cache-dir --no-index --no-deps --break-system-packages /tmp/wheels/*.whl \
 && rm -rf /tmp/wheels
DOCKERFILE
    log "building $image"
    docker build -q -t "$image" --build-arg "BASE=$BASE" "$ctx" >/dev/null
    rm -rf "$ctx"
  fi
  echo "$image"
}

stacks_env=""
for name in $(scripts/stack.sh --list run); do
  [ "$name" != go ] || continue
  # A stack built with maven (a pom.xml: jetty): containers here reach no
  # Maven Central, so its jar is built on this machine (scripts/test-deps.sh,
  # from pom.xml's pins) into its folder, the context, before it is hashed.
  [ ! -f "stacks/$name/pom.xml" ] || scripts/test-deps.sh "stack-$name" >/dev/null
  image=uds-lab-standin/stack-$name:$(cat stacks/"$name"/* | sha256sum | cut -c1-12)
  ctx=stacks/$name
  # A stack built with cargo (a Cargo.toml: axum): containers here reach no
  # crates.io, so its binary is built on this machine (scripts/test-deps.sh,
  # from its Cargo.lock) and put beside its files in the context.
  if [ -f "stacks/$name/Cargo.toml" ] && ! current "$image" "$(recipe "stacks/$name/standin.Dockerfile" "BASE=$BASE" \
    "PACKAGES=$(scripts/stack.sh "$name" STACK_TEST_PACKAGES)")"; then
    ctx=$(mktemp -d)
    cp -R "stacks/$name/." "$ctx/"
    cp "$(scripts/test-deps.sh "stack-$name")" "$ctx/uds-lab-$name"
  fi
  base=$BASE
  packages=$(scripts/stack.sh "$name" STACK_TEST_PACKAGES)
  # A Python stack Debian does not package (python3-pip among its packages:
  # granian): its base is Debian's python3 with the wheels of its
  # requirements.txt, downloaded on this machine (containers here reach no
  # PyPI; its Python is 3.11 on bookworm too), as scripts/test-deps.sh
  # installs the same pins for tests/integration.
  case " $packages " in *" python3-pip "*) base=$(pypi_base "$name") ;; esac
  build "$image" "stacks/$name/standin.Dockerfile" "$ctx" "BASE=$base" "PACKAGES=$packages"
  [ "$ctx" = "stacks/$name" ] || rm -rf "$ctx"
  stacks_env+="STACK_$(tr 'a-z-' 'A-Z_' <<<"$name")_IMAGE=$image"$'\n'
done

cat <<ENV
NGINX_IMAGE=$NGINX
NGINX_EXPORTER_IMAGE=$EXPORTER
PROMETHEUS_IMAGE=$PROMETHEUS
NODE_EXPORTER_IMAGE=$NODE_EXPORTER
CADVISOR_IMAGE=$CADVISOR
OHA_IMAGE=$OHA
GO_IMAGE=$GOLANG
APP_RUNTIME_IMAGE=scratch
WRK_BASE_IMAGE=$BASE
PYTHON_IMAGE=$PYTHON
ENV
printf '%s' "$stacks_env"
