# The Go toolchain of this machine, with the app's modules served from a file
# proxy inside the image: the test bed's containers reach no module proxy.
ARG TOOLS
FROM ${TOOLS}
COPY go /usr/local/go
COPY goproxy /goproxy
ENV PATH=/usr/local/go/bin:/root/go/bin:$PATH \
    GOPROXY=file:///goproxy GOSUMDB=off GOTOOLCHAIN=local
