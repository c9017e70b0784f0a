# The gatehouse container image: a static binary on a distroless base (no
# shell, no package manager), run as a non-root user, its SQLite data in a
# volume.
#
#   make image        or, by hand:
#   docker build -t gatehouse --build-arg VERSION=$(git describe --tags --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run --rm -p 127.0.0.1:8080:8080 -v gatehouse-data:/var/lib/gatehouse \
#     --stop-timeout 40 gatehouse
#
# It starts with deploy/docker/gatehouse.yaml (the demo model, the key
# gh-demo-key); mount a config at /etc/gatehouse/gatehouse.yaml for real
# providers. docs/deploy.md has the rest. deploy/docker_test.go builds the
# binary exactly as below and checks this file's promises (static, non-root,
# the health check is a real subcommand, the port is the config's).

# The build runs on the builder's own platform and cross-compiles, so a
# multi-platform build (docker buildx --platform linux/amd64,linux/arm64)
# needs no emulator.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
# scripts/build: CGO_ENABLED=0, -trimpath, stamped with VERSION and COMMIT.
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH VERSION=$VERSION COMMIT=$COMMIT scripts/build /out/gatehouse && \
    mkdir -p /out/data

# static-debian12 has CA certificates (for HTTPS to providers), tzdata and
# /etc/passwd entries, and nothing to run but our binary. Its nonroot user
# is 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gatehouse /gatehouse
COPY deploy/docker/gatehouse.yaml /etc/gatehouse/gatehouse.yaml
COPY --from=build --chown=65532:65532 /out/data /var/lib/gatehouse
ENV GATEHOUSE_CONFIG=/etc/gatehouse/gatehouse.yaml
# The config's relative paths (the SQLite file, the usage spill) land in
# the volume.
WORKDIR /var/lib/gatehouse
VOLUME /var/lib/gatehouse
# Numeric, so Kubernetes' runAsNonRoot can check it.
USER 65532:65532
EXPOSE 8080
# SIGTERM drains: /readyz fails, in-flight requests and streams get
# server.shutdown_grace (30s) to finish. Docker waits only 10s before
# SIGKILL unless told otherwise: run with --stop-timeout 40.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/gatehouse", "healthcheck"]
ENTRYPOINT ["/gatehouse"]
CMD ["serve"]
