# The test bed's stand-in for this stack (tests/e2e/standins.sh; the test bed
# has no registry, so no rust:* image, and its containers reach no crates.io):
# the same binary built on the host by scripts/test-deps.sh (cargo, the crates
# of Cargo.lock, static as the Dockerfile builds it), which standins.sh puts
# beside this folder's files in the context (uds-lab-axum). The last stage is
# the Dockerfile's; tests/static checks that it copies, sets and starts what the
# stack's own Dockerfile does.
ARG BASE
FROM ${BASE} AS build
ARG APP_UID=10001
ARG APP_GID=101
WORKDIR /src
# The folder and the binary built on the host (the context standins.sh made).
COPY . /src/
RUN install -D -m 0755 /src/uds-lab-axum /out/usr/local/bin/uds-lab-axum \
 && mkdir -p /out/sock \
 && chown ${APP_UID}:${APP_GID} /out/sock \
 && chmod 0750 /out/sock

FROM scratch
ARG APP_UID=10001
ARG APP_GID=101
COPY --from=build /out/usr/local/bin/uds-lab-axum /usr/local/bin/uds-lab-axum
COPY --from=build --chown=${APP_UID}:${APP_GID} /out/sock /sock
USER ${APP_UID}:${APP_GID}
ENV APP_TCP_ADDR=:8080 APP_UNIX_SOCKET=/sock/app.sock APP_SOCKET_MODE=0660
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/uds-lab-axum"]
