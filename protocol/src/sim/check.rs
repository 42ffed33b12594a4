//! The end-of-run checker: the input is complete along every path, every key group's state is
//! on exactly one worker, every migration finished and every worker resumed, nothing is left
//! queued, and with a kill the planner named exactly the killed worker.

use std::collections::BTreeMap;

use super::{PATH_BITS, Sim, Store, key_group};
use crate::ids::KeyGroup;

impl Sim<'_> {
    pub(super) fn check(&mut self) -> Result<(), String> {
        self.out.end_ns = self.now;
        if let Some(victim) = self.out.killed {
            let Some(f) = &self.out.failure else {
                return Err(format!(
                    "worker {victim} was killed but no migration failed"
                ));
            };
            if f.silent != vec![victim] {
                return Err(format!("worker {victim} was killed, but: {f}"));
            }
            return Ok(());
        }
        if let Some(f) = &self.out.failure {
            return Err(format!("no worker was killed, but: {f}"));
        }
        if self.out.migrations.len() != self.migrations_started {
            return Err(format!(
                "{} migrations started, {} finished",
                self.migrations_started,
                self.out.migrations.len()
            ));
        }
        for (w, n) in self.nodes.iter().enumerate() {
            if n.sm.in_migration() || n.sm.paused() {
                return Err(format!("worker {w} never completed its migration"));
            }
            if !n.queue.is_empty() || n.busy {
                return Err(format!("worker {w} has {} requests left", n.queue.len()));
            }
        }
        // Every key group's state on one worker; every key complete along every path.
        let mut state: BTreeMap<(usize, KeyGroup), &Store> = BTreeMap::new();
        for (w, n) in self.nodes.iter().enumerate() {
            for (k, s) in &n.store {
                if state.insert(*k, s).is_some() {
                    return Err(format!("state of {k:?} on two workers (one is {w})"));
                }
            }
        }
        let mut paths: Vec<(usize, u64)> =
            self.sources.iter().map(|&s| (s, s as u64 + 1)).collect();
        let mut i = 0;
        while i < paths.len() {
            let (o, p) = paths[i];
            for &s in &self.succs[o] {
                paths.push((s, (p << PATH_BITS) | (s as u64 + 1)));
            }
            i += 1;
        }
        for (o, path) in paths {
            for (key, &n) in self.emitted.iter().enumerate() {
                if n == 0 {
                    continue;
                }
                let key = key as u32;
                let g = key_group(key, o, self.cfg.key_groups);
                let last = state
                    .get(&(o, g))
                    .and_then(|s| s.get(&(path, key)))
                    .copied()
                    .unwrap_or(0);
                if last != n {
                    return Err(format!(
                        "operator {o} path {path:#x} key {key}: last number {last} of {n} emitted"
                    ));
                }
            }
        }
        Ok(())
    }
}
