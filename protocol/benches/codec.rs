//! Frame codec throughput: encode and decode one frame of each representative message.

#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN;
use gatehouse_protocol::{FrameDecoder, ServerMessage, encode_frame_into, samples};
use std::hint::black_box;

fn codec(c: &mut Criterion) {
    let messages = samples::server_messages();
    let mut group = c.benchmark_group("codec");
    group.bench_function("encode_all_server_messages", |b| {
        let mut out = Vec::with_capacity(4096);
        b.iter(|| {
            out.clear();
            for m in &messages {
                encode_frame_into(black_box(m), DEFAULT_MAX_FRAME_LEN, &mut out).ok();
            }
            out.len()
        })
    });
    let mut stream = Vec::new();
    for m in &messages {
        encode_frame_into(m, DEFAULT_MAX_FRAME_LEN, &mut stream).ok();
    }
    group.bench_function("decode_all_server_messages", |b| {
        b.iter(|| {
            let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
            d.extend(black_box(&stream));
            let mut n = 0;
            while let Ok(Some(m)) = d.next_message::<ServerMessage>() {
                black_box(m);
                n += 1;
            }
            n
        })
    });
    group.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
