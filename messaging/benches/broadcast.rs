//! Criterion benchmarks of the router (DESIGN section 8): one broadcast to 1, 10 and 1,000
//! listeners, exact on the channel, and hierarchical from four levels above it
//! (`Message.Test` hearing `Message.Test.Depth1.Depth2.Depth3.Depth4`). Throughput is counted in
//! deliveries, so criterion's element rate gives the cost per delivery.
//!
//! Bounded run: `cargo bench -p gatehouse-messaging -- --warm-up-time 1 --measurement-time 3`.

#![allow(clippy::unwrap_used)] // benchmark set-up unwraps freely, as tests do

use std::hint::black_box;

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

fn broadcast(c: &mut Criterion) {
    let mut group = c.benchmark_group("broadcast");
    for shape in [Shape::Exact, Shape::Hierarchical4, Shape::Hierarchical4Base, Shape::DynamicExact]
    {
        for listeners in [1usize, 10, 1000] {
            let (router, _handles) = setup(shape, listeners);
            let payload = Spawned { notice: Notice { n: 1 } };
            let mut sum = 0u64;
            group.throughput(Throughput::Elements(listeners as u64));
            group.bench_with_input(
                BenchmarkId::new(format!("{shape:?}"), listeners),
                &listeners,
                |b, _| match shape {
                    Shape::DynamicExact => b.iter(|| {
                        router
                            .broadcast_dyn(
                                &mut sum,
                                "Message.Test.Depth1.Depth2.Depth3.Depth4",
                                "Spawned",
                                black_box(&payload),
                            )
                            .unwrap()
                    }),
                    _ => b.iter(|| router.broadcast(&mut sum, DEEP, black_box(&payload)).unwrap()),
                },
            );
            black_box(sum);
        }
    }
    group.finish();
}

criterion_group!(benches, broadcast);
criterion_main!(benches);
