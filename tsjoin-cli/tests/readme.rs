//! The command lines README.md (and docs/, when present) shows still parse:
//! every flag they use is in the `--help` of the command they use it with,
//! and each line parses (checked with `--help` appended, which stops before
//! anything runs).

use crate::run;
use std::path::Path;

/// Shell words of `text`, a code block: one `Vec` per command (commands end
/// at a newline or `;` outside quotes, and at `&&` or `|` between words;
/// `\` joins lines; `#` starts a comment).
fn commands(text: &str) -> Vec<Vec<String>> {
    let mut commands = vec![];
    let mut words: Vec<String> = vec![];
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    let end_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    word.push(q);
                }
            }
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
                end_word(&mut word, &mut in_word, &mut words);
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            '#' if !in_word => {
                while chars.peek().is_some_and(|&n| n != '\n') {
                    chars.next();
                }
            }
            // `|` inside a word is README's `table|csv|json`, not a pipe.
            '\n' | ';' | '&' | '|' if c == '\n' || c == ';' || !in_word => {
                end_word(&mut word, &mut in_word, &mut words);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut word, &mut in_word, &mut words),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut words);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

/// The fenced shell code blocks of a Markdown file.
fn shell_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = vec![];
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut current, fence) {
            (None, Some(lang)) => {
                if matches!(
                    lang.trim(),
                    "sh" | "bash" | "shell" | "console" | "text" | ""
                ) {
                    current = Some(String::new());
                } else {
                    // Some other language: skip to its closing fence.
                    current = Some("\u{0}".into());
                }
            }
            (Some(block), Some(_)) => {
                if !block.starts_with('\u{0}') {
                    blocks.push(std::mem::take(block));
                }
                current = None;
            }
            (Some(block), None) => {
                block.push_str(line.trim_start_matches("$ "));
                block.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// The arguments of a tsjoin-cli invocation, if `words` is one:
/// `tsjoin-cli ARGS`, `path/to/tsjoin-cli ARGS` or `cargo run ... -p
/// tsjoin-cli ... -- ARGS`.
fn cli_args(words: &[String]) -> Option<Vec<String>> {
    let first = words.first()?;
    if first == "tsjoin-cli" || first.ends_with("/tsjoin-cli") {
        return Some(words[1..].to_vec());
    }
    if first == "cargo"
        && words.get(1).is_some_and(|w| w == "run")
        && words
            .windows(2)
            .any(|w| w[0] == "-p" && w[1] == "tsjoin-cli")
    {
        let rest = words
            .iter()
            .position(|w| w == "--")
            .map_or(&[][..], |i| &words[i + 1..]);
        return Some(rest.to_vec());
    }
    None
}

/// `[--flag VALUE|OTHER]`-style optional parts, as README writes them:
/// the flags they name, and whether the line has any.
fn optional_flags(args: &[String]) -> (Vec<String>, bool) {
    let mut flags = vec![];
    let mut any = false;
    for a in args {
        if a.starts_with('[') {
            any = true;
            let flag = a.trim_start_matches('[').trim_end_matches(']');
            if flag.starts_with('-') {
                flags.push(flag.to_string());
            }
        }
    }
    (flags, any)
}

#[test]
fn readme_command_lines_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![root.join("README.md")];
    if let Ok(entries) = std::fs::read_dir(root.join("docs")) {
        files.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "md")),
        );
    }
    let (ok, subcommands, _) = run(&["help"]);
    assert!(ok);
    let mut checked = 0;
    for file in &files {
        let markdown = std::fs::read_to_string(file).unwrap();
        for block in shell_blocks(&markdown) {
            for words in commands(&block) {
                let Some(args) = cli_args(&words) else {
                    continue;
                };
                let line = format!("{}: tsjoin-cli {}", file.display(), args.join(" "));
                // The subcommand, if the line names one.
                let sub: Vec<&str> = args
                    .iter()
                    .map(String::as_str)
                    .filter(|a| {
                        !a.starts_with('-') && subcommands.contains(&format!("\n  {a} "))
                    })
                    .take(1)
                    .collect();
                let mut help_args = sub.clone();
                help_args.push("--help");
                let (ok, help, err) = run(&help_args);
                assert!(ok, "{line}: {err}");
                let (optional, has_optional) = optional_flags(&args);
                let used = args
                    .iter()
                    .filter(|a| a.starts_with('-') && a.len() > 1)
                    .map(|a| a.split('=').next().unwrap().to_string())
                    .chain(optional);
                for flag in used {
                    let short = flag.len() == 2 && !flag.starts_with("--");
                    let listed = if short {
                        help.contains(&format!("{flag},"))
                            || help.contains(&format!("{flag} "))
                    } else {
                        help.contains(&format!("{flag} "))
                            || help.contains(&format!("{flag}\n"))
                    };
                    assert!(listed, "{line}: {flag} is not in `--help`:\n{help}");
                }
                // Lines without placeholders parse as they are.
                if !has_optional {
                    let mut full: Vec<&str> = args.iter().map(String::as_str).collect();
                    full.push("--help");
                    let (ok, _, err) = run(&full);
                    assert!(ok, "{line} does not parse: {err}");
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 4,
        "found only {checked} tsjoin-cli command lines in {files:?}"
    );
}

#[test]
fn shell_words() {
    let block = "tsjoin-cli -t a=b \\\n   -c \"SELECT 'x;y'\n  FROM t\" [--f a|b] # note\ncargo test && bash x.sh\n";
    assert_eq!(
        commands(block),
        [
            vec![
                "tsjoin-cli",
                "-t",
                "a=b",
                "-c",
                "SELECT 'x;y'\n  FROM t",
                "[--f",
                "a|b]"
            ],
            vec!["cargo", "test"],
            vec!["bash", "x.sh"],
        ]
    );
}
