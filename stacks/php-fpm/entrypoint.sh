#!/bin/sh
# Starts PHP-FPM in the foreground with the lab's settings (the same APP_*
# names every stack reads), checked first so that a bad value stops the
# container with a message naming it.
set -eu
: "${APP_TCP_ADDR:=:8080}" "${APP_UNIX_SOCKET:=/sock/app.sock}" "${APP_SOCKET_MODE:=0660}"
: "${APP_SOCKET_GID:=}" "${PHP_FPM_CHILDREN:=8}"
fail() { echo "php-fpm stack: $*" >&2; exit 2; }

# PHP-FPM listens on "port" (all addresses) or "host:port", not on ":port".
case $APP_TCP_ADDR in
  :*) PHP_FPM_TCP_LISTEN=${APP_TCP_ADDR#:} ;;
  ?*:*) PHP_FPM_TCP_LISTEN=$APP_TCP_ADDR ;;
  *) fail "APP_TCP_ADDR=\"$APP_TCP_ADDR\": must be host:port or :port" ;;
esac
case ${APP_TCP_ADDR##*:} in
  '' | *[!0-9]*) fail "APP_TCP_ADDR=\"$APP_TCP_ADDR\": the port must be a number" ;;
esac
# The socket file's mode is its access control: nobody but the app's user and
# nginx's group may connect (as the Go app, services/app/config.go).
case $APP_SOCKET_MODE in
  0[0-7][0-7][0-7] | [0-7][0-7][0-7]) ;;
  *) fail "APP_SOCKET_MODE=\"$APP_SOCKET_MODE\": must be an octal mode such as 0660" ;;
esac
case $APP_SOCKET_MODE in
  *[2367]) fail "APP_SOCKET_MODE=\"$APP_SOCKET_MODE\": must not be writable by others (any local user could use the app)" ;;
esac
case $APP_SOCKET_GID in
  *[!0-9]*) fail "APP_SOCKET_GID=\"$APP_SOCKET_GID\": must be a numeric group id (or empty: the process's group)" ;;
esac
case $PHP_FPM_CHILDREN in
  '' | *[!0-9]* | 0) fail "PHP_FPM_CHILDREN=\"$PHP_FPM_CHILDREN\": must be a number of children per pool, at least 1" ;;
esac
export PHP_FPM_TCP_LISTEN APP_UNIX_SOCKET APP_SOCKET_MODE APP_SOCKET_GID PHP_FPM_CHILDREN

# PHP (the official image's php-fpm, or Debian's php-fpm8.2 in PHP_FPM).
# expose_php=0: no X-Powered-By header on every answer.
exec "${PHP_FPM:-php-fpm}" --nodaemonize --force-stderr -d expose_php=0 \
  --fpm-config "${PHP_FPM_CONFIG:-$(dirname "$0")/php-fpm.conf}"
