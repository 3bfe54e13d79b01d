# Debian's prometheus-nginx-exporter 0.11: the same flag (--nginx.scrape-uri),
# port (9113) and metric names as the official 1.5 image.
ARG TOOLS
FROM ${TOOLS}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus-nginx-exporter \
 && rm -rf /var/lib/apt/lists/*
USER 65534:65534
ENTRYPOINT ["/usr/bin/prometheus-nginx-exporter"]
