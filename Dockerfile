# Multi-stage release build. Not built on the development machines (no Docker engine there):
# tests/dockerfile.rs checks what can be checked by reading this file.
FROM rust:1.95-bookworm AS build
WORKDIR /src
# What the build reads, and nothing else: the manifest, build.rs and the .proto files it
# compiles (with protox, in pure Rust: no protoc is installed), the sources.
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
COPY src ./src
RUN cargo build --release --locked --bin jobsd
# The data folder is made here because the runtime image has no shell to make it; it is
# copied below owned by the runtime user, so jobsd can write to it and a fresh volume mounted
# on it starts with that owner (Docker copies an image folder's owner into a new volume).
# COPY --chown also owns the destination folder it creates (moby/buildkit#640, #1941).
RUN mkdir -p /out/data

FROM gcr.io/distroless/cc-debian12:nonroot
# distroless's `nonroot` user, named by number so that nothing depends on /etc/passwd.
USER 65532:65532
COPY --from=build /src/target/release/jobsd /usr/local/bin/jobsd
COPY --from=build --chown=65532:65532 /out/data /data
# A sample resource file (a Resiliency policy); mount your own folder and pass it with
# --resources-path. (config/ also holds the compose examples, which are not resources.)
COPY config/resiliency.yaml /etc/jobsd/resiliency.yaml
# Dapr's ports: HTTP API, gRPC API, scheduler replica, Prometheus metrics.
EXPOSE 3500 50001 50006 9090
VOLUME ["/data"]
ENTRYPOINT ["/usr/local/bin/jobsd"]
CMD ["--app-id", "app", "--data-dir", "/data"]
