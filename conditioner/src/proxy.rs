//! The conditioner's UDP shell: a relay between QUIC clients and the server.
//! Each client address is a flow with a socket of its own towards the server (so the server
//! sees one peer per client, as without the relay) and two [`Link`]s, up and down. A flow is a
//! task that wakes on a datagram from either side or at the next release instant, never on a
//! poll.
//!
//! A flow's generators are seeded from the proxy's seed and the flow's key: the key a caller
//! [`registered`](ProxyHandle::register) for the client's port (the swarm registers each
//! client's index), otherwise the flow's number in order of first arrival.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::Conditions;
use crate::link::{Link, LinkStats};

/// Datagrams queued from the front socket to one flow before the relay drops them (counted).
const FLOW_QUEUE: usize = 4096;
/// The largest UDP payload relayed.
const MAX_DATAGRAM: usize = 65_535;
/// Socket buffers asked for every relay socket, bytes: the relay must not add losses of its own.
const SOCKET_BUFFER: usize = 4 << 20;

/// A flow with no datagram either way for this long ends (its socket closed); the client's
/// next datagram starts a new one.
const FLOW_IDLE: Duration = Duration::from_secs(60);

/// Keys of flows not registered start here, so they never meet a client index.
const UNREGISTERED_KEYS: u64 = 1 << 32;

/// What the proxy did, both directions summed over its flows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProxyStats {
    /// Client addresses seen.
    pub flows: u64,
    /// Client → server.
    pub up: LinkStats,
    /// Server → client.
    pub down: LinkStats,
    /// Datagrams the relay itself dropped: a flow's queue full, or a socket error.
    pub relay_dropped: u64,
}

impl std::fmt::Display for ProxyStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "network conditioner: {} flows, relay drops {}",
            self.flows, self.relay_dropped
        )?;
        for (name, s) in
            [("up (client -> server)", &self.up), ("down (server -> client)", &self.down)]
        {
            writeln!(
                f,
                "  {name}: offered {}, released {}, dropped {}, cut {}, queue-dropped {}, \
                 delayed {}, reordered {}, duplicated {}",
                s.offered,
                s.released,
                s.dropped,
                s.cut,
                s.queue_dropped,
                s.delayed,
                s.reordered,
                s.duplicated
            )?;
        }
        Ok(())
    }
}

/// State shared by the proxy's tasks and its handles.
#[derive(Debug)]
struct Shared {
    seed: u64,
    conditions: Conditions,
    server: SocketAddr,
    /// How long a flow may be silent both ways before it ends.
    flow_idle: Duration,
    /// Keys registered per client port.
    registered: Mutex<HashMap<u16, u64>>,
    /// Flow keys whose traffic is cut both ways.
    cut: Mutex<BTreeSet<u64>>,
    /// Per live flow key: its links' counts, as of its last event.
    flows: Mutex<BTreeMap<u64, (LinkStats, LinkStats)>>,
    /// The counts of flows that ended (idle), and how many there were.
    ended: Mutex<(u64, LinkStats, LinkStats)>,
    relay_dropped: Mutex<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A task that panicked holding the lock leaves plain counters: still fine to read.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A cheap, cloneable handle on a running proxy: its address, its flows' keys and cuts, and its
/// counts.
#[derive(Debug, Clone)]
pub struct ProxyHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl ProxyHandle {
    /// Where clients send (the proxy's front socket).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Gives the flow of the client on local `port` the key `key` (its generators' seed comes
    /// from it), for a flow that has not started yet.
    pub fn register(&self, port: u16, key: u64) {
        lock(&self.shared.registered).insert(port, key);
    }

    /// Cuts (`true`) or heals the flow with key `key`, both ways; a flow not started yet starts
    /// cut.
    pub fn set_cut(&self, key: u64, cut: bool) {
        let mut set = lock(&self.shared.cut);
        if cut {
            set.insert(key);
        } else {
            set.remove(&key);
        }
    }

    /// What the proxy has done so far.
    pub fn stats(&self) -> ProxyStats {
        let flows = lock(&self.shared.flows);
        let (ended, ended_up, ended_down) = *lock(&self.shared.ended);
        let mut out = ProxyStats {
            flows: flows.len() as u64 + ended,
            up: ended_up,
            down: ended_down,
            relay_dropped: *lock(&self.shared.relay_dropped),
        };
        for (up, down) in flows.values() {
            out.up.absorb(up);
            out.down.absorb(down);
        }
        out
    }

    fn relay_drop(&self) {
        *lock(&self.shared.relay_dropped) += 1;
    }
}

/// A running proxy; it stops (every flow with it) when dropped.
#[derive(Debug)]
pub struct Proxy {
    handle: ProxyHandle,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Binds the front socket on `listen` and relays to `server` under `conditions`, every
    /// decision drawn from `seed`. Runs on the current tokio runtime.
    ///
    /// # Errors
    /// The OS error if the front socket cannot be bound.
    pub async fn start(
        listen: SocketAddr,
        server: SocketAddr,
        conditions: Conditions,
        seed: u64,
    ) -> std::io::Result<Proxy> {
        Proxy::start_with_idle(listen, server, conditions, seed, FLOW_IDLE).await
    }

    async fn start_with_idle(
        listen: SocketAddr,
        server: SocketAddr,
        conditions: Conditions,
        seed: u64,
        flow_idle: Duration,
    ) -> std::io::Result<Proxy> {
        let front = Arc::new(bind(listen)?);
        let handle = ProxyHandle {
            addr: front.local_addr()?,
            shared: Arc::new(Shared {
                seed,
                conditions,
                server,
                flow_idle,
                registered: Mutex::new(HashMap::new()),
                cut: Mutex::new(BTreeSet::new()),
                flows: Mutex::new(BTreeMap::new()),
                ended: Mutex::new((0, LinkStats::default(), LinkStats::default())),
                relay_dropped: Mutex::new(0),
            }),
        };
        let task = tokio::spawn(accept(front, handle.clone()));
        Ok(Proxy { handle, task })
    }

    /// A handle on it.
    pub fn handle(&self) -> ProxyHandle {
        self.handle.clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A UDP socket on `addr` with room for bursts.
fn bind(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let socket = socket2::Socket::from(std::net::UdpSocket::bind(addr)?);
    // A refusal leaves the system default: the relay still works, with less room.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.set_nonblocking(true)?;
    UdpSocket::from_std(socket.into())
}

/// The front socket: hands each datagram to its client's flow, starting flows as clients appear.
/// The flows end with it (they are in its `JoinSet`).
async fn accept(front: Arc<UdpSocket>, handle: ProxyHandle) {
    let mut flows: HashMap<SocketAddr, mpsc::Sender<Bytes>> = HashMap::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut arrivals = UNREGISTERED_KEYS;
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let (len, client) = match front.recv_from(&mut buf).await {
            Ok(got) => got,
            Err(e) => {
                // ICMP errors (a client gone) surface here on some systems; not fatal.
                tracing::debug!(error = %e, "proxy front socket");
                continue;
            }
        };
        let datagram = Bytes::copy_from_slice(&buf[..len]);
        let sender = match flows.get(&client).filter(|s| !s.is_closed()) {
            Some(sender) => sender.clone(),
            None => {
                let registered = lock(&handle.shared.registered).get(&client.port()).copied();
                let key = registered.unwrap_or_else(|| {
                    arrivals += 1;
                    arrivals
                });
                let back = match bind(unspecified(handle.shared.server)) {
                    Ok(back) => back,
                    Err(e) => {
                        tracing::warn!(error = %e, %client, "proxy cannot bind a flow socket");
                        handle.relay_drop();
                        continue;
                    }
                };
                let (tx, rx) = mpsc::channel(FLOW_QUEUE);
                tasks.spawn(flow(key, client, front.clone(), back, rx, handle.clone()));
                flows.insert(client, tx.clone());
                tx
            }
        };
        if sender.try_send(datagram).is_err() {
            handle.relay_drop();
        }
    }
}

fn unspecified(peer: SocketAddr) -> SocketAddr {
    if peer.is_ipv6() {
        SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))
    } else {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
    }
}

/// Mixes the proxy seed with a flow key and a direction into one generator seed.
fn link_seed(seed: u64, key: u64, direction: u64) -> u64 {
    let mut x = seed
        ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ direction.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    // splitmix64's finaliser: nearby keys give unrelated seeds.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// One client's flow: up from the front queue through `up` to `back`, down from `back` through
/// `down` to the client; each release at its exact instant.
async fn flow(
    key: u64,
    client: SocketAddr,
    front: Arc<UdpSocket>,
    back: UdpSocket,
    mut from_client: mpsc::Receiver<Bytes>,
    handle: ProxyHandle,
) {
    let shared = handle.shared.clone();
    let mut up = Link::new(shared.conditions.up, link_seed(shared.seed, key, 0));
    let mut down = Link::new(shared.conditions.down, link_seed(shared.seed, key, 1));
    let mut buf = vec![0u8; MAX_DATAGRAM];
    if let Err(e) = back.connect(shared.server).await {
        tracing::warn!(error = %e, server = %shared.server, "proxy cannot reach the server");
        return;
    }
    let mut idle_at = Instant::now() + shared.flow_idle;
    loop {
        let next = [up.poll_timeout(), down.poll_timeout()].into_iter().flatten().min();
        tokio::select! {
            () = tokio::time::sleep_until(idle_at), if next.is_none() => break,
            got = from_client.recv() => {
                let Some(datagram) = got else { break };
                let cut = lock(&shared.cut).contains(&key);
                up.set_cut(cut);
                up.offer(Instant::now().into_std(), datagram);
            }
            got = back.recv(&mut buf) => match got {
                Ok(len) => {
                    let cut = lock(&shared.cut).contains(&key);
                    down.set_cut(cut);
                    down.offer(Instant::now().into_std(), Bytes::copy_from_slice(&buf[..len]));
                }
                // The server's port unreachable (restarting): nothing to relay.
                Err(e) => tracing::debug!(error = %e, "proxy flow socket"),
            },
            () = sleep_until(next) => {}
        }
        idle_at = Instant::now() + shared.flow_idle;
        let now = Instant::now().into_std();
        while let Some(datagram) = up.poll_release(now) {
            if back.send(&datagram).await.is_err() {
                handle.relay_drop();
            }
        }
        while let Some(datagram) = down.poll_release(now) {
            if front.send_to(&datagram, client).await.is_err() {
                handle.relay_drop();
            }
        }
        lock(&shared.flows).insert(key, (up.stats(), down.stats()));
    }
    // Its counts move to the ended flows' (a later flow may reuse the key).
    lock(&shared.flows).remove(&key);
    let mut ended = lock(&shared.ended);
    ended.0 += 1;
    ended.1.absorb(&up.stats());
    ended.2.absorb(&down.stats());
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Impairment;

    /// How long a test waits for a datagram.
    const WAIT: Duration = Duration::from_secs(5);

    async fn echo_server() -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            while let Ok((len, from)) = socket.recv_from(&mut buf).await {
                let _ = socket.send_to(&buf[..len], from).await;
            }
        });
        (addr, task)
    }

    /// A proxy with no impairment (seed 1) in front of an echo server.
    async fn clean_proxy() -> (Proxy, tokio::task::JoinHandle<()>) {
        let (server, echo) = echo_server().await;
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        (Proxy::start(loopback, server, Conditions::default(), 1).await.unwrap(), echo)
    }

    /// Sends `payload` from `client` to `to` and expects no answer within 300 ms.
    async fn unanswered(client: &UdpSocket, to: SocketAddr, payload: &[u8]) -> bool {
        client.send_to(payload, to).await.unwrap();
        let mut buf = [0u8; 16];
        tokio::time::timeout(Duration::from_millis(300), client.recv(&mut buf)).await.is_err()
    }

    async fn client() -> UdpSocket {
        UdpSocket::bind("127.0.0.1:0").await.unwrap()
    }

    async fn echo(client: &UdpSocket, to: SocketAddr, payload: &[u8]) -> Option<Vec<u8>> {
        client.send_to(payload, to).await.unwrap();
        let mut buf = vec![0u8; 2048];
        let got = tokio::time::timeout(WAIT, client.recv(&mut buf)).await.ok()?.unwrap();
        Some(buf[..got].to_vec())
    }

    #[tokio::test]
    async fn a_clean_proxy_relays_both_ways_and_counts_each_datagram() {
        let (proxy, _echo) = clean_proxy().await;
        let c = client().await;
        assert_eq!(echo(&c, proxy.handle().addr(), b"ping").await.as_deref(), Some(&b"ping"[..]));
        let stats = proxy.handle().stats();
        assert_eq!((stats.flows, stats.up.released, stats.down.released), (1, 1, 1));
    }

    #[tokio::test]
    async fn lag_holds_each_way_for_its_time() {
        let (server, _echo) = echo_server().await;
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let lag = Impairment::parse("lag=40ms").unwrap();
        let proxy = Proxy::start(loopback, server, Conditions::both(lag), 1).await.unwrap();
        let c = client().await;
        let sent = Instant::now();
        assert!(echo(&c, proxy.handle().addr(), b"x").await.is_some());
        assert!(sent.elapsed() >= Duration::from_millis(80), "40 ms up and 40 ms down");
    }

    #[tokio::test]
    async fn a_cut_flow_passes_nothing_until_healed() {
        let (proxy, _echo) = clean_proxy().await;
        let handle = proxy.handle();
        let c = client().await;
        handle.register(c.local_addr().unwrap().port(), 7);
        handle.set_cut(7, true);
        assert!(unanswered(&c, handle.addr(), b"lost").await, "nothing crosses a cut");
        handle.set_cut(7, false);
        assert_eq!(echo(&c, handle.addr(), b"back").await.as_deref(), Some(&b"back"[..]));
        assert_eq!(handle.stats().up.cut, 1);
    }

    #[tokio::test]
    async fn each_client_is_a_flow_of_its_own_towards_the_server() {
        let (proxy, _echo) = clean_proxy().await;
        let (a, b) = (client().await, client().await);
        assert_eq!(echo(&a, proxy.handle().addr(), b"a").await.as_deref(), Some(&b"a"[..]));
        assert_eq!(echo(&b, proxy.handle().addr(), b"b").await.as_deref(), Some(&b"b"[..]));
        assert_eq!(proxy.handle().stats().flows, 2);
    }

    #[tokio::test]
    async fn a_silent_flow_ends_and_the_client_starts_a_new_one_keeping_the_counts() {
        let (server, _echo) = echo_server().await;
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let idle = Duration::from_millis(200);
        let proxy =
            Proxy::start_with_idle(loopback, server, Conditions::default(), 1, idle).await.unwrap();
        let handle = proxy.handle();
        let c = client().await;
        assert!(echo(&c, handle.addr(), b"1").await.is_some());
        tokio::time::sleep(idle * 3).await;
        assert!(lock(&handle.shared.flows).is_empty(), "the silent flow ended");
        assert!(echo(&c, handle.addr(), b"2").await.is_some(), "a new flow relays");
        let stats = handle.stats();
        assert_eq!((stats.flows, stats.up.released, stats.down.released), (2, 2, 2));
    }

    #[tokio::test]
    async fn an_unregistered_flow_never_shares_a_registered_key() {
        let (proxy, _echo) = clean_proxy().await;
        let handle = proxy.handle();
        let (registered, unregistered) = (client().await, client().await);
        handle.register(registered.local_addr().unwrap().port(), 1);
        handle.set_cut(1, true);
        assert!(echo(&unregistered, handle.addr(), b"u").await.is_some(), "not cut with key 1");
        assert!(unanswered(&registered, handle.addr(), b"r").await, "key 1 is cut");
    }

    #[tokio::test]
    async fn a_dropped_proxy_frees_its_port() {
        let (proxy, _echo) = clean_proxy().await;
        let addr = proxy.handle().addr();
        drop(proxy);
        let rebound = async {
            loop {
                if UdpSocket::bind(addr).await.is_ok() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        assert!(tokio::time::timeout(WAIT, rebound).await.is_ok(), "{addr} still bound");
    }

    #[test]
    fn flow_seeds_differ_by_key_and_direction() {
        let seeds: BTreeSet<u64> =
            (0..100).flat_map(|k| [link_seed(1, k, 0), link_seed(1, k, 1)]).collect();
        assert_eq!(seeds.len(), 200);
        assert_eq!(link_seed(1, 5, 0), link_seed(1, 5, 0));
        // Well mixed: neighbouring keys give seeds with about half their 64 bits set.
        let seeds: Vec<u64> =
            (0..1000).flat_map(|k| [link_seed(7, k, 0), link_seed(7, k, 1)]).collect();
        let mean =
            seeds.iter().map(|s| f64::from(s.count_ones())).sum::<f64>() / seeds.len() as f64;
        assert!((31.0..33.0).contains(&mean), "mean bits set {mean}");
    }
}
