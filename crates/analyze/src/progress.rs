//! Progress shown on long work, on stderr when it is a terminal.

use std::io::IsTerminal;

/// Traces with at least this many events show a spinner while analysed.
pub const SPINNER_EVENTS: u64 = 5_000_000;

/// A spinner saying `message` (with the time spent), when stderr is a
/// terminal and the work is on at least [`SPINNER_EVENTS`] events; it
/// disappears when dropped.
pub fn spinner(message: &str, events: u64) -> Option<Spinner> {
    if events < SPINNER_EVENTS || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    pb.set_message(message.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(Spinner(pb))
}

/// A spinner on stderr, cleared when dropped.
#[derive(Debug)]
pub struct Spinner(indicatif::ProgressBar);

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
