//! A simulated worker's inbound requests: one FIFO per operator, served oldest-first across
//! operators, with an optional cap on how many of the worker's executors run one operator at
//! once (the decision's parallelism `P_{o,w}`).
//!
//! Why per-operator FIFOs rather than one queue: with a cap, the oldest request may belong to an
//! operator already at its cap while a younger one of another operator could start; scanning a
//! single queue for it costs its length per start, a head per operator costs the operator count.
//! Without caps the oldest head across operators is exactly the single queue's front (entries
//! carry their arrival sequence), so runs without parallelism reproduce the single FIFO.

use std::collections::VecDeque;

/// No cap: any number of executors may run the operator.
const UNCAPPED: usize = usize::MAX;

/// The inbound requests of one worker; `T` is the request.
#[derive(Clone, Debug)]
pub struct Inbox<T> {
    /// Per operator: (arrival sequence, request), oldest first.
    fifos: Vec<VecDeque<(u64, T)>>,
    /// Per operator: executors running it now.
    running: Vec<usize>,
    /// Per operator: the most executors that may run it at once.
    limits: Vec<usize>,
    next_seq: u64,
    len: usize,
}

impl<T> Inbox<T> {
    /// An empty inbox for `operators` operators, uncapped.
    pub fn new(operators: usize) -> Self {
        Inbox {
            fifos: (0..operators).map(|_| VecDeque::new()).collect(),
            running: vec![0; operators],
            limits: vec![UNCAPPED; operators],
            next_seq: 0,
            len: 0,
        }
    }

    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Queues `req` of operator `op` behind everything already queued.
    pub fn push(&mut self, op: usize, req: T) {
        self.fifos[op].push_back((self.next_seq, req));
        self.next_seq += 1;
        self.len += 1;
    }

    /// Takes the oldest request whose operator is below its cap and counts it as running;
    /// `None` when every waiting request's operator is at its cap (or nothing waits).
    pub fn start_next(&mut self) -> Option<(usize, T)> {
        let op = (0..self.fifos.len())
            .filter(|&o| self.running[o] < self.limits[o])
            .filter_map(|o| self.fifos[o].front().map(|&(seq, _)| (seq, o)))
            .min()
            .map(|(_, o)| o)?;
        let (_, req) = self.fifos[op].pop_front().expect("a head was found");
        self.len -= 1;
        self.running[op] += 1;
        Some((op, req))
    }

    /// An executor finished a request of `op` that [`Inbox::start_next`] gave it.
    pub fn finished(&mut self, op: usize) {
        debug_assert!(self.running[op] > 0, "finished more than started");
        self.running[op] = self.running[op].saturating_sub(1);
    }

    /// Caps operator o at `limits[o]` executors (at least 1, so nothing waits forever); `None`
    /// removes every cap. Requests already running keep running.
    pub fn set_limits(&mut self, limits: Option<&[usize]>) {
        for (o, l) in self.limits.iter_mut().enumerate() {
            *l = limits.map_or(UNCAPPED, |ls| ls.get(o).copied().unwrap_or(UNCAPPED).max(1));
        }
    }

    /// True when some operator is capped.
    pub fn capped(&self) -> bool {
        self.limits.iter().any(|&l| l != UNCAPPED)
    }

    /// Keeps the requests `keep` accepts (in order) and returns the others, oldest first.
    pub fn retain_or_take(&mut self, mut keep: impl FnMut(usize, &T) -> bool) -> Vec<T> {
        let mut all: Vec<(u64, usize, T)> = Vec::with_capacity(self.len);
        for (o, f) in self.fifos.iter_mut().enumerate() {
            all.extend(f.drain(..).map(|(seq, r)| (seq, o, r)));
        }
        all.sort_by_key(|x| x.0);
        let mut taken = Vec::new();
        for (seq, o, r) in all {
            if keep(o, &r) {
                self.fifos[o].push_back((seq, r));
            } else {
                taken.push(r);
            }
        }
        self.len = self.fifos.iter().map(VecDeque::len).sum();
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncapped_is_one_fifo() {
        let mut q = Inbox::new(3);
        for (i, op) in [2, 0, 1, 0, 2].into_iter().enumerate() {
            q.push(op, i);
        }
        let order: Vec<usize> = std::iter::from_fn(|| q.start_next().map(|x| x.1)).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_cap_bounds_concurrent_starts_per_operator() {
        let mut q = Inbox::new(2);
        for i in 0..4 {
            q.push(0, i);
        }
        q.push(1, 10);
        q.set_limits(Some(&[1, 0]));
        assert_eq!(q.start_next(), Some((0, 0)));
        // Operator 0 is at its cap: the younger request of operator 1 starts instead.
        assert_eq!(q.start_next(), Some((1, 10)));
        // A cap of 0 counts as 1: operator 1 is at it now, operator 0 too.
        assert_eq!(q.start_next(), None);
        q.finished(0);
        assert_eq!(q.start_next(), Some((0, 1)));
        assert_eq!(q.len(), 2);
        q.set_limits(None);
        assert_eq!(q.start_next(), Some((0, 2)));
    }

    #[test]
    fn retain_keeps_order_and_returns_the_rest() {
        let mut q = Inbox::new(2);
        for (i, op) in [0, 1, 0, 1].into_iter().enumerate() {
            q.push(op, i);
        }
        let taken = q.retain_or_take(|_, &r| r % 2 == 0);
        assert_eq!(taken, vec![1, 3]);
        assert_eq!(q.len(), 2);
        assert_eq!(q.start_next(), Some((0, 0)));
        assert_eq!(q.start_next(), Some((0, 2)));
    }
}
