//! Criterion benchmarks of the lifecycle gate registry.
//!
//! - `publish_one_fact/*`: publishing a fact with 1k, 10k and 100k unrelated pending waits.
//!   The cost must stay flat: publication goes through the (object, fact) index.
//! - `register_six_fact_wait/*`: registering a wait on six facts over six scopes.
//! - `reset_lifetime/*`: retiring a world of 10k scopes.

#![allow(missing_docs, reason = "criterion_group! generates undocumented public functions")]
#![allow(
    clippy::expect_used,
    reason = "benchmark setup: every token used is freshly scoped and current"
)]

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use gatehouse_lifecycle::{ObjectId, Registry, Requirement, ScopeToken};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::*;

/// Deliveries, counted by every callback.
type Delivered = u64;

const WORLD: ObjectId = ObjectId::new(1);
const GAME_INSTANCE: ObjectId = ObjectId::new(2);
const TARGET: ObjectId = ObjectId::new(3);
/// Objects from here on are the unrelated ones.
const FIRST_UNRELATED: u64 = 1_000;

const SIX_FACTS: [GameplayTag; 6] = [
    LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY,
    LIFECYCLE_FACT_PLAYER_STATE_CHARACTER_DEF_READY,
    LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY,
    LIFECYCLE_FACT_CHARACTER_CHARACTER_DEF_MATCHES,
    LIFECYCLE_FACT_CHARACTER_OWNING_CLIENT_POSSESSION_ACKNOWLEDGED,
    LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY,
];

fn count(_: &mut Registry<Delivered>, delivered: &mut Delivered) {
    *delivered += 1;
}

/// A registry holding `unrelated` pending waits, each on its own object and its own fact, and
/// the scope of the target object.
fn with_unrelated_waits(unrelated: u64) -> (Registry<Delivered>, ScopeToken) {
    let mut gates = Registry::new();
    let mut delivered = 0;
    for raw in FIRST_UNRELATED..FIRST_UNRELATED + unrelated {
        let token = gates.scope(ObjectId::new(raw), WORLD);
        gates
            .wait_for_all(
                token,
                "Unrelated",
                &[Requirement::new(token, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY)],
                &mut delivered,
                count,
            )
            .expect("fresh tokens are current");
    }
    let target = gates.scope(TARGET, WORLD);
    (gates, target)
}

fn publish_one_fact(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish_one_fact");
    for unrelated in [1_000, 10_000, 100_000] {
        let (mut gates, target) = with_unrelated_waits(unrelated);
        let mut delivered = 0;

        // A target wait that needs two facts: publishing one examines it and delivers nothing.
        gates
            .wait_for_all(
                target,
                "Target.Pending",
                &[
                    Requirement::new(target, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY),
                    Requirement::new(target, LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY),
                ],
                &mut delivered,
                count,
            )
            .expect("current tokens");
        group.bench_function(BenchmarkId::new("wakes_one_wait", unrelated), |b| {
            b.iter(|| {
                let fact = LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY;
                black_box(gates.set_ready(target, fact, true, &mut delivered)).ok();
                black_box(gates.clear(target, fact)).ok();
            });
        });
        gates.cancel(TARGET, "Target.Pending");

        // Register a one-fact wait, publish its fact (delivering it), close the fact again.
        group.bench_function(BenchmarkId::new("register_and_deliver", unrelated), |b| {
            b.iter(|| {
                let fact = LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED;
                gates
                    .wait_for_all(
                        target,
                        "Target.Deliver",
                        &[Requirement::new(target, fact)],
                        &mut delivered,
                        count,
                    )
                    .ok();
                black_box(gates.set_ready(target, fact, true, &mut delivered)).ok();
                black_box(gates.clear(target, fact)).ok();
            });
        });
        assert_eq!(gates.pending_wait_count() as u64, unrelated);
    }
    group.finish();
}

fn register_six_fact_wait(c: &mut Criterion) {
    let mut group = c.benchmark_group("register_six_fact_wait");
    let mut gates: Registry<Delivered> = Registry::new();
    let mut delivered = 0;
    let tokens: Vec<ScopeToken> =
        (10..16).map(|raw| gates.scope(ObjectId::new(raw), WORLD)).collect();
    let owner = gates.scope(TARGET, GAME_INSTANCE);
    let requirements: Vec<Requirement> =
        tokens.iter().zip(SIX_FACTS).map(|(token, fact)| Requirement::new(*token, fact)).collect();
    for requirement in &requirements[..5] {
        gates
            .set_ready(requirement.token, requirement.fact, true, &mut delivered)
            .expect("current tokens");
    }

    // Five of six ready: the wait stays pending, and each registration replaces the last.
    group.bench_function("pending_replacing", |b| {
        b.iter(|| {
            black_box(gates.wait_for_all(
                owner,
                "Six.Facts",
                black_box(&requirements),
                &mut delivered,
                count,
            ))
            .ok();
        });
    });
    gates.cancel(TARGET, "Six.Facts");

    // All six ready: the callback runs during registration.
    let last = requirements[5];
    gates.set_ready(last.token, last.fact, true, &mut delivered).expect("current token");
    group.bench_function("delivered_at_registration", |b| {
        b.iter(|| {
            black_box(gates.wait_for_all(
                owner,
                "Six.Facts",
                black_box(&requirements),
                &mut delivered,
                count,
            ))
            .ok();
        });
    });
    group.finish();
}

fn reset_lifetime(c: &mut Criterion) {
    const SCOPES: u64 = 10_000;
    let mut group = c.benchmark_group("reset_lifetime");
    group.sample_size(20);

    group.bench_function(BenchmarkId::new("scopes_with_a_fact", SCOPES), |b| {
        b.iter_batched(
            || {
                let mut gates: Registry<Delivered> = Registry::new();
                let mut delivered = 0;
                for raw in 0..SCOPES {
                    let token = gates.scope(ObjectId::new(FIRST_UNRELATED + raw), WORLD);
                    gates
                        .set_ready(token, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut delivered)
                        .expect("current token");
                }
                gates
            },
            |mut gates| {
                assert_eq!(gates.reset_lifetime(WORLD) as u64, SCOPES);
                gates
            },
            BatchSize::PerIteration,
        );
    });

    group.bench_function(BenchmarkId::new("scopes_with_a_pending_wait", SCOPES), |b| {
        b.iter_batched(
            || with_unrelated_waits(SCOPES).0,
            |mut gates| {
                assert_eq!(gates.reset_lifetime(WORLD) as u64, SCOPES + 1);
                gates
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, publish_one_fact, register_six_fact_wait, reset_lifetime);
criterion_main!(benches);
