# Gantry: one static binary on a small Debian base.
#
#   docker build -t gantry .
#   docker run --rm -e DATABASE_URL=… gantry migrate up
#   docker run -e DATABASE_URL=… -e GANTRY_SECRET_KEY=… -e GANTRY_BASE_URL=… -p 8080:8080 gantry
#   docker run -e DATABASE_URL=… -e GANTRY_SECRET_KEY=… gantry worker
#
# The arguments after the image name are gantry's: ENTRYPOINT is the binary, CMD is `serve`.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gantry ./cmd/gantry

FROM debian:bookworm-slim
# ca-certificates for TLS to PostgreSQL and external APIs; git because later areas run the git CLI.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 gantry \
 && useradd --system --uid 10001 --gid gantry --home-dir /var/lib/gantry --create-home \
      --shell /usr/sbin/nologin gantry
COPY --from=build /out/gantry /usr/local/bin/gantry
USER 10001:10001
WORKDIR /var/lib/gantry
ENV GANTRY_ADDR=:8080
EXPOSE 8080
ENTRYPOINT ["gantry"]
CMD ["serve"]
