//! The commands npugate's device-side scripts may use: what a production phone's `adb shell`
//! offers — mksh's builtins and toybox's applets — and nothing a Debian box adds (bash, dash,
//! GNU coreutils, awk). Debian's toybox (the test rig's) is the floor: it has no `tr`, so no
//! script uses one. The probe checks every applet on each device and names the missing ones.

/// mksh builtins the scripts use (also builtins of dash and bash, the shells of Linux boards).
pub const SHELL_BUILTINS: &[&str] =
    &[".", "[", "break", "cd", "command", "continue", "echo", "exit", "kill", "read", "set", "test", "true", "false"];

/// toybox applets the scripts use; each must be on the device's PATH.
pub const APPLETS: &[&str] = &[
    "cat",
    "chmod",
    "cut",
    "date",
    "getconf",
    "grep",
    "ln",
    "mkdir",
    "mv",
    "printf",
    "rm",
    "sed",
    "sha256sum",
    "sleep",
    "stat",
    "uname",
];

/// Android's own commands the scripts use when present (a Linux board has none).
pub const ANDROID_COMMANDS: &[&str] = &["dumpsys", "getprop"];

/// The commands of `script` outside the device command set ([`SHELL_BUILTINS`], [`APPLETS`],
/// [`ANDROID_COMMANDS`] and the script's own functions), in order of appearance. A small scanner
/// of the POSIX shell grammar the scripts are written in: it finds the word in command position of
/// every simple command, inside `$( … )` substitutions too, skipping assignments, redirections,
/// keywords, quoted text and `for` headers.
pub fn outside_the_set(script: &str) -> Vec<String> {
    let functions = function_names(script);
    let mut found: Vec<String> = Vec::new();
    for word in command_words(script) {
        let known = SHELL_BUILTINS.iter().chain(APPLETS).chain(ANDROID_COMMANDS).any(|c| *c == word)
            || functions.contains(&word);
        if !known && !found.contains(&word) {
            found.push(word);
        }
    }
    found
}

/// Names of the functions `script` defines (`name() {`, also after `&&`, `||` or `&`).
fn function_names(script: &str) -> Vec<String> {
    script
        .split(['\n', ';', '&', '|'])
        .filter_map(|part| {
            let (name, rest) = part.trim().split_once("()")?;
            let is_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            (is_name && rest.trim_start().starts_with('{')).then(|| name.to_string())
        })
        .collect()
}

/// The word in command position of every simple command of `script`.
fn command_words(script: &str) -> Vec<String> {
    let chars: Vec<char> = script.chars().collect();
    let mut scanner = Scanner { chars: &chars, at: 0, commands: Vec::new() };
    scanner.commands_until(None);
    scanner.commands
}

/// What a command word that is quoted or expanded (`"$x" …`) is reported as.
const QUOTED_COMMAND: &str = "(a quoted or expanded command word)";

struct Scanner<'a> {
    chars: &'a [char],
    at: usize,
    commands: Vec<String>,
}

/// Where one simple command stands while its words are read.
#[derive(PartialEq)]
enum Position {
    /// Its command word is still to come.
    Expecting,
    /// The next word is a redirection's target.
    RedirectTarget,
    /// The command word was seen (or the words are a `for` header): the rest are arguments.
    Done,
}

impl Scanner<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    /// Reads commands up to `end` (`)` of a substitution or subshell) or the end of the script.
    fn commands_until(&mut self, end: Option<char>) {
        let mut position = Position::Expecting;
        let mut word = String::new();
        let mut plain = true;
        while let Some(c) = self.peek(0) {
            if Some(c) == end && word.is_empty() {
                self.at += 1;
                break;
            }
            match c {
                '\'' => {
                    self.at += 1;
                    while self.peek(0).is_some_and(|q| q != '\'') {
                        self.at += 1;
                    }
                    self.at += 1;
                    word.push('\'');
                    plain = false;
                }
                '"' => {
                    self.at += 1;
                    self.double_quoted();
                    word.push('"');
                    plain = false;
                }
                '\\' => {
                    self.at += 2;
                    word.push('\\');
                    plain = false;
                }
                '$' => {
                    self.dollar();
                    word.push('$');
                    plain = false;
                }
                '<' | '>' => {
                    // `2>&1`, `>file`, `> file`: a redirection, its digits included.
                    let digits = !word.is_empty() && word.chars().all(|d| d.is_ascii_digit());
                    if !word.is_empty() && !digits {
                        self.finish(&mut word, &mut plain, &mut position);
                    }
                    word.clear();
                    while self.peek(0).is_some_and(|r| matches!(r, '<' | '>' | '&' | '|')) {
                        self.at += 1;
                    }
                    if self.peek(0).is_some_and(|t| t.is_ascii_digit() || t == '-') && self.chars[self.at - 1] == '&' {
                        self.at += 1;
                    } else if position != Position::Done {
                        position = Position::RedirectTarget;
                    }
                    plain = true;
                }
                ' ' | '\t' => {
                    self.at += 1;
                    self.finish(&mut word, &mut plain, &mut position);
                }
                '(' if self.peek(1) == Some(')') && !word.is_empty() && position == Position::Expecting => {
                    // `name() {`: a function definition, its name no command.
                    self.at += 2;
                    word.clear();
                    plain = true;
                }
                '\n' | ';' | '&' | '|' | '(' | ')' => {
                    self.at += 1;
                    self.finish(&mut word, &mut plain, &mut position);
                    if c == '(' {
                        self.commands_until(Some(')'));
                    } else if c == ')' && end.is_some() {
                        break;
                    }
                    position = Position::Expecting;
                }
                '#' if word.is_empty() => {
                    while self.peek(0).is_some_and(|n| n != '\n') {
                        self.at += 1;
                    }
                }
                _ => {
                    self.at += 1;
                    word.push(c);
                }
            }
        }
        self.finish(&mut word, &mut plain, &mut position);
    }

    /// Skips a double-quoted string, reading the commands of its substitutions.
    fn double_quoted(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.at += 1;
                    return;
                }
                '\\' => self.at += 2,
                '$' => self.dollar(),
                _ => self.at += 1,
            }
        }
    }

    /// Skips `$name`, `${…}` and `$((…))`; reads the commands of `$(…)`.
    fn dollar(&mut self) {
        self.at += 1;
        match (self.peek(0), self.peek(1)) {
            (Some('('), Some('(')) => self.skip_balanced('(', ')'),
            (Some('('), _) => {
                self.at += 1;
                self.commands_until(Some(')'));
            }
            (Some('{'), _) => self.skip_balanced('{', '}'),
            _ => {}
        }
    }

    fn skip_balanced(&mut self, open: char, close: char) {
        let mut depth = 0;
        while let Some(c) = self.peek(0) {
            self.at += 1;
            if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return;
                }
            }
        }
    }

    /// Ends the current word: the command word when the command still expects one.
    fn finish(&mut self, word: &mut String, plain: &mut bool, position: &mut Position) {
        if word.is_empty() {
            return;
        }
        let text = std::mem::take(word);
        let was_plain = std::mem::replace(plain, true);
        match position {
            Position::RedirectTarget => *position = Position::Expecting,
            Position::Done => {}
            Position::Expecting => {
                let assignment = text.split_once('=').is_some_and(|(name, _)| {
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
                match text.as_str() {
                    _ if assignment => {}
                    "if" | "then" | "else" | "elif" | "fi" | "do" | "done" | "while" | "until" | "!" | "{" | "}" => {}
                    "for" | "case" | "in" | "esac" => *position = Position::Done,
                    _ => {
                        // A quoted or expanded command word is not a name the set can hold.
                        self.commands.push(if was_plain { text } else { QUOTED_COMMAND.to_string() });
                        *position = Position::Done;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_words_are_found_in_pipelines_substitutions_and_conditions() {
        let script = r#"f() { echo "$(tr -d x </a 2>/dev/null)"; }
X=1 Y="$(awk '{print}' b)" sed -n p c | cut -f1 >out 2>&1
if [ -d "$d" ] && grep -q y e; then for z in a*; do f "$z"; done; fi
h=$(date +%s) && echo "${x%/}" $((i+1)) > "$L/x" && bash -c 'true'
# comment: perl
"#;
        assert_eq!(
            command_words(script),
            ["echo", "tr", "awk", "sed", "cut", "[", "grep", "f", "date", "echo", "bash"]
        );
        assert_eq!(outside_the_set(script), ["tr", "awk", "bash"]);
        assert_eq!(outside_the_set("\"$chroot\" x"), [QUOTED_COMMAND]);
    }
}
