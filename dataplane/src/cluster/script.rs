//! `--moves T:N,...`: migrations at chosen moments to an even placement on a chosen number of
//! workers. What a user benchmarks a migration with (how long 1→2 or 3→1 takes on their
//! machine, with how much state), and what the migration experiment runs — the policy's moves
//! depend on the load, a script's do not.

use super::control::{Controller, MigrationRecord, Move};
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

/// How a script's moves begin their reason.
const REASON: &str = "script:";

/// Makes the moves of a script at their times.
pub struct Scripted {
    slots: Slots,
    operators: usize,
    moves: Vec<ScriptedMove>,
    next: usize,
    /// The step whose move was made and has not completed.
    in_flight: Option<usize>,
    /// Steps whose moves completed, with when (s of the run's clock).
    done: Vec<(usize, f64)>,
    /// After a recovery: of the steps due at once, only the last is made (the script is a
    /// placement over time; replaying the steps between would only move state about).
    catch_up: bool,
}

impl Scripted {
    /// The script `moves` (from [`parse_moves`]) over `slots`.
    pub fn new(moves: Vec<ScriptedMove>, slots: Slots, operators: usize) -> Self {
        Scripted {
            slots,
            operators,
            moves,
            next: 0,
            in_flight: None,
            done: Vec::new(),
            catch_up: false,
        }
    }
}

impl Controller for Scripted {
    fn on_resumed(&mut self, t_s: f64, _admitted: u64) {
        while self.moves.get(self.next).is_some_and(|m| m.t_s <= t_s) {
            self.next += 1;
        }
        // The resumed table holds the last of those: a recovery to this cut or a later one
        // goes on after it.
        if let Some(last) = self.next.checked_sub(1) {
            self.done.push((last, t_s));
        }
    }

    fn on_migrated(&mut self, r: &MigrationRecord) {
        // A leave's migration is the driver's, not the script's.
        if r.reason.starts_with(REASON)
            && let Some(i) = self.in_flight.take()
        {
            self.done.push((i, r.t_s + r.planner_ms / 1e3));
        }
    }

    fn on_recovered(&mut self, _t_s: f64, cut_s: Option<f64>) {
        // The restarted job runs the cut's table, which holds the moves completed before the
        // cut and no other: the script goes on from the step after the last of those, and
        // its next poll makes the placement it holds now.
        self.in_flight = None;
        self.done.retain(|d| cut_s.is_some_and(|c| d.1 <= c));
        self.next = self.done.last().map_or(0, |d| d.0 + 1);
        self.catch_up = true;
    }

    fn poll(&mut self, t_s: f64, _admitted: u64) -> Option<Move> {
        if self.catch_up {
            while (self.moves.get(self.next + 1)).is_some_and(|m| m.t_s <= t_s) {
                self.next += 1;
            }
        }
        let m = *self.moves.get(self.next)?;
        if t_s < m.t_s {
            return None;
        }
        self.catch_up = false;
        self.in_flight = Some(self.next);
        self.next += 1;
        Some(Move {
            routing: even_on(&self.slots, self.operators, m.workers),
            reason: format!("{REASON} {} workers", m.workers),
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

    /// `moves` with every step made and completed 10 ms later at its time.
    fn all_made(moves: &str) -> Scripted {
        let mut s = Scripted::new(parse_moves(moves, 3).unwrap(), slots(), 4);
        for t_s in s.moves.iter().map(|m| m.t_s).collect::<Vec<_>>() {
            made(&mut s, t_s).unwrap();
        }
        s
    }

    /// Polls at `t_s`; a move made completes at once: its reason.
    fn made(s: &mut Scripted, t_s: f64) -> Option<String> {
        let m = s.poll(t_s, 0)?;
        s.on_migrated(&MigrationRecord {
            t_s,
            planner_ms: 10.0,
            reason: m.reason.clone(),
            ..MigrationRecord::default()
        });
        Some(m.reason)
    }

    /// After a recovery the job runs the cut's table: the steps whose moves completed after
    /// the cut, or never did, are made again — only the last of those due at once — and none
    /// whose move the cut's table holds.
    #[test]
    fn a_recovery_makes_the_placement_of_now_again() {
        // The initial table: one move, to the placement of now.
        let mut s = all_made("1:2,3:3");
        s.on_recovered(3.5, None);
        assert!(made(&mut s, 3.6).unwrap().contains("3 workers"));
        assert!(s.poll(3.7, 0).is_none());
        // A cut between the two moves' completions: only the later one again.
        let mut s = all_made("1:2,3:3");
        s.on_recovered(4.0, Some(2.0));
        assert!(
            s.poll(2.5, 0).is_none(),
            "the first move is in the cut's table"
        );
        assert!(made(&mut s, 4.1).unwrap().contains("3 workers"));
        // A cut after the last completed: nothing to make again.
        let mut s = all_made("1:2,3:3");
        s.on_recovered(5.0, Some(4.5));
        assert!(s.poll(5.1, 0).is_none());
        // A move made but not completed by the cut (held, or under way) is made again.
        let mut s = Scripted::new(parse_moves("1:2", 3).unwrap(), slots(), 4);
        assert!(s.poll(1.0, 0).is_some());
        s.on_recovered(2.0, Some(1.5));
        assert!(s.poll(2.1, 0).is_some());
        // A resumed run's table holds the steps before its cut: a recovery to that cut (or a
        // later one) does not make them again.
        let mut s = Scripted::new(parse_moves("1:2,3:3", 3).unwrap(), slots(), 4);
        s.on_resumed(2.5, 0);
        s.on_recovered(2.8, Some(2.5));
        assert!(s.poll(2.9, 0).is_none());
        assert!(made(&mut s, 3.0).unwrap().contains("3 workers"));
    }

    /// Without a recovery every step is made, also several due at once.
    #[test]
    fn steps_due_at_once_are_all_made_in_a_run_without_recovery() {
        let mut s = Scripted::new(parse_moves("1:2,2:3", 3).unwrap(), slots(), 4);
        assert!(s.poll(2.5, 0).unwrap().reason.contains("2 workers"));
        assert!(s.poll(2.6, 0).unwrap().reason.contains("3 workers"));
    }
}
