//! The interactive shell: statements end with `;`, `\q` quits, history is
//! kept in `~/.tsjoin_history`.

use crate::{Format, run_sql};
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

/// Reads statements until `\q` or end of input.
pub async fn run(ctx: &SessionContext, format: Format, timing: bool) -> Result<()> {
    let mut editor = DefaultEditor::new()
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    let history = std::env::var_os("HOME")
        .map(|h| std::path::PathBuf::from(h).join(".tsjoin_history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    println!(
        "tsjoin-cli {}: end statements with ';', \\q to quit",
        env!("CARGO_PKG_VERSION")
    );
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() {
            "tsjoin> "
        } else {
            "   ...> "
        };
        match editor.readline(prompt) {
            Ok(line) => {
                let trimmed = line.trim();
                if buffer.is_empty()
                    && (trimmed == "\\q" || trimmed == "quit" || trimmed == "exit")
                {
                    break;
                }
                buffer.push_str(&line);
                buffer.push('\n');
                if trimmed.ends_with(';') {
                    let sql = std::mem::take(&mut buffer);
                    let _ = editor.add_history_entry(sql.trim());
                    if let Err(e) = run_sql(ctx, &sql, format, timing).await {
                        eprintln!("Error: {}", e.to_string().replace('\n', " "));
                    }
                }
            }
            Err(ReadlineError::Interrupted) => buffer.clear(),
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                return Err(datafusion::error::DataFusionError::External(Box::new(e)));
            }
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(())
}
