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
# The socket file's mode is its access control, by the lab's one rule
# (contract/socket-modes.json): read and write for the owner (the app) and the
# group (nginx's), nothing for others, no bits beyond 0777.
digits=${APP_SOCKET_MODE#0o}
case $digits in
  '' | *[!0-7]*) fail "APP_SOCKET_MODE=\"$APP_SOCKET_MODE\": must be an octal permission such as 0660" ;;
esac
bits=$((0$digits))
if [ $bits -gt 511 ]; then
  fail "APP_SOCKET_MODE=\"$APP_SOCKET_MODE\": must not set bits beyond 0777 (setuid/setgid/sticky are meaningless on a socket)"
elif [ $((bits & 7)) -ne 0 ]; then
  fail "APP_SOCKET_MODE=\"$APP_SOCKET_MODE\": must give others nothing (any local user could connect); use 0660 and APP_SOCKET_GID"
elif [ $((bits & 48)) -ne 48 ]; then
  fail "APP_SOCKET_MODE=\"$APP_SOCKET_MODE\": must give the group read and write (nginx's group connects through it)"
elif [ $((bits & 384)) -ne 384 ]; then
  fail "APP_SOCKET_MODE=\"$APP_SOCKET_MODE\": must give the owner read and write (connecting needs write permission)"
fi
# listen.mode reads octal digits.
APP_SOCKET_MODE=0$digits
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
