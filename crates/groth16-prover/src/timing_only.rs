//! **TIMING ONLY** (feature `timing-only`): proving from witnesses that do not satisfy
//! the circuit, for benchmarks whose witness cannot be real (a synthetic witness of a
//! circuit too large to make a real one for, e.g. a 32 GiB PoRep partition).
//!
//! By default an unsatisfied witness is [`crate::ProverError::Unsatisfied`] and no proof
//! is made. A benchmark built with the `timing-only` feature may call
//! `skip_witness_check_for_timing_only`: from then on, for the whole process, the
//! check still runs (its time is measured as usual) but a failing row is counted
//! (`unsatisfied_proofs`) instead of refused, and the proof goes on. **Such proofs do not
//! verify.** Nothing turns this on but that call, and the call does not exist without the
//! feature, which no product crate enables (only benchmark examples, through their
//! dev-dependencies).

#[cfg(feature = "timing-only")]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[cfg(feature = "timing-only")]
static SKIP: AtomicBool = AtomicBool::new(false);
#[cfg(feature = "timing-only")]
static UNSATISFIED: AtomicU64 = AtomicU64::new(0);

/// **TIMING ONLY: every proof this process makes afterwards from an unsatisfied witness
/// is invalid.** Turns the witness check's refusal off for the rest of the process (it
/// cannot be turned back on) and says so on stderr.
#[cfg(feature = "timing-only")]
pub fn skip_witness_check_for_timing_only() {
    if !SKIP.swap(true, Ordering::SeqCst) {
        eprintln!(
            "groth16-prover: TIMING ONLY: the witness check no longer refuses unsatisfied \
             witnesses in this process; proofs from them do NOT verify"
        );
    }
}

/// Proofs made so far from a witness the check found unsatisfied (always 0 unless
/// [`skip_witness_check_for_timing_only`] was called).
#[cfg(feature = "timing-only")]
pub fn unsatisfied_proofs() -> u64 {
    UNSATISFIED.load(Ordering::Relaxed)
}

/// Whether an unsatisfied witness found by the check is let through (counted).
pub(crate) fn let_unsatisfied_through() -> bool {
    #[cfg(feature = "timing-only")]
    {
        if SKIP.load(Ordering::SeqCst) {
            UNSATISFIED.fetch_add(1, Ordering::Relaxed);
            return true;
        }
    }
    false
}
