//! What a cluster worker reports about itself: its cumulative counters every interval (the
//! planner's metrics) and its summary at the end of the run.

use super::*;
use crate::runtime::executor::ExecutorResult;
use crate::runtime::results::{TOTALS, counter_totals, merge};
use std::collections::BTreeMap;

/// The worker's cumulative counters now.
pub(super) fn counters(node: &Node, run: &Running) -> Counters {
    let ops = run.spec.operators.len();
    let mut c = Counters {
        worker: node.id,
        t_ns: crate::clock::monotonic_ns(),
        processed: vec![0; ops],
        exec_ns: vec![0; ops],
        edges_local: vec![0; run.spec.edges.len()],
        edges_remote: vec![0; run.spec.edges.len()],
        ..Counters::default()
    };
    let mut exec_cpu_ns = Some(0u64);
    for e in 0..run.executors {
        let m = run.seg().metrics(e);
        for op in 0..ops {
            c.processed[op] += m.get(m.processed(op));
            c.exec_ns[op] += m.get(m.exec_ns(op));
        }
        for (i, edge) in run.spec.edges.iter().enumerate() {
            c.edges_local[i] += m.get(m.edge_local(edge.from, edge.to));
            c.edges_remote[i] += m.get(m.edge_remote(edge.from, edge.to));
        }
        c.busy_ns += m.get(scalar::BUSY_NS);
        c.idle_spin_ns += m.get(scalar::IDLE_SPIN_NS);
        c.sleep_cpu_ns += m.get(scalar::SLEEP_CPU_NS);
        c.frames_in += m.get(scalar::FRAMES_IN);
        c.exec_sleeps += m.get(scalar::SLEEPS);
        let thread_ns = crate::cpu_usage::thread_cpu_ns_of(m.get(scalar::TID));
        exec_cpu_ns = exec_cpu_ns.zip(thread_ns).map(|(sum, t)| sum + t);
    }
    c.exec_cpu_ns = exec_cpu_ns;
    c.exec_idle_spin_ns = c.idle_spin_ns;
    c.exec_sleep_cpu_ns = c.sleep_cpu_ns;
    // The network thread's idle spin and sleeps in this job, like the executors'.
    let net = node.t.counters();
    c.idle_spin_ns += net.idle_spin_ns;
    c.sleep_cpu_ns += net.sleep_cpu_ns;
    c.cpu_ns = run.cpu.read_ns();
    c.sleeps = crate::cpu_usage::process_sleeps().saturating_sub(run.sleeps_from);
    c.throttled_periods = run.throttling.read_periods();
    c.batches = (0..node.sent.len().max(node.rx.received.len()))
        .map(|p| {
            let pc = node.t.peer_counters(p as PeerId);
            pc.batches_sent + pc.batches_received
        })
        .sum();
    c.sent_to = node
        .sent
        .iter()
        .enumerate()
        .filter(|&(_, &n)| n > 0)
        .map(|(p, &n)| (p as PeerId, n))
        .collect();
    let idx = run.seg().index;
    c.queued_bytes = (0..idx.executors)
        .flat_map(|b| {
            [idx.ingress(b), idx.net_in(b)]
                .into_iter()
                .chain((0..idx.executors).map(move |a| idx.exec(a, b)))
        })
        .filter_map(|r| run.seg().segment.queued_bytes(r).ok())
        .sum();
    c
}

/// Sends the summary and waits for `BYE` (or the driver's disconnection).
pub(super) fn finish(
    node: &mut Node,
    run: &Running,
    results: Vec<ExecutorResult>,
) -> Result<(), NodeError> {
    // The per-operator metrics are the last counters.
    let c = counters(node, run);
    let merged = merge(run.spec.operators.len(), results);
    let mut s = WorkerSummary {
        worker: node.id,
        summaries: merged.summaries,
        state_keys: merged.state_keys.iter().map(|&n| n as u64).collect(),
        malformed: merged.malformed,
        processed: c.processed,
        exec_ns: c.exec_ns,
        edges_local: c.edges_local,
        edges_remote: c.edges_remote,
        totals: Vec::new(),
        errors: node.errors.clone(),
    };
    let mut totals: BTreeMap<String, u64> = counter_totals(run.seg(), &TOTALS)
        .into_iter()
        .chain(counter_totals(
            run.seg(),
            &[
                ("remote_sent", scalar::REMOTE_SENT),
                ("groups_copied_ahead", scalar::COPIED_AHEAD),
                ("groups_moved_as_changes", scalar::MOVED_AS_CHANGES),
                ("copies_refreshed_ahead", scalar::REFRESHED_AHEAD),
                ("sent_from_moved", scalar::SENT_FROM_MOVED),
            ],
        ))
        .map(|(name, n)| (name.to_owned(), n))
        .collect();
    let mask = (0..run.executors).fold(0u64, |mask, e| {
        mask | run.seg().metrics(e).get(scalar::REMOTE_DESTINATIONS)
    });
    totals.insert("remote_destinations".into(), u64::from(mask.count_ones()));
    let tc = node.t.counters();
    totals.insert("net_enters".into(), tc.enters);
    totals.insert("net_turns".into(), tc.turns);
    totals.insert("net_refused".into(), tc.refused);
    let (mut batches, mut sends, mut refusals, mut full) = (0, 0, 0, 0);
    for p in 0..node.sent.len().max(node.rx.received.len()) {
        let c = node.t.peer_counters(p as PeerId);
        batches += c.batches_sent;
        sends += c.batch_sends;
        refusals += c.append_refusals;
        full += c.deliveries_full;
    }
    totals.insert("net_batches_sent".into(), batches);
    totals.insert("net_batch_sends".into(), sends);
    totals.insert("net_append_refusals".into(), refusals);
    totals.insert("net_deliveries_full".into(), full);
    s.totals = totals.into_iter().collect();
    let mut msg = Message::Summary(Box::new(s));
    let too_long = |m: &Message| {
        encode(m).map_or(true, |b| {
            b.len() > crate::transport::wire::MAX_CONTROL_BODY_BYTES
        })
    };
    if too_long(&msg)
        && let Message::Summary(s) = &mut msg
    {
        s.errors.truncate(1);
    }
    node.push(&msg);
    let driver = node.driver.unwrap_or(crate::cluster::DRIVER_ID);
    let deadline = Instant::now() + BYE_TIMEOUT;
    loop {
        node.flush_outbox()?;
        node.poll(WAIT_TURN, None)?;
        for ev in std::mem::take(&mut node.rx.events) {
            if let Event::PeerLost { peer, reason, .. } = ev
                && peer == driver
            {
                return if node.outbox.is_empty() {
                    Ok(())
                } else {
                    Err(NodeError::Driver(format!(
                        "lost the driver before the summary was sent: {reason}"
                    )))
                };
            }
        }
        if node
            .rx
            .msgs
            .iter()
            .any(|m| m.0 == driver && matches!(m.1, Ok(Message::Bye)))
        {
            return Ok(());
        }
        node.rx.msgs.clear();
        if Instant::now() >= deadline {
            return Err(NodeError::Driver(format!(
                "no bye from the driver within {BYE_TIMEOUT:?}"
            )));
        }
    }
}
