//! Tokio (epoll) TCP with postcard: what a user would write by hand. Batches are a
//! 4-byte length and a 4-byte count followed by postcard-encoded requests, written with
//! one `write_all` per batch from a reused buffer; the receiver reads into a reused
//! buffer, decodes each request and writes it into the ring as a request frame.

use super::harness::{PAYLOAD_BYTES, RingSink, main_edge, median, pin, process_cpu_s, worker_edge};
use clasp_dataplane::request::{RequestHeader, frame_len};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Barrier};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The baseline's request on the wire: the same fields, serde-encoded with postcard.
#[derive(Serialize, Deserialize)]
struct WireRequest<'a> {
    operator: u16,
    key_group: u16,
    flags: u16,
    epoch: u16,
    dest: u16,
    root_home: u16,
    source: u16,
    key_hash: u64,
    request_id: u64,
    root_id: u64,
    admitted_ns: u64,
    #[serde(borrow)]
    key: &'a [u8],
    #[serde(borrow)]
    payload: &'a [u8],
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("tokio runtime")
}

/// Encodes request `seq` the way a user would: fill the struct, serialize.
#[inline]
fn encode(seq: u64, buf: &mut Vec<u8>) {
    let key = seq.to_le_bytes();
    let payload = [seq as u8; PAYLOAD_BYTES];
    let r = WireRequest {
        operator: 1,
        key_group: (seq % 1024) as u16,
        flags: 0,
        epoch: 0,
        dest: 0,
        root_home: 0,
        source: 0,
        key_hash: seq.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        request_id: seq,
        root_id: seq,
        admitted_ns: 0,
        key: &key,
        payload: &payload,
    };
    let before = buf.len();
    buf.resize(before + 128, 0);
    let used = postcard::to_slice(&r, &mut buf[before..])
        .map(|s| s.len())
        .unwrap_or(0);
    buf.truncate(before + used);
}

/// Decodes every complete batch in `buf[..len]` into the sink; returns bytes consumed.
fn decode(buf: &[u8], sink: &mut RingSink) -> usize {
    let mut at = 0;
    while buf.len() - at >= 8 {
        let blen = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap_or([0; 4])) as usize;
        let count = u32::from_le_bytes(buf[at + 4..at + 8].try_into().unwrap_or([0; 4]));
        if buf.len() - at - 8 < blen {
            break;
        }
        let mut body = &buf[at + 8..at + 8 + blen];
        for _ in 0..count {
            let Ok((r, rest)) = postcard::take_from_bytes::<WireRequest<'_>>(body) else {
                break;
            };
            body = rest;
            let len = frame_len(r.key.len(), r.payload.len());
            loop {
                match sink.producer.reserve(len) {
                    Ok(mut g) => {
                        RequestHeader {
                            operator: r.operator,
                            key_group: r.key_group,
                            flags: r.flags,
                            epoch: r.epoch,
                            dest: r.dest,
                            root_home: r.root_home,
                            source: r.source,
                            key_hash: r.key_hash,
                            request_id: r.request_id,
                            root_id: r.root_id,
                            admitted_ns: r.admitted_ns,
                        }
                        .write(r.key, r.payload, &mut g);
                        g.commit();
                        sink.received += 1;
                        break;
                    }
                    Err(_) => sink.drain(),
                }
            }
        }
        at += 8 + blen;
    }
    at
}

/// CPU ns per request at `batch`, saturated.
pub(super) fn run(batch: usize, requests: u64) -> f64 {
    let listener = runtime()
        .block_on(async { TcpListener::bind("127.0.0.1:0").await })
        .expect("bind");
    let std_listener = listener.into_std().expect("std listener");
    let addr = std_listener.local_addr().expect("addr");
    let barrier = Arc::new(Barrier::new(3));
    let rx = {
        let barrier = barrier.clone();
        std::thread::spawn(move || {
            pin(1);
            let rt = runtime();
            rt.block_on(async move {
                let l = TcpListener::from_std(std_listener).expect("listener");
                let (mut s, _) = l.accept().await.expect("accept");
                s.set_nodelay(true).expect("nodelay");
                let mut sink = RingSink::new(false);
                let mut buf = vec![0u8; 1 << 20];
                let mut filled = 0;
                worker_edge(&barrier);
                while sink.received < requests {
                    let n = s.read(&mut buf[filled..]).await.expect("read");
                    assert!(n > 0, "baseline sender closed early");
                    filled += n;
                    let used = decode(&buf[..filled], &mut sink);
                    buf.copy_within(used..filled, 0);
                    filled -= used;
                    sink.drain();
                }
                worker_edge(&barrier);
                sink.checksum
            })
        })
    };
    let tx = {
        let barrier = barrier.clone();
        std::thread::spawn(move || {
            pin(0);
            let rt = runtime();
            rt.block_on(async move {
                let mut s = TcpStream::connect(addr).await.expect("connect");
                s.set_nodelay(true).expect("nodelay");
                let mut buf = Vec::with_capacity(1 << 16);
                worker_edge(&barrier);
                let mut seq = 0;
                while seq < requests {
                    buf.clear();
                    buf.extend_from_slice(&[0; 8]);
                    let n = (batch as u64).min(requests - seq);
                    for _ in 0..n {
                        encode(seq, &mut buf);
                        seq += 1;
                    }
                    let blen = (buf.len() - 8) as u32;
                    buf[..4].copy_from_slice(&blen.to_le_bytes());
                    buf[4..8].copy_from_slice(&(n as u32).to_le_bytes());
                    s.write_all(&buf).await.expect("write");
                }
                worker_edge(&barrier);
            })
        })
    };
    let cpu0 = main_edge(&barrier, process_cpu_s);
    let cpu = main_edge(&barrier, process_cpu_s) - cpu0;
    let checksum = rx.join().expect("receiver");
    tx.join().expect("sender");
    let want: u64 = (0..requests).fold(0u64, |s, i| s.wrapping_add(i));
    assert_eq!(checksum, want, "baseline lost requests");
    cpu * 1e9 / requests as f64
}

/// Half the median round trip of one request, µs.
pub(super) fn latency_us(round_trips: usize) -> f64 {
    let rt = runtime();
    let listener = rt
        .block_on(async { TcpListener::bind("127.0.0.1:0").await })
        .expect("bind");
    let std_listener = listener.into_std().expect("std");
    let addr = std_listener.local_addr().expect("addr");
    let echo = std::thread::spawn(move || {
        runtime().block_on(async move {
            let l = TcpListener::from_std(std_listener).expect("listener");
            let (mut s, _) = l.accept().await.expect("accept");
            s.set_nodelay(true).expect("nodelay");
            let mut buf = vec![0u8; 4096];
            loop {
                let mut hdr = [0u8; 8];
                if s.read_exact(&mut hdr).await.is_err() {
                    return;
                }
                let blen = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
                if blen > buf.len() || s.read_exact(&mut buf[..blen]).await.is_err() {
                    return;
                }
                let mut sink = RingSink::new(false);
                let mut whole = hdr.to_vec();
                whole.extend_from_slice(&buf[..blen]);
                decode(&whole, &mut sink);
                if s.write_all(&whole).await.is_err() {
                    return;
                }
            }
        })
    });
    let rtts = rt.block_on(async move {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.set_nodelay(true).expect("nodelay");
        let mut buf = Vec::with_capacity(256);
        let mut back = vec![0u8; 256];
        let mut rtts = Vec::with_capacity(round_trips);
        for i in 0..round_trips as u64 {
            let t0 = Instant::now();
            buf.clear();
            buf.extend_from_slice(&[0; 8]);
            encode(i, &mut buf);
            let blen = (buf.len() - 8) as u32;
            buf[..4].copy_from_slice(&blen.to_le_bytes());
            buf[4..8].copy_from_slice(&1u32.to_le_bytes());
            s.write_all(&buf).await.expect("write");
            s.read_exact(&mut back[..buf.len()]).await.expect("read");
            rtts.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        rtts
    });
    echo.join().expect("echo");
    median(rtts) / 2.0
}
