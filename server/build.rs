//! Build script:
//! - sets `GATEHOUSE_REVISION`, the git commit `gatehouse_build_info` names (docs/operations.md,
//!   "Metrics"): `GATEHOUSE_REVISION` from the build's environment if set (a container build
//!   from a tarball, `deploy/images.sh`), else `git rev-parse --short=12 HEAD`, else `unknown`.
//!   It is built again when the commit changes (`HEAD`, the branch it points to, packed refs);
//! - tells the store tests whether a PostgreSQL server was given
//!   (`GATEHOUSE_TEST_POSTGRES_URL`). Without one, the PostgreSQL half of the suite is reported
//!   by the test runner as ignored, with the reason, instead of silently passing; the same for
//!   the TLS tests and a server that requires TLS (`GATEHOUSE_TEST_POSTGRES_TLS_URL` with its
//!   CA file in `GATEHOUSE_TEST_POSTGRES_TLS_CA`, both needed);
//! - with the `agones` feature, generates the server side of the Agones SDK (`sdk.proto` and
//!   `beta.proto`, copied from the agones crate into `tests/agones/proto`) for the fake SDK
//!   server of the agones test, and the descriptors of Agones' `allocation.proto` (Agones'
//!   `proto/allocation/allocation.proto` at commit 0543510146527eb1a8abeb97b55ef56462ad0ffb,
//!   Apache-2.0, copied unchanged into `tests/agones/allocation`), which the agones test reads
//!   the allocator requests it is sent against. Needs `protoc` and its well-known types (Debian
//!   `protobuf-compiler`, `libprotobuf-dev`), as the agones crate's own build does.

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
    println!("cargo::rustc-env=GATEHOUSE_REVISION={}", revision());
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
    // Only the descriptors are used (`allocation.bin`); the generated messages are not.
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_build::configure()
        .build_server(false)
        .build_client(false)
        .file_descriptor_set_path(out.join("allocation.bin"))
        .compile_protos(
            &["tests/agones/allocation/allocation.proto".to_owned()],
            &[
                format!("{dir}/googleapis"),
                format!("{dir}/grpc-gateway"),
                "tests/agones/allocation".to_owned(),
            ],
        )?;
    Ok(())
}

/// The revision to report: `GATEHOUSE_REVISION` if set, else the checkout's commit, else
/// `unknown`; only ASCII letters, digits, `.`, `-` and `_`, at most 64 (a label value anyone
/// can read; anything else is `unknown`).
fn revision() -> String {
    println!("cargo::rerun-if-env-changed=GATEHOUSE_REVISION");
    let given = std::env::var("GATEHOUSE_REVISION").ok().filter(|r| !r.trim().is_empty());
    let found = given.or_else(git_revision).map(|r| r.trim().to_owned());
    match found {
        Some(r)
            if r.len() <= 64
                && r.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) =>
        {
            r
        }
        _ => "unknown".to_owned(),
    }
}

/// `git rev-parse --short=12 HEAD` in the package's directory, with `rerun-if-changed` on the
/// files that move when the commit does; `None` without git or outside a checkout.
fn git_revision() -> Option<String> {
    let head = git(&["rev-parse", "--short=12", "HEAD"])?;
    // `--git-path` resolves a worktree's own HEAD and the shared refs alike.
    let head_file = git(&["rev-parse", "--path-format=absolute", "--git-path", "HEAD"])?;
    watch(&head_file);
    if let Ok(text) = std::fs::read_to_string(&head_file)
        && let Some(branch) = text.trim().strip_prefix("ref: ")
        && let Some(branch_file) =
            git(&["rev-parse", "--path-format=absolute", "--git-path", branch])
    {
        watch(&branch_file);
    }
    if let Some(packed) = git(&["rev-parse", "--path-format=absolute", "--git-path", "packed-refs"])
    {
        watch(&packed);
    }
    Some(head)
}

/// `rerun-if-changed` on `path` if it exists (a missing one would rebuild every time).
fn watch(path: &str) {
    if std::path::Path::new(path).exists() {
        println!("cargo::rerun-if-changed={path}");
    }
}

/// What `git args` prints, trimmed; `None` if git is missing or fails.
fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(std::env::var_os("CARGO_MANIFEST_DIR")?)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
