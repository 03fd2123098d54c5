//! The interactive shell: statements end with `;`; backslash commands
//! ([`crate::meta`]) list and describe tables and change the output; history
//! is kept in `~/.tsjoin_history` when reading from a terminal.

use crate::meta::{self, Meta};
use crate::{Options, run_sql};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use std::io::IsTerminal;

/// Reads statements until `\q` or end of input. Input that is not a
/// terminal (a pipe, a file) is read the same way, without the banner or
/// history.
pub async fn run(ctx: &SessionContext, mut options: Options) -> Result<()> {
    let mut editor =
        DefaultEditor::new().map_err(|e| DataFusionError::External(Box::new(e)))?;
    let interactive = std::io::stdin().is_terminal();
    let history = std::env::var_os("HOME")
        .filter(|_| interactive)
        .map(|h| std::path::PathBuf::from(h).join(".tsjoin_history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    if interactive {
        println!(
            "tsjoin-cli {}: end statements with ';', \\? for help, \\q to quit",
            env!("CARGO_PKG_VERSION")
        );
    }
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() {
            "tsjoin> "
        } else {
            "   ...> "
        };
        match editor.readline(prompt) {
            Ok(line) => {
                if buffer.is_empty()
                    && let Some(command) = meta::parse(&line)
                {
                    let _ = editor.add_history_entry(line.trim());
                    match command {
                        Ok(Meta::Quit) => break,
                        Ok(command) => {
                            if let Err(e) = run_meta(ctx, command, &mut options).await {
                                report(&e.to_string());
                            }
                        }
                        Err(e) => report(&e),
                    }
                    continue;
                }
                buffer.push_str(&line);
                buffer.push('\n');
                if line.trim().ends_with(';') {
                    let sql = std::mem::take(&mut buffer);
                    let _ = editor.add_history_entry(sql.trim());
                    if let Err(e) = run_sql(ctx, &sql, options, None).await {
                        report(&e.to_string());
                    }
                }
            }
            Err(ReadlineError::Interrupted) => buffer.clear(),
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(DataFusionError::External(Box::new(e))),
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(())
}

fn report(message: &str) {
    eprintln!("Error: {}", message.replace('\n', " "));
}

async fn run_meta(
    ctx: &SessionContext,
    command: Meta,
    options: &mut Options,
) -> Result<()> {
    match command {
        Meta::Quit => {}
        Meta::Help => print!("{}", meta::HELP),
        Meta::ListTables => run_sql(ctx, meta::LIST_TABLES, *options, None).await?,
        Meta::Describe(table) => {
            run_sql(ctx, &format!("DESCRIBE {table}"), *options, None).await?
        }
        Meta::Timing(on) => {
            options.timing = on.unwrap_or(!options.timing);
            println!("timing is {}", if options.timing { "on" } else { "off" });
        }
        Meta::Format(Some(format)) => {
            options.format = format;
            println!("format is {}", format_name(format));
        }
        Meta::Format(None) => println!("format is {}", format_name(options.format)),
    }
    Ok(())
}

fn format_name(format: crate::Format) -> &'static str {
    match format {
        crate::Format::Table => "table",
        crate::Format::Csv => "csv",
        crate::Format::Json => "json",
    }
}
