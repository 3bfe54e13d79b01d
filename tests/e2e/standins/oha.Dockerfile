# loadgen/oha's image as it runs: oha (built on this machine from its crate, as
# loadgen/oha builds it) and python3 for loadgen/oha_runner.py, on the debian base.
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/*
COPY oha /usr/local/bin/oha
USER 65534:65534
ENTRYPOINT ["oha"]
