//! Compiles the project's own Dapr `.proto` files and the etcd v3 protos the etcd store's
//! client needs (see `proto/README.md`).
//!
//! `protox` parses them in pure Rust, so no system `protoc` is needed. The
//! encoded `FileDescriptorSet` of the Dapr protos is written to
//! `$OUT_DIR/descriptor.bin` for gRPC reflection, and `tonic-prost-build`
//! generates messages, clients and servers into `$OUT_DIR/<package>.rs`.

use std::path::PathBuf;

/// Every proto file; the include root is `proto/`.
const PROTOS: &[&str] = &[
    "dapr/proto/common/v1/common.proto",
    "dapr/proto/runtime/v1/jobs.proto",
    "dapr/proto/runtime/v1/actors.proto",
    "dapr/proto/runtime/v1/metadata.proto",
    "dapr/proto/runtime/v1/dapr.proto",
    "dapr/proto/runtime/v1/appcallback.proto",
    "dapr/proto/internals/v1/jobs.proto",
    "dapr/proto/internals/v1/service_invocation.proto",
    "dapr/proto/scheduler/v1/scheduler.proto",
    "dapr/proto/placement/v1/placement.proto",
    "jobsd/store/v1/store.proto",
    "jobsd/store/v1/etcd.proto",
    "jobsd/v1/jobs.proto",
    "jobsd/scheduler/v1/jobs.proto",
];

/// etcd's protos (client side only); kept out of the reflection descriptor, which describes
/// what jobsd serves.
const ETCD_PROTOS: &[&str] = &[
    "etcd/api/mvccpb/kv.proto",
    "etcd/api/etcdserverpb/rpc.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    println!("cargo:rerun-if-changed=build.rs");

    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);

    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_source_info(true).include_imports(true);
    compiler.open_files(PROTOS)?;

    std::fs::write(
        out_dir.join("descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(compiler.file_descriptor_set())?;

    let mut etcd = protox::Compiler::new(["proto/third_party"])?;
    etcd.include_imports(true);
    etcd.open_files(ETCD_PROTOS)?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_fds(etcd.file_descriptor_set())?;

    Ok(())
}
