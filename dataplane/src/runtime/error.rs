//! What can stop a worker's runtime from starting or finishing.

/// A fault of the runtime itself (faults of a run that keeps going are collected as text in
/// its report instead).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The worker's shared-memory segment could not be made.
    #[error(transparent)]
    Layout(#[from] super::layout::LayoutError),
    /// A ring of the segment could not be opened.
    #[error("executor {executor}: its {what} ring: {source}")]
    Ring {
        /// The executor the ring belongs to.
        executor: usize,
        /// Which of its rings.
        what: &'static str,
        /// Why.
        #[source]
        source: clasp_shmring::Error,
    },
    /// Where the executors sit does not fit the segment or the routing table.
    #[error("{0}")]
    Seat(String),
    /// An executor thread could not be started.
    #[error("starting executor {executor}: {source}")]
    Spawn {
        /// The executor.
        executor: usize,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An executor thread panicked (its state is lost).
    #[error("executor {0} panicked")]
    Panicked(usize),
    /// Key groups restored from a checkpoint could not be imported.
    #[error("restoring from a checkpoint: {0}")]
    Restore(String),
    /// The sink could not be opened.
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
}
