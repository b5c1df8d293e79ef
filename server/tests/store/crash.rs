//! A process killed with SIGKILL right after a save was acknowledged has that save when the
//! store is opened again (an end-to-end test that really kills the process).
//!
//! The killed process is this test binary run again in child mode: it opens the store, saves
//! one player over and over and prints `acknowledged N` after each save returns. The parent
//! reads those lines, sends SIGKILL (with `kill -KILL`) while the child is in the middle of the
//! next save, and opens the store itself.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use gatehouse_protocol::PlayerId;
use gatehouse_server::store::{Store, StoreUrl};

use crate::backends::Backend;
use crate::suite::character;

const CHILD_URL: &str = "GATEHOUSE_CRASH_CHILD_URL";
const CHILD_DATA_DIR: &str = "GATEHOUSE_CRASH_CHILD_DATA_DIR";
const CHILD_TEST: &str = "crash::crash_child_saves_until_killed";
/// The parent kills the child once it has read this many acknowledgements.
const ACKS_BEFORE_KILL: u64 = 25;
/// The child stops saving (and blocks) after this many, in case the parent never kills it.
const CHILD_SAVE_LIMIT: u64 = 100_000;

/// The child process of the crash test; does nothing unless the parent set its variables.
#[test]
#[ignore = "the crash test's child process; the crash test runs it"]
fn crash_child_saves_until_killed() {
    let (Ok(url), Ok(dir)) = (std::env::var(CHILD_URL), std::env::var(CHILD_DATA_DIR)) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let store = Store::open(&StoreUrl::parse(&url).unwrap(), Path::new(&dir)).await.unwrap();
        let mut save = character("crash-victim");
        let mut out = std::io::stdout();
        while save.version < CHILD_SAVE_LIMIT {
            // The stored count is always the stored version minus one: a torn row shows.
            save.inventory[0].count = u32::try_from(save.version).unwrap();
            save.version = store.save_player(&save).await.unwrap();
            writeln!(out, "acknowledged {}", save.version).unwrap();
            out.flush().unwrap();
        }
        std::future::pending::<()>().await;
    });
}

/// Kills the child if the test fails before it does.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A save acknowledged before SIGKILL is in the store after it, and the store opens cleanly.
pub(crate) async fn a_save_acknowledged_before_sigkill_survives(b: &Backend) {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([CHILD_TEST, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_URL, b.url_text())
        .env(CHILD_DATA_DIR, b.data_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = Guard(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("acknowledged ")
                && tx.send(n.trim().parse::<u64>().unwrap()).is_err()
            {
                return;
            }
        }
    });
    let mut acknowledged = 0;
    while acknowledged < ACKS_BEFORE_KILL {
        acknowledged = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the child acknowledges saves within a minute");
    }
    let pid = child.0.id().to_string();
    let killed = Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    assert!(killed.success(), "kill -KILL {pid} failed");
    let status = child.0.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "the child died of SIGKILL: {status:?}");

    let store = b.open().await;
    let stored = store
        .load_player(&PlayerId::new("crash-victim").unwrap())
        .await
        .unwrap()
        .expect("the player's save survived");
    assert!(
        stored.version >= acknowledged,
        "version {acknowledged} was acknowledged before the kill, but {} is stored",
        stored.version
    );
    assert_eq!(u64::from(stored.inventory[0].count), stored.version - 1, "the stored row is whole");
    store.close().await;
}
