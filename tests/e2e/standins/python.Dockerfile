# Stands in for python:*-slim (PYTHON_IMAGE, report/Dockerfile's base):
# Debian's Python 3.11 with pip, where `python3 -m pip install` works as in the
# official image (which has no EXTERNALLY-MANAGED marker).
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-pip ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
