# Airlock as a container: `airlock mcp --http` with the bundled tools.
# Why each line is as it is: deploy/README.md.
#
#   docker build -t airlock .
#   docker run --rm -p 127.0.0.1:8080:8080 --read-only --tmpfs /airlock \
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
    && mkdir -p /workspace /etc/airlock /usr/lib/airlock \
    && chown 10001:10001 /workspace /usr/lib/airlock
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
# The bundled tools compiled now, under this configuration's limits, into
# its precompiled_dir (/usr/lib/airlock/artifacts, read-only at run time):
# a pod's first start compiles nothing. On a CPU unlike the build
# machine's, a tool is compiled again, once, into the cache under /airlock.
RUN airlock precompile
EXPOSE 8080
ENTRYPOINT ["airlock"]
# A container's loopback is reachable by nobody else, so it listens on every
# address, without tokens: publish it on the host's loopback only (`-p
# 127.0.0.1:8080:8080`, as above). To publish it further, configure [auth]
# in airlock.toml (OAuth access tokens) and drop --insecure-no-auth, as the
# Kubernetes recipe does, unless what stands in front of it authenticates.
CMD ["mcp", "--http", "0.0.0.0:8080", "--insecure-no-auth"]
