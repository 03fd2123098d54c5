//! The interactive shell's backslash commands (psql's and duckdb's
//! spellings), listed by `\?` and `--help`.

use crate::Format;

/// The commands, one per line, as `\?` and `--help` list them.
pub const HELP: &str = "  \\d              list tables
  \\d NAME         describe a table (as DESCRIBE NAME)
  \\timing [on|off] print each statement's rows and time (no argument: toggle)
  \\format [table|csv|json]  set (or show) the output format
  \\? or \\h        this list
  \\q              quit (or quit, exit, Ctrl-D)
";

/// A backslash command.
#[derive(Debug, PartialEq, Eq)]
pub enum Meta {
    /// `\q`
    Quit,
    /// `\?`
    Help,
    /// `\d`
    ListTables,
    /// `\d NAME`
    Describe(String),
    /// `\timing`, `\timing on|off`: None toggles
    Timing(Option<bool>),
    /// `\format`, `\format NAME`: None shows the current one
    Format(Option<Format>),
}

/// The command on `line`, if it is one (`Err` for a malformed one); `None`
/// for SQL. A trailing `;` is allowed, as psql allows it.
pub fn parse(line: &str) -> Option<Result<Meta, String>> {
    let line = line.trim().trim_end_matches(';').trim_end();
    if matches!(line.to_ascii_lowercase().as_str(), "quit" | "exit") {
        return Some(Ok(Meta::Quit));
    }
    let command = line.strip_prefix('\\')?;
    let (name, arg) = match command.split_once(char::is_whitespace) {
        Some((n, a)) => (n, Some(a.trim()).filter(|a| !a.is_empty())),
        None => (command, None),
    };
    Some(match (name, arg) {
        ("q", None) => Ok(Meta::Quit),
        ("?" | "h", None) => Ok(Meta::Help),
        ("d", None) => Ok(Meta::ListTables),
        ("d", Some(table))
            if table.contains(';') || table.contains(char::is_whitespace) =>
        {
            Err(format!("\\d takes one table name, got '{table}'"))
        }
        ("d", Some(table)) => Ok(Meta::Describe(table.to_string())),
        ("timing", None) => Ok(Meta::Timing(None)),
        ("timing", Some(a)) => match a.to_ascii_lowercase().as_str() {
            "on" => Ok(Meta::Timing(Some(true))),
            "off" => Ok(Meta::Timing(Some(false))),
            _ => Err(format!("\\timing takes on or off, got '{a}'")),
        },
        ("format", None) => Ok(Meta::Format(None)),
        ("format", Some(a)) => match a.to_ascii_lowercase().as_str() {
            "table" => Ok(Meta::Format(Some(Format::Table))),
            "csv" => Ok(Meta::Format(Some(Format::Csv))),
            "json" => Ok(Meta::Format(Some(Format::Json))),
            _ => Err(format!("\\format takes table, csv or json, got '{a}'")),
        },
        _ => Err(format!(
            "unknown command \\{command}; \\? lists the commands"
        )),
    })
}

/// The SQL of `\d`: the tables, views and their kind, without
/// information_schema's own.
pub const LIST_TABLES: &str = "SELECT table_name AS name, table_type AS type \
     FROM information_schema.tables \
     WHERE table_schema <> 'information_schema' \
     ORDER BY table_catalog, table_schema, table_name";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands_and_leaves_sql_alone() {
        assert_eq!(parse("SELECT 1;"), None);
        assert_eq!(parse(" \\q "), Some(Ok(Meta::Quit)));
        assert_eq!(parse("exit"), Some(Ok(Meta::Quit)));
        assert_eq!(parse("\\d"), Some(Ok(Meta::ListTables)));
        assert_eq!(
            parse("\\d trades;"),
            Some(Ok(Meta::Describe("trades".into())))
        );
        assert_eq!(parse("\\timing"), Some(Ok(Meta::Timing(None))));
        assert_eq!(parse("\\timing OFF"), Some(Ok(Meta::Timing(Some(false)))));
        assert_eq!(
            parse("\\format csv"),
            Some(Ok(Meta::Format(Some(Format::Csv))))
        );
        assert!(matches!(parse("\\format xml"), Some(Err(_))));
        assert!(matches!(parse("\\d a; drop table a"), Some(Err(_))));
        assert!(matches!(parse("\\x"), Some(Err(_))));
    }
}
