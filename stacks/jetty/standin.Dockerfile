# The test bed's stand-in for this stack (tests/e2e/standins.sh; the test bed
# has no registry, so no maven:* or eclipse-temurin:* image, and its
# containers reach no Maven Central): the jar built on the host by
# scripts/test-deps.sh (mvn, pom.xml's pins, as the Dockerfile builds it) and
# put in this folder, run by Debian's Java 17 (STACK_TEST_PACKAGES, PACKAGES)
# where users' image runs Temurin's 21. The last stage runs what the
# Dockerfile's does; tests/static checks that it copies, sets and starts the
# same.
ARG BASE
FROM ${BASE} AS build
ARG APP_UID=10001
ARG APP_GID=101
WORKDIR /src
# The folder and the jar built on the host.
COPY . /src/
RUN install -D -m 0644 /src/uds-lab-jetty.jar /out/app/uds-lab-jetty.jar \
 && mkdir -p /out/sock \
 && chown ${APP_UID}:${APP_GID} /out/sock \
 && chmod 0750 /out/sock

FROM ${BASE}
ARG PACKAGES
ARG APP_UID=10001
ARG APP_GID=101
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PACKAGES \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/app/uds-lab-jetty.jar /app/uds-lab-jetty.jar
COPY --from=build --chown=${APP_UID}:${APP_GID} /out/sock /sock
USER ${APP_UID}:${APP_GID}
ENV APP_TCP_ADDR=:8080 APP_UNIX_SOCKET=/sock/app.sock APP_SOCKET_MODE=0660
EXPOSE 8080
ENTRYPOINT ["java", "-jar", "/app/uds-lab-jetty.jar"]
