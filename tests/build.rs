//! Build script: tells the end-to-end tests whether a PostgreSQL server was given
//! (`GATEHOUSE_TEST_POSTGRES_URL`), as the server's build script tells its store tests. Without
//! one, the tests that need it (a fleet's servers share one PostgreSQL store: `e2e/travel.rs`)
//! are reported by the test runner as ignored, with the reason, instead of silently passing
//! (docs/testing.md, "PostgreSQL tests").

fn main() {
    println!("cargo::rustc-check-cfg=cfg(gatehouse_postgres_tests)");
    println!("cargo::rerun-if-env-changed=GATEHOUSE_TEST_POSTGRES_URL");
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var_os("GATEHOUSE_TEST_POSTGRES_URL").is_some_and(|value| !value.is_empty()) {
        println!("cargo::rustc-cfg=gatehouse_postgres_tests");
    }
}
