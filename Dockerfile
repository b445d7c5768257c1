# Build: docker build -t antler .
# Run:   docker run -p 127.0.0.1:8787:8787 -v antler-data:/var/lib/antler \
#          --add-host=host.docker.internal:host-gateway \
#          -e ANTLER_MODEL_URL=http://host.docker.internal:11434/v1 antler
# The shipped config listens on $ANTLER_LISTEN (0.0.0.0:8787 here, so the published port
# reaches the daemon). Without gateway.api_tokens the API and the web chat answer 401 (locked)
# while /healthz, /readyz and channel webhooks work: mount a config with tokens to use the API,
#   -v "$PWD/config.yaml:/etc/antler/config.yaml:ro" -e ANTLER_API_TOKEN=...
# with `api_tokens: [{token: $ANTLER_API_TOKEN, user: you}]` under `gateway:` in that file.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin antler

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates bubblewrap tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /var/lib/antler --create-home antler
COPY --from=build /src/target/release/antler /usr/local/bin/antler
COPY config.yaml /etc/antler/config.yaml
COPY skills /etc/antler/skills
ENV ANTLER_HOME=/var/lib/antler \
    ANTLER_LISTEN=0.0.0.0:8787
USER antler
WORKDIR /var/lib/antler
EXPOSE 8787
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/antler", "--config", "/etc/antler/config.yaml"]
CMD ["run"]
