//! Generates the gRPC code of `proto/` with tonic-build, using the protoc that
//! `protoc-bin-vendored` ships (no system protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // prost-build runs the protoc named by PROTOC.
    std::env::set_var("PROTOC", protoc);
    println!("cargo:rerun-if-changed=proto");
    tonic_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_protos(
            &[
                "proto/cuzk/v1/proving.proto",
                "proto/pinion/v1/pinion.proto",
            ],
            &["proto"],
        )?;
    Ok(())
}
