//! The progress display on stderr: a one-line bar (`--progress bar`) or a
//! live tree of the plan's operators (`--progress operators`), drawn only
//! when stderr is a terminal and the statement has run for a while, so
//! that quick statements, pipes and redirected output never see it.

use clap::ValueEnum;
use datafusion_tsjoin::progress::{ProgressHandle, ProgressSnapshot};
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// What `--progress` shows.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Nothing
    Off,
    /// A bar: percent, rows and bytes read, elapsed time, ETA
    #[default]
    Bar,
    /// The plan's operators, each with its state, rows, span and effective
    /// concurrency
    Operators,
}

/// How the display behaves (part of the CLI's `Options`).
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// What to draw.
    pub mode: Mode,
    /// Draw nothing for statements that finish sooner.
    pub after: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            mode: Mode::Bar,
            after: Duration::from_secs(1),
        }
    }
}

/// Redraws per second.
const TICK: Duration = Duration::from_millis(100);

/// Width of the bar in cells.
const BAR_WIDTH: usize = 30;

/// Shows `handle`'s progress on stderr until its stream ends or is dropped.
/// Draws nothing unless stderr is a terminal, the mode is not `off` and the
/// statement outlives `settings.after`. After a drawn run the final state
/// stays on screen (a query that ran for seconds leaves its summary).
pub async fn show(handle: ProgressHandle, settings: Settings) {
    if settings.mode == Mode::Off || !std::io::stderr().is_terminal() {
        return;
    }
    handle.wait_closed(settings.after).await;
    if handle.is_closed() {
        return;
    }
    // Clears what was drawn if the statement is cancelled (this future is
    // dropped) and leaves the cursor on a fresh line.
    let mut screen = Screen::default();
    loop {
        let closed = handle.is_closed();
        screen.draw(&handle.snapshot(), settings.mode);
        if closed {
            screen.finish();
            return;
        }
        handle.wait_closed(TICK).await;
    }
}

/// What is on the terminal now: the lines last drawn.
#[derive(Default)]
struct Screen {
    lines: usize,
    done: bool,
}

impl Screen {
    fn draw(&mut self, snapshot: &ProgressSnapshot, mode: Mode) {
        let text = match mode {
            Mode::Operators => format!(
                "{}\n{}",
                snapshot.bar_line(BAR_WIDTH),
                snapshot.operator_tree().trim_end()
            ),
            _ => snapshot.bar_line(BAR_WIDTH),
        };
        let mut err = std::io::stderr().lock();
        let mut out = String::new();
        // Back to the first line drawn, each line cleared as it is redrawn.
        out.push('\r');
        if self.lines > 1 {
            out.push_str(&format!("\x1b[{}A", self.lines - 1));
        }
        for (i, line) in text.lines().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str("\x1b[2K");
            out.push_str(line);
        }
        // Lines left over from a taller previous drawing.
        out.push_str("\x1b[J");
        let _ = err.write_all(out.as_bytes());
        let _ = err.flush();
        self.lines = text.lines().count();
    }

    fn finish(&mut self) {
        self.done = true;
        let _ = writeln!(std::io::stderr());
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if !self.done && self.lines > 0 {
            // Cancelled: end the bar's line so the error prints below it.
            let _ = writeln!(std::io::stderr());
        }
    }
}
