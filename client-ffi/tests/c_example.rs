//! The C example (`examples/c/session.c`) plays a whole session against a real server: it is
//! compiled with `cc -Wall -Werror` against the committed header and the library this build
//! made, and run; it exits 0 only if it saw a join, two transitions and a restart after a
//! death, and left cleanly. With `GATEHOUSE_VALGRIND=1` it runs under valgrind
//! (`--error-exitcode=1 --leak-check=full`, with `valgrind.supp`'s two false positives of
//! ring's assembly suppressed), as CI does once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gatehouse_protocol::token::DEV_TOKEN_KEY;
use gatehouse_tests::{TestServer, travel_once_placed, wait_for_boot, within, worlds};

/// The static library this build made: beside the test's own binary, or one directory up.
fn static_library() -> PathBuf {
    let test = std::env::current_exe().unwrap();
    let deps = test.parent().unwrap();
    [deps, deps.parent().unwrap()]
        .iter()
        .map(|dir| dir.join("libgatehouse_client_ffi.a"))
        .find(|path| path.exists())
        .expect("libgatehouse_client_ffi.a next to the test binary (cargo builds the staticlib)")
}

/// Compiles the example into `dir`; panics with the compiler's output if it does not.
fn compile(dir: &Path) -> PathBuf {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join("session");
    let output = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-Wall", "-Werror", "-std=c11", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("examples/c/session.c"))
        .arg(static_library())
        // What a Rust static library needs from the system on Linux.
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&exe)
        .output()
        .expect("a C compiler (cc)");
    assert!(
        output.status.success(),
        "the example does not compile:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_example_plays_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    // A world that kills on its start node; the example logs in after the boot travel, so it
    // gets a join of its own; then the test travels to the other node and back.
    let server = TestServer::start(worlds::HAZARDOUS).await;
    wait_for_boot(&server.handle, Duration::from_secs(10)).await;
    let args = [server.addr.to_string(), server.cert.display().to_string()];
    let mut command = if std::env::var_os("GATEHOUSE_VALGRIND").is_some() {
        let suppressions = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("valgrind.supp");
        let mut valgrind = Command::new("valgrind");
        valgrind.args(["--error-exitcode=1", "--leak-check=full", "-q"]);
        valgrind.arg(format!("--suppressions={}", suppressions.display())).arg(&exe);
        valgrind
    } else {
        Command::new(&exe)
    };
    command.args(&args).args([DEV_TOKEN_KEY, "c-0001"]);
    let child = command.spawn().expect("the example starts");
    let run = tokio::task::spawn_blocking(move || child.wait_with_output());
    let travels = async {
        let limit = Duration::from_secs(60);
        travel_once_placed(&server.handle, "c-0001", &["forest", "harbor"], limit).await;
    };
    within(Duration::from_secs(120), "the example's travels", travels).await;
    let output = within(Duration::from_secs(120), "the example's end", run).await.unwrap().unwrap();
    assert!(output.status.success(), "the example failed: {:?}", output.status);
    server.stop().await;
}

/// The complete loop in C that `docs/client.md` shows compiles against the header as it is.
#[test]
fn the_guides_c_loop_compiles_against_the_header() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(crate_dir.join("../docs/client.md")).unwrap();
    let start = guide.find("```c\n").expect("a C block in docs/client.md") + "```c\n".len();
    let end = start + guide[start..].find("```").expect("the C block ends");
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("loop.c");
    std::fs::write(&source, &guide[start..end]).unwrap();
    let output = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-Wall", "-Werror", "-std=c11", "-c", "-I"])
        .arg(crate_dir.join("include"))
        .arg(&source)
        .arg("-o")
        .arg(dir.path().join("loop.o"))
        .output()
        .expect("a C compiler (cc)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}
