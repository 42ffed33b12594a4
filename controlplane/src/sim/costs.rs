//! Where the simulated cluster's chained-request costs come from: the ground-truth α, β, γ
//! (the reference prototype's, or a `clasp calibrate` profile) and the *shape* in which they
//! land on threads.
//!
//! Why shapes: with the default shape the simulator charges costs in the form the load model
//! assumes (a constant α per local and β per remote chained request on the sender, γ per remote
//! destination), so the planner's model is right by construction up to queueing noise. The
//! other shapes are costs real transports have and the model does not capture, to measure what
//! that costs the planner:
//! - `per-batch`: a remote request costs a small copy into its batch, and every batch costs a
//!   fixed frame and syscall price, so the cost per request falls as the traffic between two
//!   workers grows (fewer workers → denser batches);
//! - `receiver-beta`: the executor's part of β is paid by the *receiving* worker's executor
//!   when it takes the request, not by the sender's;
//! - `fanin-gamma`: a connection's housekeeping grows with the fan-in of its destination
//!   (how many workers send to it), not a constant γ.

/// How the simulator charges chained-request costs (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CostShape {
    /// The load model's own form: α and β per request on the sender, γ per destination.
    #[default]
    Model,
    /// β's executor part split into a per-request copy and a per-batch price.
    PerBatch,
    /// β's executor part paid by the receiver.
    ReceiverBeta,
    /// γ per destination grows with the destination's fan-in.
    FaninGamma,
}

/// `per-batch`: a batch collects one destination's requests for this long (µs).
pub const PER_BATCH_WINDOW_US: f64 = 1_000.0;
/// `per-batch`: a request's copy into its batch, as a fraction of β's executor part.
pub const PER_BATCH_REQUEST_FRACTION: f64 = 0.2;
/// `per-batch`: a batch's price, as a multiple of β's executor part (a batch of two requests
/// costs what the model's two remote requests cost).
pub const PER_BATCH_FRAME_FACTOR: f64 = 1.6;
/// `fanin-gamma`: each sender beyond the first adds this fraction of γ to a connection.
pub const FANIN_GAMMA_SLOPE: f64 = 0.25;

impl CostShape {
    /// Every shape, the default first.
    pub const ALL: [CostShape; 4] = [
        CostShape::Model,
        CostShape::PerBatch,
        CostShape::ReceiverBeta,
        CostShape::FaninGamma,
    ];

    /// The shape's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CostShape::Model => "model",
            CostShape::PerBatch => "per-batch",
            CostShape::ReceiverBeta => "receiver-beta",
            CostShape::FaninGamma => "fanin-gamma",
        }
    }

    /// The shape named `s`, if any.
    pub fn parse(s: &str) -> Option<CostShape> {
        CostShape::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The sending executor's cost of one remote chained request whose batch to its destination
    /// was opened at `batch_opened_us` (`beta_exec_us`: β's executor part); returns the cost
    /// and whether this request opens a new batch.
    pub fn sender_remote_us(
        self,
        beta_exec_us: f64,
        now_us: f64,
        batch_opened_us: f64,
    ) -> (f64, bool) {
        match self {
            CostShape::Model | CostShape::FaninGamma => (beta_exec_us, false),
            CostShape::ReceiverBeta => (0.0, false),
            CostShape::PerBatch => {
                let copy = PER_BATCH_REQUEST_FRACTION * beta_exec_us;
                if now_us - batch_opened_us >= PER_BATCH_WINDOW_US {
                    (copy + PER_BATCH_FRAME_FACTOR * beta_exec_us, true)
                } else {
                    (copy, false)
                }
            }
        }
    }

    /// The receiving executor's extra cost of taking a request that came from another worker.
    pub fn receiver_remote_us(self, beta_exec_us: f64) -> f64 {
        match self {
            CostShape::ReceiverBeta => beta_exec_us,
            _ => 0.0,
        }
    }

    /// The factor on γ of a connection to a destination that `fan_in` workers send to.
    pub fn gamma_factor(self, fan_in: usize) -> f64 {
        match self {
            CostShape::FaninGamma => 1.0 + FANIN_GAMMA_SLOPE * fan_in.saturating_sub(1) as f64,
            _ => 1.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_charge_what_their_names_say() {
        for c in CostShape::ALL {
            assert_eq!(CostShape::parse(c.name()), Some(c));
        }
        let b = 100.0;
        assert_eq!(CostShape::Model.sender_remote_us(b, 0.0, 0.0), (b, false));
        assert_eq!(CostShape::Model.receiver_remote_us(b), 0.0);
        assert_eq!(
            CostShape::ReceiverBeta.sender_remote_us(b, 0.0, 0.0),
            (0.0, false)
        );
        assert_eq!(CostShape::ReceiverBeta.receiver_remote_us(b), b);
        // A request that opens a batch pays the frame; one inside the window only its copy.
        let (open, opened) = CostShape::PerBatch.sender_remote_us(b, 5_000.0, 0.0);
        assert!(opened && (open - 180.0).abs() < 1e-9);
        let (inside, opened) = CostShape::PerBatch.sender_remote_us(b, 5_000.0, 4_500.0);
        assert!(!opened && (inside - 20.0).abs() < 1e-9);
        assert_eq!(CostShape::FaninGamma.gamma_factor(1), 1.0);
        assert_eq!(CostShape::FaninGamma.gamma_factor(5), 2.0);
        assert_eq!(CostShape::Model.gamma_factor(5), 1.0);
    }
}
