# Stands in for stacks/gunicorn on the official python:*-slim image with
# requirements.txt's gunicorn: Debian's python3 3.11 and gunicorn 20.1 running
# the stack's app.py and gunicorn.conf.py unchanged. Built with stacks/gunicorn
# as the context; tests/static checks that it copies, sets and starts what the
# stack's own Dockerfile does.
ARG BASE
FROM ${BASE}
ARG APP_UID=10001
ARG APP_GID=101
# Copied as the stack's image has it (there pip installs from it).
COPY requirements.txt /app/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gunicorn python3-gunicorn \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /sock \
 && chown ${APP_UID}:${APP_GID} /sock \
 && chmod 0750 /sock
COPY app.py gunicorn.conf.py /app/
USER ${APP_UID}:${APP_GID}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    APP_TCP_ADDR=:8080 APP_UNIX_SOCKET=/sock/app.sock APP_SOCKET_MODE=0660
EXPOSE 8080
ENTRYPOINT ["gunicorn", "--config", "/app/gunicorn.conf.py"]
