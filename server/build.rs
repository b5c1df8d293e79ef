//! Build script: tells the store tests whether a PostgreSQL server was given
//! (`GATEHOUSE_TEST_POSTGRES_URL`). Without one, the PostgreSQL half of the suite is reported
//! by the test runner as ignored, with the reason, instead of silently passing.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(gatehouse_postgres_tests)");
    println!("cargo::rerun-if-env-changed=GATEHOUSE_TEST_POSTGRES_URL");
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var_os("GATEHOUSE_TEST_POSTGRES_URL").is_some_and(|url| !url.is_empty()) {
        println!("cargo::rustc-cfg=gatehouse_postgres_tests");
    }
}
