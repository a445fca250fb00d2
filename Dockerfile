# syntax=docker/dockerfile:1
# Multi-stage build: a static binary on a distroless base, running as a non-root user.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/emsquery . \
 && mkdir -p /out/logs

FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /app
COPY --from=build /out/emsquery /app/emsquery
# The log folder must be writable by the non-root user (uid 65532 in distroless).
COPY --from=build --chown=65532:65532 /out/logs /app/logs
COPY --from=build /src/schema/schema.sql /app/schema.sql
COPY --from=build /src/schema/measures.sql /app/measures.sql
ENV APP__HOST=0.0.0.0 \
    APP__PORT=9090 \
    LOG__PATH=/app/logs
USER 65532:65532
EXPOSE 9090
# Healthy when ready: --healthcheck asks /v1/healthz, which answers 200 only while the database does.
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 CMD ["/app/emsquery", "--healthcheck"]
ENTRYPOINT ["/app/emsquery"]
