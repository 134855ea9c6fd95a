//! The guide cannot drift from the code: every ```` ```console ```` block of `docs/src/` runs here
//! with the built binaries and the cached models, its printed output compared with the chapter's;
//! every relative link of the guide and the README resolves to a file (and a heading) of the
//! repository, nothing points outside it, and `SUMMARY.md` lists every chapter exactly once.
//!
//! A console block is a transcript: `$ command` lines (a `> ` line continues the command, as a
//! shell's second prompt shows a here-document or an open quote), each followed by what it prints,
//! stdout and stderr together. `...` alone on a line stands for any lines, `[..]` inside a line for
//! any text, `[CWD]` for the folder the chapter's examples run in. The blocks of one chapter run in
//! order in one fresh folder, each block in one bash, so a block can use what an earlier command
//! wrote. A command that exits non-zero must be followed by `$ echo $?` showing the code. Examples
//! that need a device or a long run are written as ```` ```sh ```` or ```` ```text ```` and not run.

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
