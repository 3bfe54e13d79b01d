# The test bed's stand-in for this stack (tests/e2e/standins.sh; the test bed
# has no registry, so no php:*-fpm image): Debian's packages of stack.env's
# STACK_TEST_PACKAGES (PACKAGES) running the stack's own files unchanged, with
# this folder as the context. tests/static checks that it copies, sets and
# starts what the stack's own Dockerfile does.
ARG BASE
FROM ${BASE}
ARG PACKAGES
ARG APP_UID=10001
ARG APP_GID=101
# entrypoint.sh runs php-fpm: the official image's name for Debian's php-fpm8.2.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PACKAGES \
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
