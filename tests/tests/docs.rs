//! The guide cannot drift from the code: every command block of the README and of `docs/src/` is
//! either run or checked. Every ```` ```console ```` block of `docs/src/` runs here with the built
//! binaries and the cached models, its printed output compared with the chapter's. The blocks that
//! cannot run here (a device, AI Hub, a long run) are ```` ```sh ```` (every line a command) or
//! ```` ```text ```` / plain (output, its `$ ` lines commands): their command lines are split as bash
//! would, each `npugate …` command parsed by the binary's own clap definition ([`npugate::command`]:
//! subcommands, flags, value types, conflicts) without running it, each `scripts/…` must be an
//! executable script of the repository; a synopsis (`[--json]`, `--local|--device`) has its
//! subcommands and flag names checked. Every relative link of the guide and the README resolves to a
//! file (and a heading) of the repository, nothing points outside it, and `SUMMARY.md` lists every
//! chapter exactly once.
//!
//! A console block is a transcript: `$ command` lines (a `> ` line continues the command, as a
//! shell's second prompt shows a here-document or an open quote), each followed by what it prints,
//! stdout and stderr together. `...` alone on a line stands for any lines, `[..]` inside a line for
//! any text, `[CWD]` for the folder the chapter's examples run in. The blocks of one chapter run in
//! order in one fresh folder, each block in one bash, so a block can use what an earlier command
//! wrote. A command that exits non-zero must be followed by `$ echo $?` showing the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ lives in the repository").to_path_buf()
}

/// The book's source folder.
fn book() -> PathBuf {
    repo().join("docs/src")
}

/// Every Markdown file of the book, by file name.
fn chapters() -> BTreeMap<String, String> {
    std::fs::read_dir(book())
        .expect("docs/src")
        .map(|entry| entry.expect("docs/src entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        })
        .collect()
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// A fenced code block: its info string, its first content line and its text.
struct Block {
    info: String,
    line: usize,
    text: String,
}

/// The fenced code blocks of a Markdown text.
fn code_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (event, range) in Parser::new_ext(text, Options::all()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                open = Some(Block { info: info.to_string(), line: line_of(text, range.start) + 1, text: String::new() })
            }
            Event::Text(content) => {
                if let Some(block) = open.as_mut() {
                    block.text.push_str(&content);
                }
            }
            Event::End(TagEnd::CodeBlock) => blocks.extend(open.take()),
            _ => {}
        }
    }
    blocks
}

/// One command of a console block and the output the chapter shows for it.
#[derive(Debug)]
struct Step {
    line: usize,
    command: String,
    expected: String,
}

/// The steps of a console block's text: `$ ` starts a command, `> ` continues it, anything else
/// until the next `$ ` is its output.
fn steps(block: &Block) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_command = false;
    for (index, line) in block.text.lines().enumerate() {
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step { line: block.line + index, command: command.to_string(), expected: String::new() });
            in_command = true;
        } else if let (true, Some(more)) = (in_command, line.strip_prefix("> ")) {
            let step = steps.last_mut().expect("a command is open");
            step.command.push('\n');
            step.command.push_str(more);
        } else {
            let step = steps
                .last_mut()
                .unwrap_or_else(|| panic!("console block at line {}: output before any `$ ` command", block.line));
            step.expected.push_str(line);
            step.expected.push('\n');
            in_command = false;
        }
    }
    steps
}

/// Separates the steps' outputs in the one stream a block's bash writes (an ASCII record separator
/// and the step's exit code on a line of its own).
const RECORD: char = '\u{1e}';

/// One bash script running the steps in order, each output followed by the record separator and its
/// exit code, `$?` restored for the next step.
fn script(steps: &[Step]) -> String {
    let mut script = String::from("exec 2>&1\n");
    for step in steps {
        script.push_str(&step.command);
        script.push_str("\nnpugate_docs_status=$?; printf '\\n\\036%d\\n' \"$npugate_docs_status\"; (exit \"$npugate_docs_status\")\n");
    }
    script
}

/// What one step printed and how it ended.
struct Outcome {
    output: String,
    status: i32,
}

/// Runs a console block in `dir` and returns each step's outcome.
fn run_block(steps: &[Step], dir: &Path) -> Vec<Outcome> {
    let release = npugate_e2e::target_profile_dir();
    let path = std::env::join_paths(
        std::iter::once(release).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("PATH");
    let out = npugate_e2e::run(
        Command::new("bash")
            .args(["--noprofile", "--norc", "-c", &script(steps)])
            .current_dir(dir)
            .env("PATH", path)
            .env("NO_COLOR", "1"),
    );
    let stream = String::from_utf8_lossy(&out.stdout);
    let mut outcomes = Vec::new();
    let mut rest: &str = &stream;
    while let Some((output, after)) = rest.split_once(RECORD) {
        let (status, after) = after.split_once('\n').unwrap_or((after, ""));
        let output = output.strip_suffix('\n').unwrap_or(output);
        outcomes.push(Outcome { output: output.to_string(), status: status.trim().parse().unwrap_or(-1) });
        rest = after;
    }
    assert_eq!(outcomes.len(), steps.len(), "bash ended early: {}", npugate_e2e::describe(&out));
    outcomes
}

/// Runs every console block of `chapter` in one fresh folder and compares each step's output with
/// the chapter's; panics naming every step that differs.
fn run_examples(chapter: &str) {
    let text = chapters().remove(chapter).unwrap_or_else(|| panic!("docs/src/{chapter} does not exist"));
    let dir = tempfile::tempdir().expect("a folder for the examples");
    let cwd = dir.path().canonicalize().expect("the examples' folder");
    let mut redactions = snapbox::Redactions::new();
    redactions.insert("[CWD]", cwd.clone()).expect("[CWD] is a placeholder");
    let assert = snapbox::Assert::new().action(snapbox::assert::Action::Verify).redact_with(redactions);
    let mut failures = Vec::new();
    let blocks: Vec<Block> = code_blocks(&text).into_iter().filter(|block| block.info.trim() == "console").collect();
    assert!(!blocks.is_empty(), "docs/src/{chapter} has no console block to run");
    for block in blocks {
        let steps = steps(&block);
        let outcomes = run_block(&steps, &cwd);
        for (index, (step, outcome)) in steps.iter().zip(&outcomes).enumerate() {
            let shown = steps.get(index + 1).is_some_and(|next| next.command.trim() == "echo $?");
            if outcome.status != 0 && !shown {
                failures.push(format!(
                    "docs/src/{chapter}:{}: `{}` exited {}; show it with `$ echo $?` or fix the example:\n{}",
                    step.line, step.command, outcome.status, outcome.output
                ));
                continue;
            }
            let expected = snapbox::Data::text(step.expected.trim_end().to_string());
            let actual = snapbox::Data::text(outcome.output.trim_end().to_string());
            if let Err(error) = assert.try_eq(Some(&"what it printed"), actual, expected) {
                failures.push(format!("docs/src/{chapter}:{}: `{}`:\n{error}", step.line, step.command));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} example(s) differ from what they print:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// One test per chapter with console blocks, so the runner spreads them over its slots.
macro_rules! chapter_examples {
    ($($test:ident => $chapter:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                run_examples($chapter);
            }
        )*
        /// The chapters the macro runs.
        const RUN_CHAPTERS: &[&str] = &[$($chapter),*];
    };
}

chapter_examples! {
    first_run_examples => "first-run.md",
    cli_examples => "cli.md",
    gate_examples => "gate.md",
    snapdragon_examples => "snapdragon.md",
    runtimes_examples => "runtimes.md",
    choose_examples => "choose.md",
    resources_examples => "resources.md",
    evidence_examples => "evidence.md",
}

#[test]
fn every_chapter_with_console_examples_is_run() {
    let with_examples: BTreeSet<String> = chapters()
        .into_iter()
        .filter(|(_, text)| code_blocks(text).iter().any(|block| block.info.trim() == "console"))
        .map(|(name, _)| name)
        .collect();
    let run: BTreeSet<String> = RUN_CHAPTERS.iter().map(|name| name.to_string()).collect();
    assert_eq!(with_examples, run, "add each chapter with console blocks to chapter_examples! in {}", file!());
}

/// What the docs test does with a fenced block, by its info string.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    /// ```` ```console ````: a transcript, run (docs/src only).
    Run,
    /// ```` ```sh ```` (`bash`, `shell`): every line a command, checked without running.
    Commands,
    /// ```` ```text ```` or no info: its `$ ` lines are commands, checked without running; the rest
    /// is what they print.
    Transcript,
    /// Anything else (yaml, toml, json, rust, kotlin): configuration or code, no command block; an
    /// `npugate` command in its `#` comments is checked as a text line.
    Other,
}

/// The role of a block.
fn role(block: &Block) -> Role {
    match block.info.split_whitespace().next().unwrap_or("") {
        "console" => Role::Run,
        "sh" | "bash" | "shell" => Role::Commands,
        "text" | "" => Role::Transcript,
        _ => Role::Other,
    }
}

/// A command line a block shows without running it.
#[derive(Debug, PartialEq)]
struct Shown {
    line: usize,
    text: String,
    /// A shell command line (a sh block's line, a transcript's `$ ` line), as opposed to a line of
    /// a text block that may hold an `npugate` command (a synopsis, a command without its prompt) or
    /// be output.
    shell: bool,
}

/// The lines of a block that is not run: every line of a sh block, every line of a text block
/// (its `$ ` lines, a `> ` line after one continuing it, as shell lines), the `#` comments of
/// configuration or code; a trailing `\` continues a line on the next.
fn shown_lines(block: &Block) -> Vec<Shown> {
    let shown_at = |index: usize, text: &str, shell| Shown { line: block.line + index, text: text.to_string(), shell };
    match role(block) {
        Role::Run => return Vec::new(),
        Role::Other => {
            let comments =
                block.text.lines().enumerate().filter_map(|(index, line)| Some((index, line.split_once('#')?.1)));
            return comments.map(|(index, comment)| shown_at(index, comment, false)).collect();
        }
        Role::Commands | Role::Transcript => {}
    }
    let every_line = role(block) == Role::Commands;
    let mut shown: Vec<Shown> = Vec::new();
    let (mut open, mut after_prompt) = (false, false);
    for (index, line) in block.text.lines().enumerate() {
        let more = if open { Some(line) } else { line.strip_prefix("> ").filter(|_| after_prompt) };
        if let Some(more) = more {
            let text = &mut shown.last_mut().expect("a line goes on").text;
            text.push('\n');
            text.push_str(more);
        } else {
            let prompted = line.strip_prefix("$ ");
            after_prompt = prompted.is_some();
            let shell = every_line || after_prompt;
            shown.push(shown_at(index, prompted.unwrap_or(line), shell));
        }
        open = line.ends_with('\\');
    }
    shown
}

/// Where the parenthesis opened at `open` closes, quotes and nested parentheses skipped.
fn closing_paren(chars: &[char], open: usize) -> Result<usize, String> {
    let (mut depth, mut quote) = (0, None);
    for (at, &c) in chars.iter().enumerate().skip(open) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') if depth == 1 => return Ok(at),
            (None, ')') => depth -= 1,
            _ => {}
        }
    }
    Err("a `$(` that does not close".to_string())
}

/// Skips the redirection at `at` (`>`, `>>`, `<`, `2>&1`, `> file`): its operator, then a
/// duplicated descriptor (`&1`) or the word it redirects to; drops a descriptor number written just
/// before it from `segment`. Returns where the command goes on.
fn skip_redirection(chars: &[char], mut at: usize, segment: &mut String) -> usize {
    let word_start = segment.rfind(char::is_whitespace).map_or(0, |space| space + 1);
    if word_start < segment.len() && segment[word_start..].chars().all(|c| c.is_ascii_digit()) {
        segment.truncate(word_start);
    }
    while chars.get(at).is_some_and(|c| matches!(c, '>' | '<')) {
        at += 1;
    }
    if chars.get(at) == Some(&'&') {
        at += 1;
        while chars.get(at).is_some_and(|c| c.is_ascii_digit() || *c == '-') {
            at += 1;
        }
        return at;
    }
    while chars.get(at).is_some_and(|c| c.is_whitespace()) {
        at += 1;
    }
    while chars.get(at).is_some_and(|c| !c.is_whitespace() && !matches!(c, '|' | '&' | ';' | '<' | '>')) {
        at += 1;
    }
    at
}

/// Words that run the command after them: `NAME=value` assignments and these prefixes.
const COMMAND_PREFIXES: &[&str] = &["exec", "env", "nice", "time"];

/// The simple commands of a shell command line, each as its words: the line split at `|`, `&&`,
/// `||`, `;`, `&` and newlines outside quotes, a `\` line end joined, a comment and redirections
/// dropped, the `NAME=value` assignments and `exec`/`env`/`nice`/`time` before a command dropped.
/// A command substitution `$(…)` adds its own commands and stands in its word as `$(…)`; other
/// expansions (`$model`, `"${X}"`) stay as written ([`parse_problem`] reads them as values).
fn simple_commands(line: &str) -> Result<Vec<Vec<String>>, String> {
    let chars: Vec<char> = line.replace("\\\n", " ").chars().collect();
    let (mut commands, mut segments, mut segment) = (Vec::new(), Vec::new(), String::new());
    let mut quote: Option<char> = None;
    let mut at = 0;
    while let Some(&c) = chars.get(at) {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') if at + 1 < chars.len() => {
                segment.extend([c, chars[at + 1]]);
                at += 2;
                continue;
            }
            (_, '$') if chars.get(at + 1) == Some(&'(') => {
                let close = closing_paren(&chars, at + 1)?;
                commands.extend(simple_commands(&chars[at + 2..close].iter().collect::<String>())?);
                segment.push_str("$(…)");
                at = close + 1;
                continue;
            }
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if segment.is_empty() || segment.ends_with(char::is_whitespace) => break,
            (None, '|' | '&' | ';' | '\n') => {
                segments.push(std::mem::take(&mut segment));
                at += 1;
                continue;
            }
            (None, '>' | '<') => {
                at = skip_redirection(&chars, at, &mut segment);
                continue;
            }
            _ => {}
        }
        segment.push(c);
        at += 1;
    }
    if quote.is_some() {
        return Err(format!("an unclosed {} quote", quote.unwrap_or_default()));
    }
    segments.push(segment);
    for segment in segments {
        let words = shell_words::split(&segment).map_err(|e| format!("{segment}: {e}"))?;
        let is_prefix = |word: &String| {
            COMMAND_PREFIXES.contains(&word.as_str())
                || word.split_once('=').is_some_and(|(name, _)| {
                    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
        };
        let command: Vec<String> = words.into_iter().skip_while(is_prefix).collect();
        if !command.is_empty() {
            commands.push(command);
        }
    }
    Ok(commands)
}

/// The programs other than npugate and the repository's scripts that the README and the guide
/// show, which this test leaves alone; a block that names another fails until it is added here.
const OTHER_PROGRAMS: &[&str] = &["cargo", "cd", "cp", "echo", "git", "pip", "python3", "qai-hub"];

/// Why `npugate` refuses these arguments, if it does: clap's error, its usage left out. Asking for
/// help or the version is no refusal. A shell variable (`"$runs"`) where a typed value is due
/// stands for a value the reader picks: it is tried as `1` (a count, a duration, a percentage) and
/// refused only if that does not fit either.
fn parse_problem(args: &[String]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let mut args = args.to_vec();
    loop {
        let line = std::iter::once("npugate".to_string()).chain(args.iter().cloned());
        let error = npugate::command().try_get_matches_from(line).err()?;
        let asked =
            [ErrorKind::DisplayHelp, ErrorKind::DisplayVersion, ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand];
        if asked.contains(&error.kind()) {
            return None;
        }
        let variable = match error.get(ContextKind::InvalidValue) {
            Some(ContextValue::String(value)) if value.contains('$') => args.iter().position(|arg| arg == value),
            _ => None,
        };
        if let Some(at) = variable {
            args[at] = "1".to_string();
            continue;
        }
        let text = error.to_string();
        let lines: Vec<&str> = text
            .lines()
            .take_while(|line| !line.starts_with("Usage:"))
            .filter(|line| !line.trim().is_empty())
            .collect();
        return Some(lines.join("; "));
    }
}

/// The workspace's package names and its integration tests' names, from `cargo metadata` (once).
fn workspace_targets() -> &'static (BTreeSet<String>, BTreeSet<String>) {
    static TARGETS: std::sync::OnceLock<(BTreeSet<String>, BTreeSet<String>)> = std::sync::OnceLock::new();
    TARGETS.get_or_init(|| {
        let out = npugate_e2e::run(
            Command::new("cargo").args(["metadata", "--no-deps", "--format-version", "1"]).current_dir(repo()),
        );
        let metadata: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("cargo metadata: {e}: {}", npugate_e2e::describe(&out)));
        let packages = metadata["packages"].as_array().expect("cargo metadata lists packages");
        let names = packages.iter().filter_map(|package| package["name"].as_str()).map(String::from).collect();
        let tests = packages
            .iter()
            .flat_map(|package| package["targets"].as_array().into_iter().flatten())
            .filter(|target| target["kind"].as_array().is_some_and(|kinds| kinds.iter().any(|kind| kind == "test")))
            .filter_map(|target| target["name"].as_str())
            .map(String::from)
            .collect();
        (names, tests)
    })
}

/// What is wrong with a `cargo` command the docs show: a package (`-p`, `--package`) that is not
/// one of the workspace's, an integration test (`--test`) that none of its packages has.
fn cargo_problem(args: &[String]) -> Option<String> {
    let (packages, tests) = workspace_targets();
    let wrong: Vec<String> = args
        .windows(2)
        .filter_map(|pair| match pair[0].as_str() {
            "-p" | "--package" if !packages.contains(&pair[1]) => Some(format!("no workspace package {}", pair[1])),
            "--test" if !tests.contains(&pair[1]) => Some(format!("no integration test {}", pair[1])),
            _ => None,
        })
        .collect();
    (!wrong.is_empty()).then(|| wrong.join("; "))
}

/// What is wrong with one simple command the docs show, if anything: `npugate` refuses its
/// arguments, a `scripts/…` is no executable script of the repository, `cargo` names a package or
/// test the workspace does not have, or the program is unknown.
fn command_problem(words: &[String]) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let program = words[0].as_str();
    let name = program.rsplit('/').next().unwrap_or(program);
    if name == "npugate" {
        return parse_problem(&words[1..]);
    }
    if program == "cargo" {
        return cargo_problem(&words[1..]);
    }
    if program.starts_with("scripts/") {
        let executable = std::fs::metadata(repo().join(program))
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0);
        return (!executable).then(|| format!("{program} is no executable script of the repository"));
    }
    (!OTHER_PROGRAMS.contains(&name)).then(|| {
        format!(
            "`{program}` is neither npugate nor a script of the repository: add it to OTHER_PROGRAMS in {}",
            file!()
        )
    })
}

/// Whether a line shows a synopsis rather than a command to type: a word that opens with `[` or
/// `<` (`[--json]`, `<runtime>`), an ellipsis (`…`, `NAME...`), or alternatives (`--local|--device`).
fn is_synopsis(line: &str) -> bool {
    let code = line.split(" #").next().unwrap_or(line);
    code.contains('…')
        || code.split_whitespace().any(|word| {
            word.starts_with('[')
                || (word.starts_with('<') && word.len() > 1 && !word.starts_with("<<"))
                || word.ends_with("...")
                || (word.contains('|') && !matches!(word, "|" | "||"))
        })
}

/// Whether the word at `index` of `words` (with the whitespace before it) starts an `npugate`
/// command in a line that is not shell: first on the line, after a shell operator or an environment
/// assignment, or set apart by two or more spaces (two synopses on one line).
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

/// The `npugate` commands of a line that is not shell (a synopsis, a text block's line), each as
/// the words after `npugate` up to the next command, a shell operator or a redirection. A line of
/// output (`npugate gate: PASS …`) or of a drawing (`npugate → npugate-plan`) holds none.
fn invocations(line: &str) -> Vec<Vec<String>> {
    let code = line.split(" #").next().unwrap_or(line).trim_end();
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
                    !starts.contains(&(start + 1 + offset)) && !matches!(*word, "&&" | "||" | ";" | ">" | "2>")
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

/// What is wrong with an `npugate` command of a line that is not shell (`words` after `npugate`):
/// its subcommands must exist and every `--flag` it names must be one of the last; a line with no
/// synopsis markup must also parse whole.
fn invocation_problems(words: &[String]) -> Vec<String> {
    let mut command = npugate::command();
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
    if command.has_subcommands() && !command.is_args_conflicts_with_subcommands_set() {
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
    if found.is_empty() && !is_synopsis(&words.join(" ")) {
        match shell_words::split(&words.join(" ")) {
            Ok(args) => found.extend(parse_problem(&args)),
            Err(_) => found.push("unbalanced quotes".to_string()),
        }
    }
    found
}

/// The `npugate` commands one shown line holds and what is wrong with it: a shell line that is no
/// synopsis splits into its commands, each checked whole ([`command_problem`]); any other line has
/// its `npugate` commands checked against the parser ([`invocation_problems`]).
fn line_problems(shown: &Shown) -> (usize, Vec<String>) {
    let is_npugate = |program: &str| program.rsplit('/').next() == Some("npugate");
    if !shown.shell || is_synopsis(&shown.text) {
        let invocations = invocations(&shown.text.replace("\\\n", " "));
        return (invocations.len(), invocations.iter().flat_map(|words| invocation_problems(words)).collect());
    }
    match simple_commands(&shown.text) {
        Ok(commands) => (
            commands.iter().filter(|words| is_npugate(&words[0])).count(),
            commands.iter().filter_map(|words| command_problem(words)).collect(),
        ),
        Err(error) => (0, vec![error]),
    }
}

/// The `npugate` commands checked, and every problem, of the lines that the README and the
/// chapters show without running.
fn check_shown_commands() -> (usize, Vec<String>) {
    let (mut npugate_commands, mut problems) = (0, Vec::new());
    for (document, text) in documents() {
        for block in code_blocks(&text) {
            if role(&block) == Role::Run && document == Path::new("README.md") {
                problems.push(format!("README.md:{}: a console block here would not run: use sh", block.line));
            }
            for shown in shown_lines(&block) {
                let (count, found) = line_problems(&shown);
                npugate_commands += count;
                let at = format!("{}:{}: `{}`", document.display(), shown.line, shown.text);
                problems.extend(found.into_iter().map(|problem| format!("{at}: {problem}")));
            }
        }
    }
    (npugate_commands, problems)
}

#[test]
fn every_command_the_docs_show_but_do_not_run_parses_and_every_script_exists() {
    let (npugate_commands, problems) = check_shown_commands();
    assert!(problems.is_empty(), "commands the README and the guide show that do not work:\n{}", problems.join("\n"));
    // The command reference and the README alone show dozens: a check that found few would pass
    // anything.
    eprintln!("{npugate_commands} npugate commands parsed");
    assert!(npugate_commands >= 60, "only {npugate_commands} npugate commands found: the extraction is broken");
}

#[test]
fn a_wrong_subcommand_flag_value_or_script_is_caught() {
    let problems = |line: &str| line_problems(&Shown { line: 1, text: line.to_string(), shell: true }).1;
    assert_eq!(problems("npugate run --local --model m.onnx --runs 5"), Vec::<String>::new());
    assert_eq!(problems("npugate run --help"), Vec::<String>::new());
    assert_eq!(problems("npugate run --local --model \"$model\" --runs \"$runs\""), Vec::<String>::new());
    assert_eq!(problems("cargo nextest run -p npugate-gate --test docs"), Vec::<String>::new());
    let wrong = [
        ("npugate runtime fecth x", "fecth"),
        ("npugate run --local --modle m.onnx", "--modle"),
        ("npugate run --local --model m.onnx --runs many", "many"),
        ("npugate run --local --model m.onnx --ep \"$EP\"", "invalid value '1'"),
        (
            "npugate compare --local --baseline-model a.onnx --model b.onnx --runs 5 --runs-per-round 5",
            "cannot be used with",
        ),
        ("scripts/nothing --demo", "scripts/nothing is no executable script"),
        ("scripts/aihub_models.py", "is no executable script"),
        ("curl x", "`curl` is neither"),
        ("cargo nextest run --release -p npugate-gates baseline", "no workspace package npugate-gates"),
        ("cargo nextest run --release -p npugate-e2e --test doc", "no integration test doc"),
    ];
    for (line, says) in wrong {
        let found = problems(line);
        assert!(found.len() == 1 && found[0].contains(says), "{line}: {found:?}");
    }
    let text_line = |line: &str| line_problems(&Shown { line: 1, text: line.to_string(), shell: false });
    assert_eq!(text_line("npugate run [--out DIR] --local|--devices X").1, ["`npugate run` has no flag --devices"]);
    assert_eq!(
        text_line("npugate devices [--json]   npugate runtime fecth NAME...").1,
        ["`npugate runtime` has no subcommand `fecth`"]
    );
    assert!(text_line("npugate run --local --runs many --model m.onnx").1[0].contains("many"));
    assert_eq!(text_line("npugate gate: PASS — m.onnx"), (0, vec![]), "output");
    assert_eq!(text_line("npugate → npugate-plan → npugate-engine"), (0, vec![]), "a drawing");
}

/// The commands of a script or a sh block's lines, comments and blank lines left out.
fn commands_of(text: &str) -> Vec<Vec<String>> {
    text.lines().flat_map(|line| simple_commands(line).unwrap_or_else(|e| panic!("{line}: {e}"))).collect()
}

/// The README opens with the two commands a newcomer and CI run; they must be the ones `.ci/run`
/// and the scripts' setup use, and the guide's introduction repeats them word for word.
#[test]
fn the_readmes_first_commands_are_what_ci_and_the_setup_run() {
    let read = |path: &str| std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let first_block = |path: &str| code_blocks(&read(path)).into_iter().next().expect("a first code block").text;
    let readme = first_block("README.md");
    let words = |command: &[&str]| command.iter().map(|word| word.to_string()).collect::<Vec<String>>();
    assert_eq!(commands_of(&readme), [words(&["scripts/demo"]), words(&["scripts/test"])], "README.md's first block");
    assert_eq!(first_block("docs/src/introduction.md"), readme, "the introduction's first block is the README's");
    let ci: Vec<Vec<String>> = commands_of(&read(".ci/run"));
    assert_eq!(ci.last(), Some(&words(&["scripts/test"])), ".ci/run ends by running the README's test command");
    let setup_block = code_blocks(&read("README.md"))
        .into_iter()
        .find(|block| block.text.contains("scripts/setup"))
        .expect("the README's setup block");
    let shown_setups = commands_of(&setup_block.text);
    for (script, setup) in
        [("scripts/demo", words(&["scripts/setup", "--demo"])), ("scripts/test", words(&["scripts/setup"]))]
    {
        let runs = commands_of(&read(script));
        assert!(runs.contains(&setup), "{script} runs `{}`", setup.join(" "));
        assert!(shown_setups.contains(&setup), "the README's setup block shows `{}`", setup.join(" "));
    }
    assert!(read("scripts/setup").contains("\"--demo\""), "scripts/setup takes --demo");
}

#[test]
fn a_shell_line_splits_into_its_commands() {
    let line = "A=1 B='x y' npugate doctor && cp \"$(.venv/bin/npugate model fetch x)\" m.onnx \\\n  | tee log 2>&1 >>out; exec scripts/test # npugate nope";
    let commands = simple_commands(line).unwrap();
    let expected: Vec<Vec<&str>> = vec![
        vec![".venv/bin/npugate", "model", "fetch", "x"],
        vec!["npugate", "doctor"],
        vec!["cp", "$(…)", "m.onnx"],
        vec!["tee", "log"],
        vec!["scripts/test"],
    ];
    assert_eq!(commands, expected);
    assert!(simple_commands("npugate run --model 'm.onnx").is_err(), "an unclosed quote");
    let block = Block { info: "text".into(), line: 10, text: "$ npugate a \\\n  --b\nout\n$ npugate c\n> d\n".into() };
    let shown = |line, text: &str, shell| Shown { line, text: text.to_string(), shell };
    assert_eq!(
        shown_lines(&block),
        [shown(10, "npugate a \\\n  --b", true), shown(12, "out", false), shown(13, "npugate c\nd", true)]
    );
    let yaml =
        Block { info: "yaml".into(), line: 3, text: "r: x   # npugate runtime import-aar … --name x\ny: 1\n".into() };
    assert_eq!(shown_lines(&yaml), [shown(3, " npugate runtime import-aar … --name x", false)]);
}

/// The heading anchors of a Markdown text, as mdBook makes them (and GitHub, for plain headings):
/// the heading's text lowercased, spaces to `-`, anything but letters, digits, `-` and `_` dropped;
/// a repeated anchor gets `-1`, `-2`, ….
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, Options::all()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(content) | Event::Code(content) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&content);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let id: String = heading
                    .take()
                    .unwrap_or_default()
                    .chars()
                    .filter_map(|c| match c {
                        c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
                        c if c.is_whitespace() => Some('-'),
                        _ => None,
                    })
                    .collect();
                let unique = (0..).map(|n| if n == 0 { id.clone() } else { format!("{id}-{n}") });
                let free = unique.into_iter().find(|candidate| !anchors.contains(candidate)).expect("a free anchor");
                anchors.insert(free);
            }
            _ => {}
        }
    }
    anchors
}

/// The link destinations of a Markdown text with their lines.
fn links(text: &str) -> Vec<(usize, String)> {
    Parser::new_ext(text, Options::all())
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some((line_of(text, range.start), dest_url.to_string()))
            }
            _ => None,
        })
        .collect()
}

/// The README and every chapter: (path from the repository's root, text).
fn documents() -> Vec<(PathBuf, String)> {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    std::iter::once((PathBuf::from("README.md"), readme))
        .chain(chapters().into_iter().map(|(name, text)| (Path::new("docs/src").join(name), text)))
        .collect()
}

#[test]
fn every_link_resolves_inside_the_repository() {
    let root = repo().canonicalize().expect("the repository");
    let mut broken = Vec::new();
    for (document, text) in documents() {
        for (line, dest) in links(&text) {
            let at = format!("{}:{line}: {dest}", document.display());
            if dest.contains("://") || dest.starts_with("mailto:") || dest.starts_with('/') {
                broken.push(format!("{at}: points outside the repository (a reader's clone has only the repository)"));
                continue;
            }
            let (file, anchor) = dest.split_once('#').unwrap_or((&dest, ""));
            let target =
                if file.is_empty() { repo().join(&document) } else { repo().join(&document).with_file_name(file) };
            let Ok(target) = target.canonicalize() else {
                broken.push(format!("{at}: no such file"));
                continue;
            };
            if !target.starts_with(&root) {
                broken.push(format!("{at}: leaves the repository"));
            } else if !anchor.is_empty() && target.extension().is_some_and(|ext| ext == "md") {
                let headings = anchors(&std::fs::read_to_string(&target).expect("a linked chapter"));
                if !headings.contains(anchor) {
                    broken.push(format!("{at}: {} has no heading #{anchor}", target.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn nothing_points_outside_the_repository() {
    let outside = ["../shared", "/root/", "/home/", "/work/"];
    let mut found = Vec::new();
    for (document, text) in documents() {
        for (index, line) in text.lines().enumerate() {
            for needle in outside.iter().filter(|needle| line.contains(*needle)) {
                found.push(format!("{}:{}: {needle}: {line}", document.display(), index + 1));
            }
        }
    }
    assert!(found.is_empty(), "the guide must not send readers outside the repository:\n{}", found.join("\n"));
}

#[test]
fn the_summary_lists_every_chapter_once() {
    let summary = std::fs::read_to_string(book().join("SUMMARY.md")).expect("docs/src/SUMMARY.md");
    let listed: Vec<String> = links(&summary).into_iter().map(|(_, dest)| dest).collect();
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(unique.len(), listed.len(), "SUMMARY.md lists a chapter twice: {listed:?}");
    let files: BTreeSet<String> = chapters().into_keys().filter(|name| name != "SUMMARY.md").collect();
    assert_eq!(unique, files, "SUMMARY.md must list every .md file of docs/src/ (and nothing else)");
}

/// The developing chapter's examples of a report kind and an output format are the code: each
/// ```` ```rust ```` block appears word for word in the last `*.rs` file the chapter names before it.
#[test]
fn the_developing_chapters_rust_examples_are_the_code() {
    let text = chapters().remove("developing.md").expect("docs/src/developing.md");
    let blocks: Vec<Block> = code_blocks(&text).into_iter().filter(|block| block.info.trim() == "rust").collect();
    assert!(!blocks.is_empty(), "docs/src/developing.md has no rust example to check");
    for block in blocks {
        let before: Vec<&str> = text.lines().take(block.line - 1).collect();
        let named = before.join("\n");
        let file = named
            .split('`')
            .rfind(|span| span.ends_with(".rs") && span.contains('/'))
            .unwrap_or_else(|| panic!("docs/src/developing.md:{}: name the example's file before it", block.line));
        let source = std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            source.contains(&block.text),
            "docs/src/developing.md:{}: the example is not in {file} word for word:\n{}",
            block.line,
            block.text
        );
    }
}
