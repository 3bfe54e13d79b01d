# Stands in for stacks/node on the official node:*-slim image (NODE_IMAGE):
# Debian's nodejs 18 running the stack's server.js unchanged. Built with
# stacks/node as the context; tests/static checks that it copies, sets and
# starts what the stack's own Dockerfile does.
ARG BASE
FROM ${BASE}
ARG APP_UID=10001
ARG APP_GID=101
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /sock \
 && chown ${APP_UID}:${APP_GID} /sock \
 && chmod 0750 /sock
COPY server.js /app/
USER ${APP_UID}:${APP_GID}
ENV NODE_ENV=production APP_TCP_ADDR=:8080 APP_UNIX_SOCKET=/sock/app.sock APP_SOCKET_MODE=0660
EXPOSE 8080
ENTRYPOINT ["node", "/app/server.js"]
