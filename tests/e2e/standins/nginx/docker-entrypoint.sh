#!/bin/bash
# What the official image's entrypoint does that the lab relies on:
# 20-envsubst-on-templates.sh renders $NGINX_ENVSUBST_TEMPLATE_DIR/**/*.template into
# $NGINX_ENVSUBST_OUTPUT_DIR (keeping subfolders) with every defined environment variable.
# Plus the one difference of Debian's build: the official nginx is compiled with
# --user=nginx, Debian's runs workers as nobody, so "user nginx;" is added to -g
# when the master runs as root (as another user it has no say over workers).
set -euo pipefail
if [ "${1:-}" = nginx ]; then
  tdir=${NGINX_ENVSUBST_TEMPLATE_DIR:-/etc/nginx/templates}
  odir=${NGINX_ENVSUBST_OUTPUT_DIR:-/etc/nginx/conf.d}
  suffix=${NGINX_ENVSUBST_TEMPLATE_SUFFIX:-.template}
  vars=$(printf '${%s} ' $(env | cut -d= -f1))
  # Subfolders too, kept in the output (nginx.conf includes pass/<protocol>/).
  while read -r t; do
    rel=${t#"$tdir/"}
    out="$odir/${rel%"$suffix"}"
    mkdir -p "$(dirname "$out")"
    echo "$0: rendering $t to $out"
    envsubst "$vars" <"$t" >"$out"
  done < <(find "$tdir" -follow -type f -name "*$suffix" | sort)
  if [ "$(id -u)" != 0 ]; then exec "$@"; fi
  args=("$@") found=0
  for i in "${!args[@]}"; do
    if [ "${args[$i]}" = -g ] && [ $((i + 1)) -lt ${#args[@]} ]; then
      args[i + 1]="${args[i + 1]} user nginx;" found=1
    fi
  done
  [ $found = 1 ] || args+=(-g "user nginx;")
  set -- "${args[@]}"
fi
exec "$@"
