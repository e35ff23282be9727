//! The run in flight, as a front end watches it: how far it is (steps done of steps expected)
//! and whether its user asked it to stop. Long loops advance the count and check for a stop:
//! the model between heads, the RTL every 8,192 cycles, `estimate` and `compare` per point and
//! per row. A front end reads the count from another thread (Python's callback or tqdm, which
//! polls while the GIL is released) and asks for a stop on an interrupt (Ctrl-C).
//!
//! One watch serves the process: a stop asks every run in flight to end, as Ctrl-C does.
//! Nothing here changes a result; a run that is not stopped is the same with or without it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::{bail, Result};

static STOP: AtomicBool = AtomicBool::new(false);
static DONE: AtomicU64 = AtomicU64::new(0);
static TOTAL: AtomicU64 = AtomicU64::new(0);

/// The message of a run that ended because it was asked to.
pub const STOPPED: &str = "interrupted: the run was stopped before it finished";

/// Starts watching a run: no stop asked, nothing done of nothing expected yet.
pub fn start() {
    STOP.store(false, Ordering::SeqCst);
    DONE.store(0, Ordering::Relaxed);
    TOTAL.store(0, Ordering::Relaxed);
}

/// Asks the runs in flight to stop at their next check.
pub fn stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked.
pub fn stopping() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// An error if a stop was asked: the check a long loop makes.
pub fn check() -> Result<()> {
    if stopping() {
        bail!(STOPPED);
    }
    Ok(())
}

/// `n` more steps are expected.
pub fn expect(n: u64) {
    TOTAL.fetch_add(n, Ordering::Relaxed);
}

/// `n` steps are done.
pub fn advance(n: u64) {
    DONE.fetch_add(n, Ordering::Relaxed);
}

/// (steps done, steps expected) so far.
pub fn progress() -> (u64, u64) {
    (DONE.load(Ordering::Relaxed), TOTAL.load(Ordering::Relaxed))
}
