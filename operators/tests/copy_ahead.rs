//! Key groups copied ahead of a move, then only their changes moved: the receiver ends with
//! exactly the state the sender would have moved whole, for every operator of every app.

use clasp_operators::key::{KEY_GROUPS, key_hash};
use clasp_operators::{Emitter, OperatorInstance, apps, oracle};
use proptest::prelude::*;

/// Runs `reqs` through `inst`.
fn run(inst: &mut dyn OperatorInstance, reqs: &[(Vec<u8>, Vec<u8>)]) {
    let mut out = Emitter::new();
    for (k, p) in reqs {
        let _ = inst.process(key_hash(k), k, p, &mut out);
        out.clear();
    }
}

/// Half the input, every group copied ahead (and its changes recorded), the other half — in
/// `refreshes + 1` pieces, every copy refreshed after each but the last — then each group's
/// changes; `end` ends the stream on the sender before the move.
fn moved_by_changes(name: &str, end: bool, refreshes: usize) {
    let spec = apps::builtin(name).unwrap();
    let inputs = oracle::capture_inputs(&spec, 600, 5, usize::MAX);
    let (mut refreshed, mut stateful) = (0, false);
    for (op, reqs) in inputs.iter().enumerate() {
        let (first, second) = reqs.split_at(reqs.len() / 2);
        let mut a = spec.instantiate(op);
        a.track_output_seq();
        run(a.as_mut(), first);
        stateful |= a.state_keys() > 0;
        let mut b = spec.instantiate(op);
        for kg in 0..KEY_GROUPS {
            a.track_changes(kg);
            b.stage_group(kg, &a.copy_group(kg)).unwrap();
        }
        assert_eq!(b.state_keys(), 0, "{name}/{op}: a staged copy is not live");
        let pieces: Vec<_> = second.chunks(second.len() / (refreshes + 1) + 1).collect();
        for (i, piece) in pieces.iter().enumerate() {
            run(a.as_mut(), piece);
            if i + 1 == pieces.len() {
                break;
            }
            for kg in 0..KEY_GROUPS {
                if let Some(changes) = a.refresh_copy(kg) {
                    refreshed += 1;
                    b.stage_group(kg, &changes)
                        .unwrap_or_else(|e| panic!("{name}/{op}: refresh of {kg}: {e}"));
                    assert!(a.refresh_copy(kg).is_none(), "{name}/{op}: recorded afresh");
                }
            }
        }
        if end {
            let mut out = Emitter::new();
            a.end_of_stream(&mut out);
        }
        let want = a.state_digest();
        let keys = a.state_keys();
        let mut whole = 0;
        for kg in 0..KEY_GROUPS {
            let changes = a.export_changes(kg);
            // A whole group is an archive, or no bytes when it is empty.
            if changes.is_empty() || changes.starts_with(b"CLGA") {
                whole += 1;
            }
            b.import_group(kg, &changes)
                .unwrap_or_else(|e| panic!("{name}/{op}: key group {kg}: {e}"));
        }
        assert_eq!(
            a.state_keys(),
            0,
            "{name}/{op}: the sender gave everything up"
        );
        assert_eq!(b.state_keys(), keys, "{name}/{op}");
        assert_eq!(
            b.state_digest(),
            want,
            "{name}/{op}: the changes rebuild the state"
        );
        if end {
            assert_eq!(
                whole, KEY_GROUPS,
                "{name}/{op}: after the end, groups move whole"
            );
        } else {
            assert_eq!(whole, 0, "{name}/{op}: recorded changes move as changes");
        }
    }
    if refreshes > 0 && !end && stateful {
        assert!(refreshed > 0, "{name}: some copy was refreshed");
    }
}

#[test]
fn changes_after_a_copy_rebuild_every_apps_state() {
    for name in apps::builtin_names() {
        moved_by_changes(name, false, 0);
    }
}

#[test]
fn copies_refreshed_before_the_move_rebuild_every_apps_state() {
    for name in apps::builtin_names() {
        moved_by_changes(name, false, 3);
    }
}

#[test]
fn after_the_end_of_the_stream_groups_move_whole_over_their_copies() {
    for name in apps::builtin_names() {
        moved_by_changes(name, true, 1);
    }
}

#[test]
fn changes_without_a_copy_or_for_an_untracked_group_are_refused_or_whole() {
    let spec = apps::builtin("wc").unwrap();
    let count = spec.operators.len() - 1;
    let inputs = oracle::capture_inputs(&spec, 300, 5, usize::MAX);
    let mut a = spec.instantiate(count);
    run(a.as_mut(), &inputs[count]);
    let kg = (0..KEY_GROUPS)
        .max_by_key(|&kg| a.copy_group(kg).len())
        .unwrap();
    a.track_changes(kg);
    let changes = a.export_changes(kg);
    assert!(changes.starts_with(b"CLGC"));
    let mut b = spec.instantiate(count);
    let err = b.import_group(kg, &changes).unwrap_err().to_string();
    assert!(err.contains("not copied here ahead"), "{err}");
    // A copy must be a whole group, and a dropped copy is gone.
    assert!(b.stage_group(kg, &changes).is_err());
    let mut c = spec.instantiate(count);
    run(c.as_mut(), &inputs[count]);
    b.stage_group(kg, &c.copy_group(kg)).unwrap();
    b.drop_staged(kg);
    assert!(b.import_group(kg, &changes).is_err());
    // Untracked, a group's changes are the whole group, and there is nothing to refresh.
    c.track_changes(kg);
    c.untrack(kg);
    assert!(c.refresh_copy(kg).is_none());
    assert!(c.export_changes(kg).starts_with(b"CLGA"));
}

/// WC's count after 300 records with its fullest key group copied ahead halfway: the sender
/// (its changes recorded since the copy), the key group, and a receiver with the copy staged.
fn copied_halfway() -> (Box<dyn OperatorInstance>, u16, Box<dyn OperatorInstance>) {
    let spec = apps::builtin("wc").unwrap();
    let count = spec.operators.len() - 1;
    let inputs = oracle::capture_inputs(&spec, 300, 5, usize::MAX);
    let (first, second) = inputs[count].split_at(inputs[count].len() / 2);
    let mut a = spec.instantiate(count);
    run(a.as_mut(), first);
    let kg = (0..KEY_GROUPS)
        .max_by_key(|&kg| a.copy_group(kg).len())
        .unwrap();
    a.track_changes(kg);
    let mut b = spec.instantiate(count);
    b.stage_group(kg, &a.copy_group(kg)).unwrap();
    run(a.as_mut(), second);
    (a, kg, b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// A peer's changes with one byte changed, applied over a staged copy: an error or a
    /// state, never a panic.
    #[test]
    fn changes_with_one_byte_changed_never_panic(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let (mut a, kg, mut b) = copied_halfway();
        let mut changes = a.export_changes(kg);
        let i = at.index(changes.len());
        changes[i] = byte;
        let _ = b.import_group(kg, &changes);
    }

    /// A refresh of a staged copy with one byte changed: an error or a staged state, never a
    /// panic.
    #[test]
    fn refreshes_with_one_byte_changed_never_panic(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let (mut a, kg, mut b) = copied_halfway();
        let Some(mut refresh) = a.refresh_copy(kg) else {
            return Ok(());
        };
        let i = at.index(refresh.len());
        refresh[i] = byte;
        let _ = b.stage_group(kg, &refresh);
        let _ = b.import_group(kg, &a.export_changes(kg));
    }
}
