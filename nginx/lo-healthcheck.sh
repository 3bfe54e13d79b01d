#!/bin/sh
# nginx-lo's healthcheck (compose.yaml). nginx-lo lives in the app's network
# namespace. When the app's container restarts (a crash under its restart
# policy), Docker gives the app a new namespace and leaves nginx-lo in the old
# one, where nobody can reach it. The app makes its socket anew at each start:
# a socket newer than nginx's pid file means the app started after this nginx,
# so nginx stops (SIGTERM to PID 1, nginx's master) and the restart policy
# starts it again, in the app's new namespace.
# shellcheck disable=SC3013 # -nt is not POSIX, but the nginx image's sh (dash) has it, as busybox's does
if [ "$APP_UNIX_SOCKET" -nt "$NGINX_RUN_DIR/nginx.pid" ]; then
  echo "the app restarted after this nginx: stopping, to start again in its network namespace" >&2
  kill -TERM 1
  exit 1
fi
# Then what nginx checks: nginx, and the app on both listeners.
exec sh "$(dirname "$0")/healthcheck.sh"
