//! Quoting for the device shell: every argument that reaches `adb shell` goes through here, so a
//! model called `a b;rm -rf $(x).onnx` or an odd serial stays one plain word.

use std::borrow::Cow;

/// Quotes one word for a POSIX shell (Android's mksh, a Linux board's /bin/sh).
pub fn quote(word: &str) -> Cow<'_, str> {
    shell_words::quote(word)
}

/// Joins words into one command line, each quoted.
pub fn command_line<S: AsRef<str>>(words: impl IntoIterator<Item = S>) -> String {
    shell_words::join(words)
}

/// `NAME=value` with the value quoted, for an environment prefix of a command.
pub fn assignment(name: &str, value: &str) -> String {
    format!("{name}={}", quote(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::{DeviceShell, LocalShell};
    use std::process::Command;
    use std::time::Duration;

    /// The shells the words must survive: this machine's /bin/sh and a phone's (mksh, toybox).
    fn run_in_each_shell(line: &str) -> String {
        let local = Command::new("/bin/sh").arg("-c").arg(line).output().unwrap();
        assert!(local.status.success(), "{}", String::from_utf8_lossy(&local.stderr));
        let phone = LocalShell.run_ok(line, Duration::from_secs(30), "quote test").unwrap();
        let local = String::from_utf8(local.stdout).unwrap();
        assert_eq!(local, phone, "/bin/sh and the phone shell differ");
        local
    }

    /// Runs `printf '%s\n' <words>` through /bin/sh and the phone shell and returns the words they saw.
    fn words_seen_by_sh(line: &str) -> Vec<String> {
        run_in_each_shell(&format!("printf '%s\\n' {line}")).lines().map(str::to_string).collect()
    }

    #[test]
    fn hostile_words_reach_the_shell_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let canary = dir.path().join("canary");
        std::fs::write(&canary, "alive").unwrap();
        let hostile = [
            "a b;rm -rf $(x).onnx".to_string(),
            format!("x'; rm {}; echo '", canary.display()),
            "`touch pwned`".to_string(),
            "$HOME \\ \" ' *".to_string(),
            "-n".to_string(),
            String::new(),
        ];
        assert_eq!(words_seen_by_sh(&command_line(&hostile)), hostile);
        assert!(canary.exists(), "a quoted word was executed");
    }

    #[test]
    fn assignment_keeps_semicolons_in_the_value() {
        let line = format!("{} sh -c 'printf %s \"$V\"'", assignment("V", "/a;/b c;$(d)"));
        assert_eq!(run_in_each_shell(&line), "/a;/b c;$(d)");
    }
}
