# Stands in for stacks/php-fpm on the official php:*-fpm image (PHP_FPM_IMAGE):
# Debian's php-fpm 8.2 (OPcache on by default) running the stack's index.php,
# php-fpm.conf and entrypoint.sh unchanged. Built with stacks/php-fpm as the
# context; tests/static checks that it copies, sets and starts what the
# stack's own Dockerfile does.
ARG BASE
FROM ${BASE}
ARG APP_UID=10001
ARG APP_GID=101
# entrypoint.sh runs php-fpm: the official image's name for Debian's php-fpm8.2.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends php-fpm \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(ls /usr/sbin/php-fpm[0-9]*)" /usr/local/sbin/php-fpm \
 && mkdir -p /sock \
 && chown ${APP_UID}:${APP_GID} /sock \
 && chmod 0750 /sock
COPY index.php php-fpm.conf entrypoint.sh /app/
USER ${APP_UID}:${APP_GID}
ENV APP_TCP_ADDR=:8080 APP_UNIX_SOCKET=/sock/app.sock APP_SOCKET_MODE=0660
EXPOSE 8080
STOPSIGNAL SIGQUIT
ENTRYPOINT ["/app/entrypoint.sh"]
