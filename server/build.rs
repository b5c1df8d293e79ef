//! Build script:
//! - tells the store tests whether a PostgreSQL server was given
//!   (`GATEHOUSE_TEST_POSTGRES_URL`). Without one, the PostgreSQL half of the suite is reported
//!   by the test runner as ignored, with the reason, instead of silently passing; the same for
//!   the TLS tests and a server that requires TLS (`GATEHOUSE_TEST_POSTGRES_TLS_URL` with its
//!   CA file in `GATEHOUSE_TEST_POSTGRES_TLS_CA`, both needed);
//! - with the `agones` feature, generates the server side of the Agones SDK (`sdk.proto` and
//!   `beta.proto`, copied from the agones crate into `tests/agones/proto`) for the fake SDK
//!   server of the agones test. Needs `protoc` and its well-known types
//!   (Debian `protobuf-compiler`, `libprotobuf-dev`), as the agones crate's own build does.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo::rustc-check-cfg=cfg(gatehouse_postgres_tests)");
    println!("cargo::rustc-check-cfg=cfg(gatehouse_postgres_tls_tests)");
    println!("cargo::rerun-if-env-changed=GATEHOUSE_TEST_POSTGRES_URL");
    println!("cargo::rerun-if-env-changed=GATEHOUSE_TEST_POSTGRES_TLS_URL");
    println!("cargo::rerun-if-env-changed=GATEHOUSE_TEST_POSTGRES_TLS_CA");
    println!("cargo::rerun-if-changed=build.rs");
    let set = |name: &str| std::env::var_os(name).is_some_and(|value| !value.is_empty());
    if set("GATEHOUSE_TEST_POSTGRES_URL") {
        println!("cargo::rustc-cfg=gatehouse_postgres_tests");
    }
    if set("GATEHOUSE_TEST_POSTGRES_TLS_URL") && set("GATEHOUSE_TEST_POSTGRES_TLS_CA") {
        println!("cargo::rustc-cfg=gatehouse_postgres_tls_tests");
    }
    #[cfg(feature = "agones")]
    fake_agones_sdk()?;
    Ok(())
}

/// The fake SDK server's generated code, in `OUT_DIR` (`agones.dev.sdk.rs`,
/// `agones.dev.sdk.beta.rs`), included by `tests/agones/fake_sdk.rs` only.
#[cfg(feature = "agones")]
fn fake_agones_sdk() -> Result<(), Box<dyn std::error::Error>> {
    let dir = "tests/agones/proto";
    tonic_build::configure().build_server(true).build_client(false).compile_protos(
        &[format!("{dir}/sdk/sdk.proto"), format!("{dir}/sdk/beta/beta.proto")],
        &[
            format!("{dir}/googleapis"),
            format!("{dir}/grpc-gateway"),
            format!("{dir}/sdk"),
            format!("{dir}/sdk/beta"),
        ],
    )?;
    Ok(())
}
