# A Go binary built from its module source at the version in .env (Prometheus,
# node-exporter), run as the official images run it: as nobody, with
# compose's command as its arguments.
ARG TOOLS
FROM ${TOOLS}
ARG NAME
ARG WORKDIR=/data
COPY ${NAME} /bin/${NAME}
RUN ln -s /bin/${NAME} /entrypoint \
 && mkdir -p ${WORKDIR} && chown 65534:65534 ${WORKDIR}
USER 65534:65534
WORKDIR ${WORKDIR}
ENTRYPOINT ["/entrypoint"]
