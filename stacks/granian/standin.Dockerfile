# The test bed's stand-in for this stack (tests/e2e/standins.sh; the test bed
# has no registry, so no python:*-slim image, and its containers reach no
# PyPI): BASE is Debian's python3 with requirements.txt's wheels installed,
# downloaded on the host by standins.sh (the same granian and click as the
# stack's image); Debian's packages of stack.env's STACK_TEST_PACKAGES
# (PACKAGES); the stack's own files unchanged, with this folder as the
# context. tests/static checks that it copies, sets and starts what the
# stack's own Dockerfile does.
ARG BASE
FROM ${BASE}
ARG PACKAGES
ARG APP_UID=10001
ARG APP_GID=101
# Copied as the stack's image has it (there pip installs from it).
COPY requirements.txt /app/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PACKAGES \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /sock \
 && chown ${APP_UID}:${APP_GID} /sock \
 && chmod 0750 /sock
COPY app.py serve.py /app/
USER ${APP_UID}:${APP_GID}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    APP_TCP_ADDR=:8080 APP_UNIX_SOCKET=/sock/app.sock APP_SOCKET_MODE=0660
EXPOSE 8080
ENTRYPOINT ["python3", "/app/serve.py"]
