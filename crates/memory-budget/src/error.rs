//! The crate's one error type.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong in this crate. Messages are lowercase and name the sizes,
/// paths or text involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// The request can never fit: it is larger than the whole budget.
    #[error("request of {requested_bytes} bytes can never fit in a budget of {total_bytes} bytes")]
    TooLarge {
        /// Bytes asked for.
        requested_bytes: u64,
        /// The budget's total.
        total_bytes: u64,
    },
    /// A non-blocking request did not fit now (or would jump the queue).
    #[error("request of {requested_bytes} bytes would block: {available_bytes} bytes available now, {n_waiting} requests waiting")]
    WouldBlock {
        /// Bytes asked for.
        requested_bytes: u64,
        /// Bytes that could be granted right now.
        available_bytes: u64,
        /// Requests queued ahead (of equal or higher priority).
        n_waiting: usize,
    },
    /// A blocking request was not admitted before its timeout.
    #[error("request of {requested_bytes} bytes timed out after {waited:?}: {available_bytes} bytes available")]
    Timeout {
        /// Bytes asked for.
        requested_bytes: u64,
        /// How long it waited.
        waited: Duration,
        /// Bytes available when it gave up.
        available_bytes: u64,
    },
    /// Two reservations from different budgets cannot be merged.
    #[error("cannot merge reservations from different budgets ({left} and {right})")]
    ForeignReservation {
        /// Name of the receiving reservation's budget.
        left: String,
        /// Name of the other reservation's budget.
        right: String,
    },
    /// A size string could not be parsed.
    #[error("invalid size {text:?}: {reason}")]
    InvalidSize {
        /// The offending text.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A budget of zero bytes was asked for or computed.
    #[error("budget of 0 bytes from {what}")]
    ZeroBudget {
        /// Where the zero came from (the spec text or the computation).
        what: String,
    },
    /// The safety margin leaves nothing of the limit.
    #[error("safety margin of {margin_bytes} bytes is not smaller than the limit of {limit_bytes} bytes")]
    MarginTooLarge {
        /// The margin.
        margin_bytes: u64,
        /// The detected limit.
        limit_bytes: u64,
    },
    /// An explicit budget larger than what the limit allows.
    #[error("budget of {budget_bytes} bytes exceeds the limit of {limit_bytes} bytes minus the safety margin of {margin_bytes} bytes")]
    BudgetExceedsLimit {
        /// The requested budget.
        budget_bytes: u64,
        /// The detected limit.
        limit_bytes: u64,
        /// The safety margin.
        margin_bytes: u64,
    },
    /// No source under the root bounded memory (nothing readable).
    #[error("no memory limit found under {root}: {details}")]
    NoLimitFound {
        /// The root directory searched.
        root: PathBuf,
        /// Why each source was skipped.
        details: String,
    },
    /// A kernel file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A kernel file was read but its content made no sense.
    #[error("malformed {path}: {reason} (found {found:?})")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was expected.
        reason: &'static str,
        /// The offending text.
        found: String,
    },
}
