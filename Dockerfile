# syntax=docker/dockerfile:1
# Antler in a container. Build and run (see README, "Docker"):
#   docker build -t antler .
#   docker run -d --name antler -p 127.0.0.1:8787:8787 -v antler-data:/data \
#     --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     -e ANTLER_API_TOKEN="$(openssl rand -hex 32)" \
#     -e ANTLER_MODEL_URL=http://host.docker.internal:11434/v1 --add-host=host.docker.internal:host-gateway \
#     antler
# or `docker compose up -d` with docker-compose.yml and a .env beside it (see .env.example).
# The daemon listens on 0.0.0.0 in the container, so its API wants a token: ANTLER_API_TOKEN is
# the token of the user `local` while the config names none (the web chat asks for it once). The two --security-opt flags let bubblewrap
# (the tool sandbox) create its namespaces: Docker's default seccomp and AppArmor profiles refuse
# unshare/mount. Without them the daemon still runs and says so at start; shell commands are off.
# Config: the shipped config.yaml is at /etc/antler/config.yaml; mount your own over it (read-only).
# Everything the daemon writes is in /data: the store, threads' files, the public skills the
# binary ships (installed into /data/skills/public at start) and extensions_config.json.

# Stage 1: cargo-chef computes the dependency recipe, so dependencies build in a cached layer
# that only changes with Cargo.toml/Cargo.lock. The Rust version is rust-toolchain.toml's, the one
# link/symbol-order.txt was made with (its first line; see build.rs): with another the binary
# still builds, in the linker's default order, and idles ~11 MiB higher.
FROM rust:1.95.0-bookworm AS chef
RUN cargo install cargo-chef --locked --version 0.1.71
WORKDIR /src

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=planner /src/recipe.json recipe.json
# The patched sled (vendor/sled, see its ANTLER.md) is a dependency, not a workspace member, so
# the recipe does not carry it: the cook stage needs its sources.
COPY vendor vendor
# The `dist` profile (Cargo.toml): fat LTO, one codegen unit and the symbol order, for the
# smallest idle footprint; it takes about twice as long as `--release`.
RUN cargo chef cook --profile dist --locked --recipe-path recipe.json --bin antler
COPY . .
RUN cargo build --profile dist --locked --bin antler

# Stage 2: the runtime — Debian slim with bubblewrap for the sandbox and tini as PID 1.
FROM debian:bookworm-slim
# Unpinned on purpose: each build takes the Debian security updates of these three packages.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates bubblewrap tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 antler \
 && useradd --system --uid 10001 --gid antler --home-dir /data --no-create-home antler \
 && install -d -o antler -g antler -m 0750 /data
COPY --from=build /src/target/dist/antler /usr/local/bin/antler
COPY config.yaml /etc/antler/config.yaml
ENV ANTLER_HOME=/data \
    ANTLER_LISTEN=0.0.0.0:8787
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8787
STOPSIGNAL SIGTERM
# `antler status` asks the daemon's /readyz through its socket in /data (no curl in the image):
# healthy once the store answers. It reads only data_dir and gateway.listen of the config, so a
# config edit the daemon rejected (it keeps running on the previous one) does not mark it
# unhealthy.
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/antler", "--config", "/etc/antler/config.yaml", "status"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/antler", "--config", "/etc/antler/config.yaml"]
CMD ["run"]
