//! The README's and the guide's command lines are ones this binary accepts. The docs test
//! (tests/tests/docs.rs) runs every ```` ```console ```` block; the other blocks (`sh`, `text`,
//! plain) show commands that need a device, a service or a long run. Here every `npugate …`
//! command of those blocks is checked against the parser without running: its subcommands exist,
//! every `--flag` it names (synopses included: `[--json]`, `--local|--device`) is a flag of that
//! subcommand, and a concrete line (no `[`, `|`, `<`, `…`) parses as a whole.

use clap::{CommandFactory, Parser};

use super::Cli;

/// The repository's root (the crate lives in `cli/`).
fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli/ lives in the repository").to_path_buf()
}

/// The README and every chapter of the guide: (path from the repository's root, text).
fn documents() -> Vec<(String, String)> {
    let book = repo().join("docs/src");
    let mut chapters: Vec<String> = std::fs::read_dir(&book)
        .expect("docs/src")
        .map(|entry| entry.expect("a docs/src entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/src/{name}"))
        .collect();
    chapters.sort();
    std::iter::once("README.md".to_string())
        .chain(chapters)
        .map(|path| {
            let text = std::fs::read_to_string(repo().join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
            (path, text)
        })
        .collect()
}

/// The lines of the fenced code blocks the docs test does not run, as (1-based line, text), a
/// trailing `\` joined with the next line.
fn shown_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut fence: Option<bool> = None; // Some(shown) inside a block
    let mut pending: Option<(usize, String)> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            fence = match fence {
                None => Some(info.trim() != "console"),
                Some(_) => None,
            };
            continue;
        }
        if fence != Some(true) {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((index + 1, String::new()));
        match line.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                pending = Some((start, joined));
            }
            None => {
                joined.push_str(line);
                lines.push((start, joined));
            }
        }
    }
    lines
}

/// The line without its shell comment (` #` to the end) and a leading `$ ` prompt.
fn without_comment(line: &str) -> &str {
    let code = match line.find(" #") {
        Some(at) => &line[..at],
        None => line,
    };
    let code = code.trim();
    code.strip_prefix("$ ").unwrap_or(code)
}

/// Whether the word at `index` of `words` (with the whitespace before it) starts a command: first
/// on the line, after a shell operator or an environment assignment, or set apart by two or more
/// spaces (two synopses on one line).
fn starts_command(words: &[(&str, &str)], index: usize) -> bool {
    let (gap, word) = words[index];
    if word != "npugate" && !word.ends_with("/npugate") {
        return false;
    }
    let Some(&(_, before)) = index.checked_sub(1).and_then(|i| words.get(i)) else { return true };
    let assignment = before.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    });
    matches!(before, "&&" | "||" | ";" | "|" | "then" | "do") || assignment || gap.len() >= 2
}

/// Each `npugate` command of a line: the words after `npugate` up to the next command, a shell
/// operator or a redirection. A line of output (`npugate gate: PASS …`) or of prose
/// (`npugate → npugate-plan`) is none.
fn invocations(line: &str) -> Vec<Vec<String>> {
    let code = without_comment(line);
    let mut words = Vec::new();
    let mut rest = code;
    while !rest.is_empty() {
        let word_start = rest.find(|c: char| !c.is_whitespace()).unwrap_or(rest.len());
        let (gap, tail) = rest.split_at(word_start);
        let word_end = tail.find(char::is_whitespace).unwrap_or(tail.len());
        if word_end > 0 {
            words.push((gap, &tail[..word_end]));
        }
        rest = &tail[word_end..];
    }
    let starts: Vec<usize> = (0..words.len()).filter(|&i| starts_command(&words, i)).collect();
    starts
        .iter()
        .map(|&start| {
            words[start + 1..]
                .iter()
                .enumerate()
                .take_while(|&(offset, (_, word))| {
                    !starts.contains(&(start + 1 + offset)) && !matches!(*word, "&&" | "||" | ";" | "|" | ">" | "2>")
                })
                .map(|(_, (_, word))| word.to_string())
                .collect::<Vec<String>>()
        })
        .filter(|words| {
            words.first().is_none_or(|word| {
                !word.ends_with(':') && word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '-' || c == '[')
            })
        })
        .collect()
}

/// The long flags a synopsis word names: `[--json]` → `json`, `--local|--device` → both,
/// `--rule=x` → `rule`.
fn flags_in(word: &str) -> Vec<String> {
    word.split("--")
        .skip(1)
        .map(|tail| tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect::<String>())
        .filter(|flag| !flag.is_empty())
        .collect()
}

/// What is wrong with one documented command (`words` after `npugate`), if anything.
fn problems(words: &[String]) -> Vec<String> {
    let mut command = Cli::command();
    command.build();
    let mut path = vec!["npugate".to_string()];
    let mut globals: Vec<String> = command.get_arguments().filter_map(|a| a.get_long().map(str::to_string)).collect();
    let mut at = 0;
    while let Some(sub) = words.get(at).and_then(|word| command.find_subcommand(word)).cloned() {
        path.push(words[at].clone());
        command = sub;
        globals.extend(
            command.get_arguments().filter(|a| a.is_global_set()).filter_map(|a| a.get_long().map(str::to_string)),
        );
        at += 1;
    }
    let mut found = Vec::new();
    if command.has_subcommands() && !command.is_args_conflicts_with_subcommands_set() && at < words.len() {
        if let Some(word) = words.get(at).filter(|word| !word.starts_with('-') && !word.starts_with('[')) {
            found.push(format!("`{}` has no subcommand `{word}`", path.join(" ")));
        }
    }
    let known: Vec<String> = command
        .get_arguments()
        .flat_map(|arg| arg.get_long_and_visible_aliases().unwrap_or_default())
        .map(str::to_string)
        .chain(globals)
        .chain(["help".to_string()])
        .collect();
    for flag in words[at..].iter().flat_map(|word| flags_in(word)) {
        if !known.contains(&flag) {
            found.push(format!("`{}` has no flag --{flag}", path.join(" ")));
        }
    }
    let synopsis = words.iter().any(|word| word.contains(['[', ']', '|', '<', '…']) || word.contains("..."));
    if found.is_empty() && !synopsis {
        let line = words.join(" ");
        match shell_words::split(&line).ok() {
            Some(args) => {
                if let Err(error) = Cli::try_parse_from(std::iter::once("npugate".to_string()).chain(args)) {
                    let first = error.to_string().lines().next().unwrap_or_default().to_string();
                    found.push(format!("does not parse: {first}"));
                }
            }
            None => found.push("unbalanced quotes".to_string()),
        }
    }
    found
}

#[test]
fn every_command_the_docs_show_is_one_the_parser_accepts() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (path, text) in documents() {
        for (line, code) in shown_lines(&text) {
            for words in invocations(&code) {
                checked += 1;
                for problem in problems(&words) {
                    wrong.push(format!("{path}:{line}: npugate {}: {problem}", words.join(" ")));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "commands in the docs this binary does not accept:\n{}", wrong.join("\n"));
    // The README's install block and the command reference alone hold dozens: a parser that found
    // none would pass anything.
    eprintln!("{checked} documented commands checked");
    assert!(checked >= 60, "only {checked} documented commands found: the extraction is broken");
}

#[test]
fn a_wrong_flag_a_wrong_subcommand_and_a_bad_value_are_each_caught() {
    let words = |line: &str| invocations(line).remove(0);
    assert_eq!(problems(&words("npugate run --local --model m.onnx")), Vec::<String>::new());
    assert_eq!(problems(&words("npugate run [--json] --local|--devices X")), ["`npugate run` has no flag --devices"]);
    assert_eq!(problems(&words("npugate runtime fecth X")), ["`npugate runtime` has no subcommand `fecth`"]);
    assert!(problems(&words("npugate run --local --runs many --model m.onnx"))[0].starts_with("does not parse"));
    assert_eq!(
        invocations("cargo build -p npugate -p npugate-harness  # a comment npugate run"),
        Vec::<Vec<String>>::new()
    );
    assert_eq!(invocations("npugate gate: PASS — m.onnx"), Vec::<Vec<String>>::new());
    assert_eq!(invocations("npugate → npugate-plan → npugate-engine"), Vec::<Vec<String>>::new());
    assert_eq!(invocations("A=1 npugate doctor && .venv/bin/npugate model list > x").len(), 2);
}
