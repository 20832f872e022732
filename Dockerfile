# syntax=docker/dockerfile:1
# One recipe for every service image:
#   docker build --build-arg SERVICE=gateway -t partnerapi/gateway .
# SERVICE is one of gateway, payout, fiat, consent, orders, sandboxbank, testnet.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
ARG SERVICE
# Stamped into partnerapi_build_info: docker build --build-arg VERSION=$(git describe --tags --always)
#   --build-arg REVISION=$(git rev-parse HEAD) (docker compose passes them from the environment).
ARG VERSION=devel
ARG REVISION=unknown
RUN test -n "${SERVICE}" || (echo "build with --build-arg SERVICE=<name>" && false)
WORKDIR /src
# Module files first: the dependency download is cached until they change.
COPY pkg/go.mod pkg/go.sum pkg/
# The test-support module is required by the tests only; its go.mod is part
# of the module graph all the same.
COPY testkit/go.mod testkit/go.sum testkit/
COPY services/${SERVICE}/go.mod services/${SERVICE}/go.sum services/${SERVICE}/
RUN cd services/${SERVICE} && GOWORK=off go mod download
COPY pkg/ pkg/
# The sandbox's local chains (the testnet image) are testkit/chaintest's.
COPY testkit/ testkit/
COPY services/${SERVICE}/ services/${SERVICE}/
# GOWORK=off: the module's own go.mod (replace => ../../pkg) decides what is
# built, exactly as in CI, never a developer's go.work.
RUN cd services/${SERVICE} && CGO_ENABLED=0 GOWORK=off \
    go build -trimpath -ldflags="-s -w -X github.com/partnerpay/api/pkg/obs.Version=${VERSION} -X github.com/partnerpay/api/pkg/obs.Revision=${REVISION}" \
      -o /out/service ./cmd/${SERVICE}
# The only writable place in the image (the gateway keeps its keys file there).
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/service /usr/local/bin/service
COPY --from=build --chown=65532:65532 /out/data /var/lib/partnerapi
USER 65532:65532
# No shell in the image: probes run the binary's own healthcheck subcommand.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["/usr/local/bin/service", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/service"]
