# Airlock as a container: `airlock mcp --http` with the bundled tools.
# Why each line is as it is: deploy/README.md.
#
#   docker build -t airlock .
#   docker run --rm -p 8080:8080 --read-only --tmpfs /airlock \
#       -v "$PWD:/workspace" airlock

# --- build: the pinned toolchain, the wasm target the bundled tools need.
FROM rust:1.95.0-slim-bookworm AS build
RUN rustup target add wasm32-wasip2
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p airlock-cli \
    && install -D -m 0755 target/release/airlock /out/airlock

# --- run: the binary alone, on a small base, as a user without privileges.
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /airlock --shell /usr/sbin/nologin airlock \
    && mkdir -p /workspace /etc/airlock \
    && chown 10001:10001 /workspace
COPY --from=build /out/airlock /usr/local/bin/airlock
COPY deploy/airlock.toml /etc/airlock/airlock.toml
# Everything airlock writes goes under /airlock (a tmpfs or an emptyDir):
# the root filesystem can be mounted read-only.
ENV AIRLOCK_CONFIG=/etc/airlock/airlock.toml \
    XDG_CACHE_HOME=/airlock/cache \
    XDG_DATA_HOME=/airlock/data \
    HOME=/airlock \
    RUST_LOG=info
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["airlock"]
# A container's loopback is reachable by nobody else, so it listens on every
# address. Configure [auth] in airlock.toml (OAuth access tokens) and drop
# --insecure-no-auth, unless what stands in front of it authenticates.
CMD ["mcp", "--http", "0.0.0.0:8080", "--insecure-no-auth"]
