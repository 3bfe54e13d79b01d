# Debian bookworm (imported from debootstrap) with the clients the official
# images carry and compose's healthchecks call: wget (busybox in Prometheus's
# images), curl and envsubst (nginx's image).
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends wget curl gettext-base ca-certificates \
 && rm -rf /var/lib/apt/lists/*
