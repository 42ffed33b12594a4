//! An ingress's input (the driver's or `clasp ingress`'s): the app's seeded generator, or a
//! source read record by record and keyed by the app's first operator
//! ([`clasp_operators::Operator::record_key`]).

use super::{Polled, SourceError, SourceFeed, SourceOffset, SourceReport, SourceSpec};
use clasp_operators::generate::Generator;
use clasp_operators::key::MAX_KEY_BYTES;
use clasp_operators::{AppSpec, OperatorInstance};
use std::sync::Arc;

/// What [`Input::next_into`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Record `i` is in the key and payload buffers.
    Record,
    /// A source has nothing read yet.
    Pending,
    /// A source has no more records.
    End,
}

/// Where the records come from.
pub enum Input {
    /// Record `i` is generated from the seed (or replayed from records generated before).
    Generated(Arc<dyn Generator>),
    /// Records are read; the first operator keys them.
    Read {
        feed: Box<SourceFeed>,
        first: Box<dyn OperatorInstance>,
    },
}

impl Input {
    /// Opens the input `source` names for `spec`.
    pub fn open(spec: &AppSpec, source: &SourceSpec, seed: u64) -> Result<Input, SourceError> {
        if source.is_generator() {
            let generator = clasp_operators::generate::generator(&spec.generator, seed)
                .ok_or_else(|| SourceError::NoGenerator {
                    app: spec.name.clone(),
                    generator: spec.generator.clone(),
                })?;
            return Ok(Input::Generated(generator.into()));
        }
        Ok(Input::Read {
            feed: Box::new(SourceFeed::open(source)?),
            first: spec.instantiate(spec.source),
        })
    }

    /// The records of `generator` instead of the app's: a benchmark's input generated before
    /// the timed run ([`clasp_operators::generate::Pregenerated`]).
    pub fn of_generator(generator: Arc<dyn Generator>) -> Input {
        Input::Generated(generator)
    }

    /// Writes record `i` (the `i`-th admitted) into `key` and `payload`, if there is one.
    pub fn next_into(
        &mut self,
        i: u64,
        key: &mut Vec<u8>,
        payload: &mut Vec<u8>,
    ) -> Result<Next, SourceError> {
        match self {
            Input::Generated(generator) => {
                generator.record_into(i, key, payload);
                Ok(Next::Record)
            }
            Input::Read { feed, first } => match feed.poll()? {
                Polled::Record(r) => {
                    payload.clear();
                    payload.extend_from_slice(r);
                    first.record_key(i, r, key);
                    if key.len() > MAX_KEY_BYTES {
                        // Too long to route by: the first operator sees the record anyway.
                        key.clear();
                        key.extend_from_slice(&clasp_operators::key::encode_u64(i));
                    }
                    Ok(Next::Record)
                }
                Polled::Pending => Ok(Next::Pending),
                Polled::End => Ok(Next::End),
            },
        }
    }

    /// Moves past the first `n` records (a run restarted from a checkpoint resumes with record
    /// `n`): a generator needs nothing, a replayable source reads and drops them, so its offset
    /// and its counts of bad data are those of one uninterrupted run.
    pub fn skip(&mut self, n: u64) -> Result<(), SourceError> {
        let Input::Read { feed, .. } = self else {
            return Ok(());
        };
        let mut skipped = 0;
        while skipped < n {
            match feed.poll()? {
                Polled::Record(_) => {
                    feed.admitted();
                    skipped += 1;
                }
                Polled::Pending => std::thread::sleep(std::time::Duration::from_millis(1)),
                Polled::End => break,
            }
        }
        Ok(())
    }

    /// After [`Input::skip`] of `admitted` records: an error unless the input stands where the
    /// checkpoint that admitted them did (`at`). A file source is replayed by counting records,
    /// so a file of a `dir:` before the checkpoint's that changed since (grew, or was added or
    /// removed) would shift every record after it: the replay would run other records than
    /// the run did, and seem to succeed.
    pub fn check_replayed(&self, admitted: u64, at: &SourceOffset) -> Result<(), SourceError> {
        let Some(want) = &at.file else {
            return Ok(());
        };
        let report = self.report(admitted);
        if report
            .offset
            .file
            .as_ref()
            .is_some_and(|at| at.same_place(want))
        {
            return Ok(());
        }
        let reached = match &report.offset.file {
            Some(p) => format!("byte {} of {}", p.byte_offset, p.path),
            None => "no record".to_owned(),
        };
        Err(SourceError::Replay {
            source_name: report.source,
            reason: format!(
                "replaying the checkpoint's {admitted} records reached {reached}, but the \
                 checkpoint stood at byte {} of {}: the input before that point changed since \
                 the run read it (a file grew, shrank or was added or removed before it, or \
                 its last line was completed after it), so it is not the input the run read",
                want.byte_offset, want.path
            ),
        })
    }

    /// The record last written by [`Input::next_into`] was admitted.
    pub fn admitted(&mut self) {
        if let Input::Read { feed, .. } = self {
            feed.admitted();
        }
    }

    /// The input's offset after `admitted` records (a generator resumes at record
    /// `admitted`).
    pub fn report(&self, admitted: u64) -> SourceReport {
        match self {
            Input::Generated(_) => SourceReport {
                source: SourceSpec::Generator.to_string(),
                offset: SourceOffset {
                    records: admitted,
                    file: None,
                },
                malformed: Default::default(),
            },
            Input::Read { feed, .. } => feed.report(),
        }
    }
}
