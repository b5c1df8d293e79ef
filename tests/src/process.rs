//! A server binary as an operator runs it: a child process on an ephemeral port with a data dir
//! of the test's, its JSON log followed on a thread, killed if the test fails before it stops
//! it. The in-process server of [`crate::TestServer`] is the other way to start one.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How long [`ServerProcess::wait_for`] waits for a log line.
const LOG_WAIT: Duration = Duration::from_secs(20);

/// The repository's shipped `config/server.toml`.
pub fn shipped_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/server.toml")
}

/// Runs `BINARY saves ARGS` (the operator's `gatehouse-server saves …`, `binary` being the
/// test's `env!("CARGO_BIN_EXE_gatehouse-server")`) with the shipped config against the store of
/// `data_dir`, or of the PostgreSQL URL `store_url` if given (`GATEHOUSE_STORE_URL`; otherwise
/// the variable is cleared, as is `RUST_LOG`), and returns what it printed and its status.
///
/// # Panics
/// If the binary cannot be started.
pub fn saves(binary: &Path, data_dir: &Path, store_url: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(binary);
    command
        .arg("saves")
        .args(args)
        .arg("--config")
        .arg(shipped_config())
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("GATEHOUSE_STORE_URL")
        .env_remove("RUST_LOG");
    if let Some(url) = store_url {
        command.env("GATEHOUSE_STORE_URL", url);
    }
    command.output().expect("the server binary starts")
}

/// The standard output of a command that must have succeeded.
///
/// # Panics
/// If it exited non-zero (its status and standard error are shown) or printed non-UTF-8.
pub fn success_stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}; stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

/// A running `gatehouse-server` process.
pub struct ServerProcess {
    child: Child,
    log: std::sync::mpsc::Receiver<serde_json::Value>,
    /// Every log line read so far.
    seen: Vec<serde_json::Value>,
    /// Where it listens (QUIC).
    pub addr: SocketAddr,
    /// Its admin endpoint.
    pub admin: SocketAddr,
}

impl ServerProcess {
    /// Starts `binary` (the test's `env!("CARGO_BIN_EXE_gatehouse-server")`) with the shipped
    /// config, `world` written to `dir/world.toml`, `dir` as its data dir and `envs` set, on
    /// ephemeral ports; waits until it logs both of its addresses.
    pub fn start(binary: &str, dir: &Path, world: &str, envs: &[(&str, &str)]) -> ServerProcess {
        let world_path = dir.join("world.toml");
        std::fs::write(&world_path, world).expect("the world file is written");
        let mut child = Command::new(binary)
            .arg("--config")
            .arg(shipped_config())
            .args(["--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0", "--log-format", "json"])
            .arg("--data-dir")
            .arg(dir)
            .arg("--world")
            .arg(&world_path)
            .envs(envs.iter().copied())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("the server starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // A line that is not JSON is kept as a string, for a test to find.
                let v = serde_json::from_str::<serde_json::Value>(&line)
                    .unwrap_or(serde_json::Value::String(line));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let unset: SocketAddr = "0.0.0.0:0".parse().expect("an address");
        let mut server = ServerProcess { child, log, seen: Vec::new(), addr: unset, admin: unset };
        let addr_of = |v: serde_json::Value| {
            v["addr"].as_str().unwrap_or_default().parse().expect("a logged address")
        };
        server.addr = addr_of(server.wait_for("its address", |v| v["message"] == "listening"));
        server.admin = addr_of(
            server.wait_for("its admin address", |v| v["message"] == "admin endpoint listening"),
        );
        server
    }

    /// The first log line matching `matches`, waiting (at most 20 s) for it if it has not been
    /// logged yet; panics (fails the test) if it never comes.
    pub fn wait_for(
        &mut self,
        what: &str,
        matches: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        if let Some(v) = self.seen.iter().find(|v| matches(v)) {
            return v.clone();
        }
        let end = Instant::now() + LOG_WAIT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if matches(&v) {
                        return v;
                    }
                }
                Err(_) => panic!("the server never logged {what}"),
            }
        }
    }

    /// Every log line read so far, in order, with those logged since the last call taken in
    /// (without waiting).
    pub fn lines(&mut self) -> &[serde_json::Value] {
        while let Ok(v) = self.log.try_recv() {
            self.seen.push(v);
        }
        &self.seen
    }

    /// Sends `signal` (e.g. `-TERM`, `-KILL`) to the process.
    pub fn signal(&self, signal: &str) {
        let status =
            Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill {signal} failed");
    }

    /// Waits (at most `limit`) for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let end = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < end, "the server did not exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One HTTP/1.1 request to its admin endpoint (a 5 s read bound); the body.
    pub fn admin_request(&self, method: &str, path: &str) -> String {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(self.admin).expect("the admin endpoint");
        stream.set_read_timeout(Some(Duration::from_secs(5))).expect("a read timeout");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            addr = self.admin
        )
        .expect("the request is written");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("the response is read");
        text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
