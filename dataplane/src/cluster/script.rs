//! `--moves T:N,...`: migrations at chosen moments to an even placement on a chosen number of
//! workers. What a user benchmarks a migration with (how long 1→2 or 3→1 takes on their
//! machine, with how much state), and what the migration experiment runs — the policy's moves
//! depend on the load, a script's do not.

use super::control::{Controller, Move};
use crate::routing::Slots;
use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::ids::Epoch;
use clasp_protocol::routing::RoutingTable;

/// One scripted move: at `t_s` seconds after the first admission, go to `workers` workers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScriptedMove {
    pub t_s: f64,
    pub workers: usize,
}

/// Parses `T:N,T:N,...` (seconds ascending, each N in `1..=max_workers`).
pub fn parse_moves(text: &str, max_workers: usize) -> Result<Vec<ScriptedMove>, String> {
    let mut moves: Vec<ScriptedMove> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (t, n) = part
            .split_once(':')
            .ok_or_else(|| format!("`{part}`: expected SECONDS:WORKERS, e.g. 5:2"))?;
        let t_s: f64 = t
            .trim()
            .parse()
            .map_err(|_| format!("`{part}`: `{t}` is not a number of seconds"))?;
        let workers: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("`{part}`: `{n}` is not a worker count"))?;
        if !(t_s.is_finite() && t_s >= 0.0) {
            return Err(format!("`{part}`: the time must be 0 or more seconds"));
        }
        if workers == 0 || workers > max_workers {
            return Err(format!(
                "`{part}`: {workers} workers; the run has 1..={max_workers}"
            ));
        }
        if moves.last().is_some_and(|m| m.t_s >= t_s) {
            return Err(format!("`{part}`: times must ascend"));
        }
        moves.push(ScriptedMove { t_s, workers });
    }
    if moves.is_empty() {
        return Err("no moves given (expected SECONDS:WORKERS,...)".into());
    }
    Ok(moves)
}

/// Every operator's key groups in equal contiguous ranges over the executors of the first
/// `workers` workers (key group g of every operator on the same slot, as `Spread::Even`).
pub fn even_on(slots: &Slots, operators: usize, workers: usize) -> RoutingTable {
    assert!(
        (1..=slots.workers.len()).contains(&workers),
        "even_on: {workers} workers of {}",
        slots.workers.len()
    );
    let e = slots.executors;
    let count = workers * e;
    let kgs = KEY_GROUPS as usize;
    RoutingTable::from_fn(Epoch::INITIAL, operators, kgs, |_, g| {
        let i = g.index() * count / kgs;
        slots.slot(i / e, i % e)
    })
}

/// Makes the moves of a script at their times.
pub struct Scripted {
    slots: Slots,
    operators: usize,
    moves: Vec<ScriptedMove>,
    next: usize,
}

impl Scripted {
    /// The script `moves` (from [`parse_moves`]) over `slots`.
    pub fn new(moves: Vec<ScriptedMove>, slots: Slots, operators: usize) -> Self {
        Scripted {
            slots,
            operators,
            moves,
            next: 0,
        }
    }
}

impl Controller for Scripted {
    fn on_resumed(&mut self, t_s: f64, _admitted: u64) {
        while self.moves.get(self.next).is_some_and(|m| m.t_s <= t_s) {
            self.next += 1;
        }
    }

    fn on_recovered(&mut self, _t_s: f64, cut_s: f64) {
        // The restarted job runs the cut's table: the steps made after the cut are undone,
        // and the next poll makes the placement the script holds now.
        self.next = (self.moves.iter())
            .position(|m| m.t_s > cut_s)
            .unwrap_or(self.moves.len())
            .min(self.next);
    }

    fn poll(&mut self, t_s: f64, _admitted: u64) -> Option<Move> {
        // Of several steps due at once (after a recovery), only the last: the script is a
        // placement over time, not a list of migrations to replay.
        while (self.moves.get(self.next + 1)).is_some_and(|m| m.t_s <= t_s) {
            self.next += 1;
        }
        let m = *self.moves.get(self.next)?;
        if t_s < m.t_s {
            return None;
        }
        self.next += 1;
        Some(Move {
            routing: even_on(&self.slots, self.operators, m.workers),
            reason: format!("script: {} workers", m.workers),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::control::active_workers;

    fn slots() -> Slots {
        Slots {
            workers: vec![1, 2, 3],
            executors: 2,
        }
    }

    #[test]
    fn moves_parse_and_bad_ones_are_named() {
        let m = parse_moves("2:2, 4.5:3,6:1", 3).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[1],
            ScriptedMove {
                t_s: 4.5,
                workers: 3
            }
        );
        for bad in ["", "2", "x:2", "2:x", "2:0", "2:4", "3:2,2:1", "-1:2"] {
            assert!(parse_moves(bad, 3).is_err(), "{bad}");
        }
    }

    #[test]
    fn even_placements_use_exactly_the_first_workers() {
        for n in 1..=3 {
            let t = even_on(&slots(), 4, n);
            slots().check(&t, 4).unwrap();
            assert_eq!(active_workers(&t, &slots()), (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn moves_come_at_their_times_in_order() {
        let mut s = Scripted::new(parse_moves("1:2,2:1", 3).unwrap(), slots(), 4);
        assert!(s.poll(0.5, 0).is_none());
        let a = s.poll(1.2, 0).unwrap();
        assert_eq!(active_workers(&a.routing, &slots()).len(), 2);
        assert!(s.poll(1.5, 0).is_none());
        assert!(s.poll(2.0, 0).unwrap().reason.contains("1 workers"));
        assert!(s.poll(9.0, 0).is_none());
    }

    /// After a recovery the job runs the cut's table: the steps after the cut are made again,
    /// only the last of those due at once, and none that were already in the cut's table.
    #[test]
    fn a_recovery_makes_the_placement_of_now_again() {
        let mut s = Scripted::new(parse_moves("1:2,3:3", 3).unwrap(), slots(), 4);
        let reason = |m: Option<Move>| m.map(|m| m.reason);
        assert!(reason(s.poll(1.0, 0)).unwrap().contains("2 workers"));
        assert!(reason(s.poll(3.0, 0)).unwrap().contains("3 workers"));
        // Cut before both: one move, to the placement of now.
        s.on_recovered(3.5, 0.5);
        assert!(reason(s.poll(3.6, 0)).unwrap().contains("3 workers"));
        assert!(s.poll(3.7, 0).is_none());
        // Cut between them: the later one again.
        s.on_recovered(4.0, 2.0);
        assert!(reason(s.poll(4.1, 0)).unwrap().contains("3 workers"));
        // Cut after both: nothing to make again.
        s.on_recovered(5.0, 4.5);
        assert!(s.poll(5.1, 0).is_none());
    }
}
