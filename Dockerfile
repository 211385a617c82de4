# rollout-guard's admission webhook server (bin/webhook) as a container
# image: a static, CGO-free binary built exactly as `make build` builds it,
# on a distroless base that runs as a non-root user.
#
#   make docker-build IMG=registry.example.com/rollout-guard/webhook:v0.1.0 VERSION=v0.1.0
#
# Cross-builds (docker buildx build --platform linux/arm64 ...) compile on
# the build machine's platform for the target one.

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
    go build -ldflags "-X main.version=${VERSION}" -o /out/webhook ./cmd/webhook

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/webhook /webhook
# distroless' nonroot user, numeric so that runAsNonRoot can check it.
USER 65532:65532
ENTRYPOINT ["/webhook"]
