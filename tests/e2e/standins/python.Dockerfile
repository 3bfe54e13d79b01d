# Stands in for python:*-slim (PYTHON_IMAGE, report/Dockerfile's base):
# Debian's Python 3.11 with pip, where `python3 -m pip install` works as in the
# official image (which has no EXTERNALLY-MANAGED marker). The test bed's
# containers cannot reach PyPI: pip installs from the wheels of
# report/requirements.txt that standins.sh downloaded into the context.
ARG BASE
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-pip ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
COPY wheels /wheels
ENV PIP_FIND_LINKS=/wheels PIP_NO_INDEX=1
ARG REQUIREMENTS
LABEL uds-lab.requirements=${REQUIREMENTS}
