# Multi-stage release build. Not built on the development machines (no Docker engine there).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
COPY src ./src
COPY examples ./examples
RUN cargo build --release --locked --bin jobsd

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/jobsd /usr/local/bin/jobsd
# Dapr's ports: HTTP API, gRPC API, scheduler replica.
EXPOSE 3500 50001 50006
VOLUME ["/data"]
ENTRYPOINT ["/usr/local/bin/jobsd"]
CMD ["--app-id", "app", "--data-dir", "/data"]
