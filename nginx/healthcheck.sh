#!/bin/sh
# The healthcheck of nginx and nginx-lo (compose.yaml): nginx answers, and
# through it the app on both of its listeners (/_tcp/ and /_uds/ in the
# template: the app's own protocol, HTTP or FastCGI, as the paths reach it).
# So the lab decides the app is ready without asking anything of its image (no
# HEALTHCHECK, no shell or client in it): load starts (the load generator
# waits for nginx healthy) only once the app answers on its port and on its
# socket.
# Any answer of the app's counts, 404 included; nginx's 502 (cannot connect),
# 504 (no answer in time) and 503 (also an app's "not ready") do not.
port=${NGINX_LISTEN_PORT:?NGINX_LISTEN_PORT is not set}
curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$port/healthz" || exit 1
for listener in tcp uds; do
  code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/_$listener/healthz") || code=000
  case $code in
    000 | 502 | 503 | 504)
      echo "the app does not answer on its $listener listener (nginx: HTTP $code)" >&2
      exit 1 ;;
  esac
done
