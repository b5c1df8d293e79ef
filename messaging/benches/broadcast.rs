//! Criterion benchmarks of the router (docs/testing.md): one broadcast to 1, 10 and 1,000
//! listeners, exact on the channel, and hierarchical from four levels above it
//! (`Message.Test` hearing `Message.Test.Depth1.Depth2.Depth3.Depth4`). Throughput is counted in
//! deliveries, so criterion's element rate gives the cost per delivery.
//!
//! The floor is a plain call loop over `Vec<Box<dyn Fn>>` doing the same work per listener
//! (`PlainLoop`; figures are ratios to it, so they hold on any machine). After criterion's
//! groups, the benchmark measures each router shape against that loop in interleaved rounds (so
//! both see the same machine load) and prints the ratio of the fastest rounds per listener
//! count; the target is at most 3 x at 10 and 1,000 listeners, exact and hierarchical.
//!
//! Bounded run: `cargo bench -p gatehouse-messaging --bench broadcast -- --warm-up-time 1
//! --measurement-time 2`.

#![allow(clippy::unwrap_used)] // benchmark set-up unwraps freely, as tests do

use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gatehouse_messaging::{
    Channel, Channels, Derives, Listen, ListenDyn, Listener, Match, Parent, Payload, Router,
    RouterConfig,
};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::MESSAGE_TEST_DEPTH1_DEPTH2_DEPTH3_DEPTH4;

#[derive(Clone)]
struct Notice {
    n: u64,
}
impl Payload for Notice {
    const NAME: &'static str = "Notice";
}

#[derive(Clone)]
struct Spawned {
    notice: Notice,
}
impl Payload for Spawned {
    const NAME: &'static str = "Spawned";
    const PARENT: Option<Parent> = Some(Parent::of::<Self, Notice>());
}
impl Derives<Notice> for Spawned {
    fn parent(&self) -> &Notice {
        &self.notice
    }
}

const DEEP: Channel<Spawned> = Channel::new(MESSAGE_TEST_DEPTH1_DEPTH2_DEPTH3_DEPTH4);

#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Typed listeners, exact on the channel, reading `Spawned`.
    Exact,
    /// Typed listeners, hierarchical on `Message.Test` (four levels up), reading `Spawned`.
    Hierarchical4,
    /// As `Hierarchical4`, reading the base type `Notice` (one derivation step per delivery).
    Hierarchical4Base,
    /// Dynamic listeners, exact, with dynamic broadcasts.
    DynamicExact,
}

fn setup(shape: Shape, listeners: usize) -> (Router<u64>, Vec<Listener>) {
    let mut channels = Channels::new();
    channels.declare(DEEP).unwrap();
    let router: Router<u64> = Router::new(RouterConfig::default(), channels);
    let family = GameplayTag::parse("Message.Test").unwrap();
    let mut sum = 0;
    let handles = (0..listeners)
        .map(|_| match shape {
            Shape::Exact => router.listen(&mut sum, Listen::channel(DEEP, Match::Exact), |d, p| {
                *d.state() += p.notice.n
            }),
            Shape::Hierarchical4 => router.listen(
                &mut sum,
                Listen::<Spawned>::tag(family, Match::Hierarchical),
                |d, p| *d.state() += p.notice.n,
            ),
            Shape::Hierarchical4Base => router.listen(
                &mut sum,
                Listen::<Notice>::tag(family, Match::Hierarchical),
                |d, p| *d.state() += p.n,
            ),
            Shape::DynamicExact => router.listen_dyn(
                &mut sum,
                ListenDyn::new("Message.Test.Depth1.Depth2.Depth3.Depth4", Match::Exact, "Spawned"),
                |d, p| *d.state() += p.downcast_ref::<Spawned>().map_or(0, |s| s.notice.n),
            ),
        })
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    (router, handles)
}

/// The floor: one boxed closure per listener, called in order, doing what a router listener does.
type PlainCallback = Box<dyn Fn(&mut u64, &Spawned)>;

fn plain_loop(listeners: usize) -> Vec<PlainCallback> {
    (0..listeners)
        .map(|_| Box::new(|sum: &mut u64, p: &Spawned| *sum += p.notice.n) as PlainCallback)
        .collect()
}

fn call_all(callbacks: &[PlainCallback], sum: &mut u64, payload: &Spawned) {
    for callback in callbacks {
        callback(sum, payload);
    }
}

/// One broadcast of `shape` on `router`.
fn send(router: &Router<u64>, shape: Shape, sum: &mut u64, payload: &Spawned) {
    match shape {
        Shape::DynamicExact => {
            router
                .broadcast_dyn(sum, "Message.Test.Depth1.Depth2.Depth3.Depth4", "Spawned", payload)
                .unwrap();
        }
        _ => {
            router.broadcast(sum, DEEP, payload).unwrap();
        }
    }
}

const SHAPES: [Shape; 4] =
    [Shape::Exact, Shape::Hierarchical4, Shape::Hierarchical4Base, Shape::DynamicExact];
const LISTENERS: [usize; 3] = [1, 10, 1000];

fn broadcast(c: &mut Criterion) {
    let mut group = c.benchmark_group("broadcast");
    for listeners in LISTENERS {
        let callbacks = plain_loop(listeners);
        let payload = Spawned { notice: Notice { n: 1 } };
        let mut sum = 0u64;
        group.throughput(Throughput::Elements(listeners as u64));
        group.bench_with_input(BenchmarkId::new("PlainLoop", listeners), &listeners, |b, _| {
            b.iter(|| call_all(black_box(&callbacks), &mut sum, black_box(&payload)))
        });
        black_box(sum);
    }
    for shape in SHAPES {
        for listeners in LISTENERS {
            let (router, _handles) = setup(shape, listeners);
            let payload = Spawned { notice: Notice { n: 1 } };
            let mut sum = 0u64;
            group.throughput(Throughput::Elements(listeners as u64));
            group.bench_with_input(
                BenchmarkId::new(format!("{shape:?}"), listeners),
                &listeners,
                |b, _| b.iter(|| send(&router, shape, &mut sum, black_box(&payload))),
            );
            black_box(sum);
        }
    }
    group.finish();
}

/// Nanoseconds per call of `f`, over `iterations` calls.
fn time(iterations: u64, f: &mut dyn FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    start.elapsed().as_nanos() as f64 / iterations as f64
}

/// Router delivery against the plain loop, in interleaved rounds of about 2 ms each: prints
/// each shape's cost per delivery and the loop's, each the fastest of its rounds (on a shared,
/// noisy machine the fastest round is the one least disturbed), and their ratio.
fn ratio_to_plain_loop(_: &mut Criterion) {
    const ROUNDS: usize = 150;
    let payload = Spawned { notice: Notice { n: 1 } };
    println!(
        "\nrouter delivery against a plain Vec<Box<dyn Fn>> call loop (fastest of {ROUNDS} interleaved rounds)"
    );
    println!(
        "{:<18} {:>9} {:>12} {:>12} {:>7}",
        "shape", "listeners", "router ns", "loop ns", "ratio"
    );
    for shape in SHAPES {
        for listeners in LISTENERS {
            let (router, _handles) = setup(shape, listeners);
            let callbacks = plain_loop(listeners);
            let (mut sum, mut plain_sum) = (0u64, 0u64);
            let mut routed = || send(&router, shape, &mut sum, black_box(&payload));
            let mut plain = || call_all(black_box(&callbacks), &mut plain_sum, black_box(&payload));
            // Calibrate: enough calls of the loop for about 2 ms.
            let mut iterations = 1u64;
            while time(iterations, &mut plain) * iterations as f64 <= 2e6 && iterations < 1 << 30 {
                iterations *= 2;
            }
            let (mut router_ns, mut loop_ns) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..ROUNDS {
                loop_ns = loop_ns.min(time(iterations, &mut plain));
                router_ns = router_ns.min(time(iterations, &mut routed));
            }
            let per = listeners as f64;
            println!(
                "{:<18} {:>9} {:>12.2} {:>12.2} {:>6.2}x",
                format!("{shape:?}"),
                listeners,
                router_ns / per,
                loop_ns / per,
                router_ns / loop_ns
            );
            black_box((sum, plain_sum));
        }
    }
}

criterion_group!(benches, broadcast, ratio_to_plain_loop);
criterion_main!(benches);
