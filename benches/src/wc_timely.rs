//! The timely dataflow word count `clasp bench wc` runs beside clasp's (built only with the
//! `baselines` feature): what a user of the reference dataflow system would write for WC.
//!
//! Each of `workers` timely workers (threads of one process, `Config::process`) reads its
//! share of the same pre-generated sentences (sentence `i` goes to worker `i mod workers`),
//! splits each into words (`flat_map`, one owned `Vec<u8>` per word, as timely's own word-count
//! example does), exchanges the words by their xxh3 hash and counts them in a `HashMap`. Like
//! clasp's `count`, it outputs `(word, count)` on every occurrence; the output is folded into
//! the same order-free digest clasp's `count` keeps ([`Digest::add_keyed`] under the
//! `count` operator's output seed), so equal digests say both produced the same outputs.
//!
//! Input is offered in rounds of [`ROUND_SENTENCES`] sentences, one timestamp each, and a
//! worker lets at most [`ROUNDS_IN_FLIGHT`] rounds be unfinished — about as many sentences as
//! clasp's ingress lets be in flight (4096 roots), so neither side buffers its whole input.

use crate::wc::TimelyRun;
use clasp_operators::digest::Digest;
use clasp_operators::generate::Pregenerated;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Input, Operator, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};

/// Sentences per timestamp.
pub const ROUND_SENTENCES: usize = 1024;
/// Unfinished rounds a worker allows before it waits.
pub const ROUNDS_IN_FLIGHT: u64 = 4;

/// Counts the words of sentences `0..sentences` of `records` on `workers` timely workers.
/// `output_seed`: the seed of clasp's `count` outputs digest.
pub fn run(
    records: &Arc<Pregenerated>,
    sentences: usize,
    workers: usize,
    output_seed: u64,
) -> Result<TimelyRun, String> {
    if sentences > records.len() {
        return Err(format!(
            "{sentences} sentences asked, {} generated",
            records.len()
        ));
    }
    let records = records.clone();
    let start = Instant::now();
    let guards = timely::execute(timely::Config::process(workers), move |worker| {
        let (index, peers) = (worker.index(), worker.peers());
        let mut input = InputHandle::new();
        let probe = ProbeHandle::new();
        let counted = Rc::new(RefCell::new((0u64, Digest::EMPTY)));
        let sink = counted.clone();
        let split_records = records.clone();
        worker.dataflow::<u64, _, _>(|scope| {
            scope
                .input_from(&mut input)
                .container::<Vec<u32>>()
                .flat_map(move |i: u32| {
                    let (_, sentence) = split_records.get(i as usize).unwrap_or_default();
                    sentence
                        .split(|&b| b == b' ')
                        .filter(|w| !w.is_empty())
                        .map(<[u8]>::to_vec)
                        .collect::<Vec<_>>()
                })
                .unary::<timely::container::CapacityContainerBuilder<Vec<()>>, _, _, _>(
                    Exchange::new(|w: &Vec<u8>| clasp_operators::key::key_hash(w)),
                    "count",
                    move |_, _| {
                        let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
                        let mut scratch = Vec::new();
                        move |input, _output| {
                            let mut state = sink.borrow_mut();
                            let (words, digest) = &mut *state;
                            input.for_each(|_, data| {
                                for word in data.drain(..) {
                                    *words += 1;
                                    let n = match counts.get_mut(&word) {
                                        Some(n) => n,
                                        None => counts.entry(word.clone()).or_insert(0),
                                    };
                                    *n += 1;
                                    digest.add_keyed(
                                        output_seed,
                                        &word,
                                        &n.to_le_bytes(),
                                        &mut scratch,
                                    );
                                }
                            });
                        }
                    },
                )
                .probe_with(&probe);
        });
        let mine: Vec<u32> = (index..sentences)
            .step_by(peers)
            .map(|i| i as u32)
            .collect();
        let mut round = 0u64;
        for chunk in mine.chunks(ROUND_SENTENCES) {
            for &i in chunk {
                input.send(i);
            }
            round += 1;
            input.advance_to(round);
            while probe.less_than(&round.saturating_sub(ROUNDS_IN_FLIGHT)) {
                worker.step();
            }
            worker.step();
        }
        drop(input);
        while worker.step() {}
        *counted.borrow()
    })?;
    let mut run = TimelyRun {
        elapsed: Duration::ZERO,
        words: 0,
        outputs: Digest::EMPTY,
    };
    for result in guards.join() {
        let (words, digest) = result?;
        run.words += words;
        run.outputs.combine(&digest);
    }
    run.elapsed = start.elapsed();
    Ok(run)
}
