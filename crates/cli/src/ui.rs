//! What people see: progress on stderr (indicatif spinners on a terminal, plain log lines
//! otherwise), byte and time formatting.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// One long step (setup, SRS load, PCE extraction, proving).
pub struct Stage {
    name: String,
    start: Instant,
    bar: Option<ProgressBar>,
}

/// Whether stderr gets spinners (a terminal) or log lines.
fn fancy() -> bool {
    std::io::stderr().is_terminal()
}

impl Stage {
    /// Starts a step and shows it.
    pub fn start(name: impl Into<String>) -> Stage {
        let name = name.into();
        let bar = if fancy() {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
                bar.set_style(style);
            }
            bar.set_message(name.clone());
            bar.enable_steady_tick(Duration::from_millis(100));
            Some(bar)
        } else {
            eprintln!("pinion: {name} ...");
            None
        };
        Stage {
            name,
            start: Instant::now(),
            bar,
        }
    }

    /// Ends the step; returns how long it took.
    pub fn finish(self) -> Duration {
        let took = self.start.elapsed();
        let line = format!("{} done in {}", self.name, secs(took));
        if let Some(bar) = &self.bar {
            // Replace the spinner by a plain line, so finished steps stay as a log.
            bar.finish_and_clear();
        }
        eprintln!("pinion: {line}");
        took
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        // A step abandoned by an error: clear the spinner so the error line stands alone.
        if let Some(bar) = &self.bar {
            if !bar.is_finished() {
                bar.finish_and_clear();
            }
        }
    }
}

/// A log line on stderr (progress information, never results).
pub fn note(line: impl AsRef<str>) {
    eprintln!("pinion: {}", line.as_ref());
}

/// Seconds with millisecond precision.
pub fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// Bytes in binary units, with the exact count.
pub fn bytes(n: u64) -> String {
    if n < 1024 {
        return format!("{n} bytes");
    }
    format!("{} = {n} bytes", memory_budget::format_bytes(n))
}

/// The error line: the top message, then each cause not already contained in the text
/// before it (thiserror messages often embed their source), joined by ": ".
pub fn error_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}
