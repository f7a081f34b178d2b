# Multi-stage build: a static flaked binary on a minimal base, run as a
# non-root user. Build: docker build -t flaked .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/flaked ./cmd/flaked \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/flaked /usr/local/bin/flaked
COPY --from=build --chown=65532:65532 /out/state /var/lib/flaked
# distroless :nonroot runs as uid 65532; the state file lives in /var/lib/flaked (a volume).
USER 65532:65532
VOLUME ["/var/lib/flaked"]
EXPOSE 7379 9121
ENV FLAKED_LISTEN=0.0.0.0:7379 \
    FLAKED_METRICS_ADDR=0.0.0.0:9121 \
    FLAKED_STATE_FILE=/var/lib/flaked/state \
    FLAKED_LOG_FORMAT=json
HEALTHCHECK --interval=5s --timeout=2s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/flaked", "healthcheck", "--url", "http://127.0.0.1:9121/readyz"]
ENTRYPOINT ["/usr/local/bin/flaked"]
CMD ["serve"]
