//! The `clasp ingress` process `clasp local` starts, as `clasp local` sees it: started in a
//! process group of its own (a terminal's Ctrl-C reaches only `clasp local`), told to stop when
//! `clasp local` is interrupted, watched for a failed exit, and killed by the cleanup registry
//! on an immediate exit. It is reaped only under its lock, so that cleanup never signals a
//! reaped (and perhaps reused) pid.

use crate::cleanup::{self, Registration};
use crate::signals;
use std::process::Child;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The exit status of an ingress that stopped because `clasp local` passed a SIGTERM on.
const INGRESS_STOPPED_STATUS: i32 = 128 + signal_hook::consts::SIGTERM;
/// How often the ingress's exit is polled while waiting for it.
const EXIT_POLL: Duration = Duration::from_millis(10);

/// The ingress process (once started), shared with the cleanup action that kills it.
#[derive(Clone, Default)]
pub struct IngressChild(Arc<Mutex<Option<Child>>>);

impl IngressChild {
    /// The started process.
    pub fn set(&self, child: Child) {
        *lock(self) = Some(child);
    }
}

/// The ingress child, even if a thread panicked while holding it.
fn lock(child: &IngressChild) -> MutexGuard<'_, Option<Child>> {
    child.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cleanup actions of a `clasp local` run: unlink its segment, kill its ingress.
pub fn register_cleanup(segment_name: &str, child: &IngressChild) -> [Registration; 2] {
    let shm_name = format!("/{segment_name}");
    let child = child.clone();
    [
        cleanup::register(move || {
            let _ = rustix::shm::unlink(shm_name.as_str());
        }),
        cleanup::register(move || {
            if let Some(c) = lock(&child).as_mut() {
                let _ = c.kill();
            }
        }),
    ]
}

/// Waits for the ingress to exit, holding the lock for one poll at a time (an immediate exit
/// must be able to kill it meanwhile).
pub fn reap(child: &IngressChild) {
    loop {
        match lock(child).as_mut().map(Child::try_wait) {
            Some(Ok(None)) => {}
            _ => return,
        }
        std::thread::sleep(EXIT_POLL);
    }
}

/// Asked every interval: passes a stop (SIGINT/SIGTERM) on to the ingress once, and says
/// whether the ingress failed (an exit status other than success, or than the stop's).
pub fn watch_ingress(child: &IngressChild, stop_sent: &mut bool) -> Option<String> {
    let mut guard = lock(child);
    let c = guard.as_mut()?;
    let status = c.try_wait();
    if !*stop_sent
        && matches!(status, Ok(None))
        && signals::interrupted().is_some()
        && let Some(pid) = rustix::process::Pid::from_raw(c.id() as i32)
    {
        *stop_sent = true;
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    match status {
        Ok(Some(st)) if st.success() => None,
        Ok(Some(st)) if *stop_sent && st.code() == Some(INGRESS_STOPPED_STATUS) => None,
        Ok(Some(st)) => Some(format!(
            "the ingress process (pid {}) exited with {st}",
            c.id()
        )),
        _ => None,
    }
}
