# Build: docker build -t antler .   Run: docker run -p 8787:8787 -v antler-data:/var/lib/antler \
#   -e ANTLER_MODEL_URL=http://host.docker.internal:11434/v1 antler
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
ENV ANTLER_HOME=/var/lib/antler
USER antler
WORKDIR /var/lib/antler
EXPOSE 8787
# The daemon binds 0.0.0.0 in a container only with gateway.api_tokens set (it refuses otherwise).
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/antler", "--config", "/etc/antler/config.yaml"]
CMD ["run"]
