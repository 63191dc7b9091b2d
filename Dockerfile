# syntax=docker/dockerfile:1
# canaryd's container image: a release build in the Rust image, then only the binary on distroless.
#   docker build -t REGISTRY/canaryd:0.1.0 .
# The Helm chart (charts/canaryd) runs it as uid 65532 with a read-only root filesystem.

FROM docker.io/library/rust:1.89-bookworm AS build
WORKDIR /src
# Only what the build reads (the workspace's crates; tests/ because Cargo.toml may declare test and bench targets there): the local
# target/ and .venv/ never reach the build (BuildKit sends only the paths COPY names).
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY analysis-templates ./analysis-templates
COPY tests ./tests
# The cache mounts keep the registry and build artifacts between builds; the binary is copied out of them.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin canaryd \
    && install -D -m 0755 target/release/canaryd /out/canaryd

# distroless/cc: glibc and libgcc for the binary, CA certificates for TLS to Prometheus and the API server, no
# shell or package manager. The nonroot tag runs as uid/gid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/canaryd /usr/local/bin/canaryd
USER 65532:65532
EXPOSE 8090
ENTRYPOINT ["/usr/local/bin/canaryd"]
CMD ["run"]
