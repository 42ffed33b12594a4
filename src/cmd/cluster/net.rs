//! The transport settings a worker and a driver must agree on, as command-line options:
//! `clasp worker` takes them, and `clasp run` passes its own on to the workers it starts.

use crate::cmd::usage_error;
use clap::Args;
use clasp_dataplane::transport::{
    DEFAULT_BATCH_AGE_MAX_US, DEFAULT_BATCH_BYTES_MAX, DEFAULT_DATA_CREDIT_BYTES,
    DEFAULT_SEND_BYTES_MAX, Limits, TransportError,
};

/// A transport setting's complaint in the command line's terms: the options that set the
/// fields it names, the rest as what they are.
fn in_flag_terms(why: &str) -> String {
    [
        ("batch_bytes_max", "--batch-bytes"),
        ("send_bytes_max", "--send-bytes"),
        ("data_credit_bytes", "--data-credit-bytes"),
        ("frame_bytes_max", "the largest transport frame"),
    ]
    .iter()
    .fold(why.to_string(), |s, (field, flag)| s.replace(field, flag))
}

/// Transport settings shared by `worker` and `run`.
#[derive(Args, Debug, Clone)]
pub struct NetArgs {
    /// Flush a batch at this many bytes.
    #[arg(long, default_value_t = DEFAULT_BATCH_BYTES_MAX)]
    batch_bytes: usize,
    /// ... or when its first request is this old (µs).
    #[arg(long, default_value_t = DEFAULT_BATCH_AGE_MAX_US)]
    batch_age_us: u64,
    /// Data credit granted to each sender (bytes in flight).
    #[arg(long, default_value_t = DEFAULT_DATA_CREDIT_BYTES)]
    data_credit_bytes: u32,
    /// Most bytes of batches one send carries: batches that fill while a send is in flight
    /// go out together in the next, up to this (--batch-bytes or less: one batch a send).
    #[arg(long, default_value_t = DEFAULT_SEND_BYTES_MAX)]
    send_bytes: usize,
}

impl NetArgs {
    /// The transport's limits; out-of-range settings are a usage error.
    pub fn limits(&self) -> anyhow::Result<Limits> {
        let l = Limits {
            batch_bytes_max: self.batch_bytes,
            batch_age_max_us: self.batch_age_us,
            data_credit_bytes: self.data_credit_bytes,
            send_bytes_max: self.send_bytes,
            ..Limits::default()
        };
        l.validate().map_err(|e| match e {
            TransportError::Config(why) => usage_error(in_flag_terms(&why)),
            e => usage_error(e.to_string()),
        })?;
        Ok(l)
    }

    /// The same settings as `clasp worker` arguments.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--batch-bytes".into(),
            self.batch_bytes.to_string(),
            "--batch-age-us".into(),
            self.batch_age_us.to_string(),
            "--data-credit-bytes".into(),
            self.data_credit_bytes.to_string(),
            "--send-bytes".into(),
            self.send_bytes.to_string(),
        ]
    }
}
