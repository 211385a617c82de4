# rollout-guard's admission webhook server (bin/webhook) as a container
# image: a static, CGO-free binary built exactly as `make build` builds it,
# on an empty base, run as a numeric non-root user.
#
#   make docker-build IMG=registry.example.com/rollout-guard/webhook:v0.1.0 VERSION=v0.1.0
#
# Cross-builds (docker buildx build --platform linux/arm64 ...) compile on
# the build machine's platform for the target one.
#
# `make image` builds the same image contents without a container engine
# (hack/tools/image: the same binary at /webhook, nothing else, the same
# user, entry point and labels, plus the revision and creation time), for
# linux/amd64 and linux/arm64 at once, with fixed timestamps; a test of
# hack/tools checks that this file stays the same as it.

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
# The version the binary reports (--version and its start-up log line).
ARG VERSION=dev
WORKDIR /workspace
# Modules first: this layer stays cached while only sources change.
COPY go.mod go.sum ./
RUN go mod download
# The product module's sources (.dockerignore leaves out the test and tools
# modules, bin/, docs and config).
COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-X main.version=${VERSION}" -o /out/webhook ./cmd/webhook

# Empty, as distroless static is of a shell: the guard needs no CA bundle (it
# trusts the API server through its ServiceAccount's CA), no /etc/passwd (its
# user is numeric) and no writable file (its root filesystem is read-only).
FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="rollout-guard webhook" \
      org.opencontainers.image.source="https://github.com/rollout-guard/rollout-guard" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/webhook /webhook
# distroless' nonroot user, numeric so that runAsNonRoot can check it.
USER 65532:65532
ENTRYPOINT ["/webhook"]
