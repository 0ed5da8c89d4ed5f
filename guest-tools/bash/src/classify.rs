//! Whether a command line only reads (Claude Code's per-input
//! `isReadOnly` for Bash): every simple command in it is on [`READ_ONLY`]
//! with none of its writing options, joined only by pipes, `&&`, `||`,
//! `;` and newlines, with no redirection but to `/dev/null` or between
//! stdout and stderr, and no substitution, subshell, background job,
//! loop or function. Anything else is not read-only. A wrong "read-only"
//! could not write anyway: the host gives a read-only call read-only
//! handles.

/// Commands that only read, given none of the options [`writes`] names.
pub(crate) const READ_ONLY: &[&str] = &[
    "basename",
    "cat",
    "cksum",
    "cmp",
    "column",
    "comm",
    "cut",
    "date",
    "df",
    "diff",
    "dirname",
    "du",
    "echo",
    "egrep",
    "env",
    "expand",
    "false",
    "fgrep",
    "file",
    "find",
    "fold",
    "grep",
    "head",
    "hexdump",
    "jq",
    "join",
    "ls",
    "md5sum",
    "nl",
    "od",
    "paste",
    "printf",
    "pwd",
    "readlink",
    "realpath",
    "rev",
    "rg",
    "seq",
    "sha1sum",
    "sha256sum",
    "sleep",
    "sort",
    "stat",
    "strings",
    "tac",
    "tail",
    "test",
    "tr",
    "tree",
    "true",
    "type",
    "uniq",
    "unexpand",
    "wc",
    "which",
    "xxd",
    "yq",
    "[",
];

/// `git` subcommands that only read (given none of the options
/// [`program_reads`] refuses).
const GIT_READS: &[&str] = &[
    "blame",
    "cat-file",
    "describe",
    "diff",
    "grep",
    "log",
    "ls-files",
    "ls-tree",
    "rev-list",
    "rev-parse",
    "shortlog",
    "show",
    "status",
];

/// Programs whose `--version` only reads.
const VERSIONED: &[&str] = &[
    "cargo", "gcc", "go", "java", "node", "npm", "pytest", "python", "python3", "rustc", "uv",
];

/// Marks a place in a word where the shell expands something (`$…`, or a
/// glob at its start): what the word becomes is not known here.
const EXPANDS: char = '\u{1}';
/// Ends a quoted part of a word.
const QUOTED: char = '\u{0}';

/// Whether `args` make the read-only `command` write. A command that has
/// writing options is taken to write when an argument is expanded by the
/// shell (`find . $X` with `X=-delete`), since the classifier cannot know
/// what it becomes.
fn writes(command: &str, args: &[String]) -> bool {
    let has = |names: &[&str]| {
        args.iter().any(|a| {
            names
                .iter()
                .any(|n| a == n || a.starts_with(&format!("{n}=")))
        })
    };
    let short_flag = |letter: char| {
        args.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(letter))
    };
    let operands = || args.iter().filter(|a| !a.starts_with('-')).count();
    let expanded = || args.iter().any(|a| a.contains(EXPANDS));
    match command {
        "find" => {
            expanded()
                || has(&[
                    "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0",
                    "-fprintf", "-fls",
                ])
        }
        "sort" => expanded() || has(&["--output"]) || short_flag('o'),
        // `uniq IN OUT` writes OUT.
        "uniq" => expanded() || operands() > 1,
        "yq" => expanded() || has(&["--inplace"]) || short_flag('i'),
        "date" => expanded() || has(&["-s", "--set"]),
        // `env` with arguments runs a command.
        "env" => !args.is_empty(),
        _ => false,
    }
}

/// Whether the native program `name` with `args` only reads: `git` with a
/// reading subcommand and no option that writes a file or starts another
/// program (`--output`, `--ext-diff`, `-O`, a `-c` setting), or a known
/// program asked only for its version. Whether the program is granted is
/// the host's to say, not this.
fn program_reads(name: &str, args: &[String]) -> bool {
    if args.iter().any(|a| a.contains(EXPANDS)) {
        return false;
    }
    let version = matches!(args, [a] if a == "--version" || a == "-V");
    if name == "git" && !version {
        let mut rest = args.iter().skip_while(|a| *a == "--no-pager");
        let Some(sub) = rest.next() else {
            return false;
        };
        // Long options may be abbreviated (`--open` for
        // `--open-files-in-pager`, `--out` for `--output`).
        let refused = |a: &String| {
            a.starts_with("--out")
                || a == "--ext-diff"
                || (sub == "grep" && a.starts_with("--o"))
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('O'))
        };
        return GIT_READS.contains(&sub.as_str()) && !rest.any(refused);
    }
    version && (name == "git" || VERSIONED.contains(&name))
}

/// A word or an operator of a command line.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    /// `|`, `||`, `&&`, `;` or a newline: between simple commands.
    Join,
    /// A redirection that only discards or merges output.
    HarmlessRedirect,
    /// Anything that may write or run other code: the line is not read-only.
    Unsafe,
}

/// Splits `line` into tokens, as far as classification needs.
fn tokens(line: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut chars = line.chars().peekable();
    let flush = |word: &mut String, out: &mut Vec<Token>| {
        if !word.is_empty() {
            out.push(Token::Word(std::mem::take(word)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
                word.push(QUOTED);
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '`' => out.push(Token::Unsafe),
                        '$' if chars.peek() == Some(&'(') => out.push(Token::Unsafe),
                        '$' => {
                            word.push(EXPANDS);
                            word.push(c);
                        }
                        '\\' => {
                            if let Some(next) = chars.next() {
                                word.push(next);
                            }
                        }
                        _ => word.push(c),
                    }
                }
                word.push(QUOTED);
            }
            '\\' => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            ' ' | '\t' => flush(&mut word, &mut out),
            '\n' | ';' => {
                flush(&mut word, &mut out);
                out.push(Token::Join);
            }
            '|' => {
                flush(&mut word, &mut out);
                if chars.peek() == Some(&'|') {
                    chars.next();
                }
                out.push(Token::Join);
            }
            '&' => {
                flush(&mut word, &mut out);
                if chars.peek() == Some(&'&') {
                    chars.next();
                    out.push(Token::Join);
                } else {
                    // A background job.
                    out.push(Token::Unsafe);
                }
            }
            '>' => {
                // `2>&1`, `>&2`, `>/dev/null`, `2>/dev/null` only.
                let fd = std::mem::take(&mut word);
                if !(fd.is_empty() || fd == "1" || fd == "2") {
                    out.push(Token::Unsafe);
                }
                if chars.peek() == Some(&'>') {
                    chars.next();
                }
                if chars.peek() == Some(&'&') {
                    chars.next();
                    let target: String =
                        std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_digit())).collect();
                    if target == "1" || target == "2" {
                        out.push(Token::HarmlessRedirect);
                    } else {
                        out.push(Token::Unsafe);
                    }
                    continue;
                }
                while chars.peek() == Some(&' ') {
                    chars.next();
                }
                let target: String = std::iter::from_fn(|| {
                    chars.next_if(|c| !c.is_whitespace() && !";|&".contains(*c))
                })
                .collect();
                if target == "/dev/null" {
                    out.push(Token::HarmlessRedirect);
                } else {
                    out.push(Token::Unsafe);
                }
            }
            '<' => {
                // Input only; but `<(...)` runs a command.
                flush(&mut word, &mut out);
                if chars.peek() == Some(&'(') {
                    out.push(Token::Unsafe);
                }
            }
            '`' | '(' | ')' | '{' | '}' => out.push(Token::Unsafe),
            '$' if chars.peek() == Some(&'(') => out.push(Token::Unsafe),
            '$' => {
                word.push(EXPANDS);
                word.push(c);
            }
            '*' | '?' | '[' if word.is_empty() => {
                word.push(EXPANDS);
                word.push(c);
            }
            _ => word.push(c),
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Whether `line` only reads.
pub(crate) fn is_read_only(line: &str) -> bool {
    let tokens = tokens(line);
    if tokens.contains(&Token::Unsafe) {
        return false;
    }
    let mut command: Vec<String> = Vec::new();
    let mut simple_commands = Vec::new();
    for token in tokens {
        match token {
            Token::Word(w) => command.push(w.replace(QUOTED, "")),
            Token::Join => simple_commands.push(std::mem::take(&mut command)),
            Token::HarmlessRedirect => {}
            Token::Unsafe => return false,
        }
    }
    simple_commands.push(command);
    let mut any = false;
    for words in simple_commands {
        // Leading assignments (`LC_ALL=C sort`) set the command's
        // environment only.
        let assigned = words
            .iter()
            .take_while(|w| w.split_once('=').is_some_and(|(n, _)| is_name(n)))
            .count();
        let mut words = words.into_iter().skip(assigned);
        let Some(name) = words.next().map(|w| w.replace(EXPANDS, "")) else {
            continue;
        };
        let args: Vec<String> = words.collect();
        let builtin_reads = READ_ONLY.contains(&name.as_str()) && !writes(&name, &args);
        // A program's environment can make it run more (`GIT_EXTERNAL_DIFF`,
        // `GIT_CONFIG_*`), so only one given none reads.
        if !builtin_reads && (assigned > 0 || !program_reads(&name, &args)) {
            return false;
        }
        any = true;
    }
    any
}

/// Whether `exit_code` of `line` is an answer rather than a failure, as
/// Claude Code's Bash reads them: 0 always; 1 when the line's last command
/// is a search that found nothing (`grep`, `rg`), a comparison that found a
/// difference (`diff`, `cmp`) or a test that was false (`test`, `[`).
pub(crate) fn exit_is_an_answer(line: &str, exit_code: i32) -> bool {
    const ONE_ANSWERS: &[&str] = &["grep", "egrep", "fgrep", "rg", "diff", "cmp", "test", "["];
    if exit_code == 0 {
        return true;
    }
    let mut last = None;
    let mut at_start = true;
    for token in tokens(line) {
        match token {
            Token::Word(w) if at_start => {
                let w = w.replace([QUOTED, EXPANDS], "");
                if !w.split_once('=').is_some_and(|(n, _)| is_name(n)) {
                    last = Some(w);
                    at_start = false;
                }
            }
            Token::Join => at_start = true,
            _ => {}
        }
    }
    exit_code == 1 && last.is_some_and(|name| ONE_ANSWERS.contains(&name.as_str()))
}

fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::{exit_is_an_answer, is_read_only};

    #[test]
    fn reading_lines_are_read_only() {
        for line in [
            "ls -la",
            "cat a.txt | grep foo | wc -l",
            "grep -rn 'fn main' src 2>/dev/null",
            "find . -name '*.rs' -type f | sort | uniq -c",
            "jq '.items[] | .name' data.json",
            "LC_ALL=C sort -u names.txt",
            "head -n 5 a; tail -n 5 b && echo done || echo failed",
            "wc -l src/*.rs 2>&1",
            "echo \"a > b\"",
            "grep '>' file",
            "[ -f Cargo.toml ] && echo yes",
            "grep -n $PATTERN src/main.rs",
            "find . -name '*.rs'",
            "uniq -c names.txt",
            "yq .name config.yaml",
            "env",
            "git status --short",
            "git log --oneline | head -3",
            "git --no-pager diff HEAD~1 -- src",
            "git show HEAD:README.md | wc -l",
            "python3 --version && node --version",
            "git --version",
        ] {
            assert!(is_read_only(line), "{line}");
        }
    }

    #[test]
    fn a_search_that_found_nothing_is_an_answer() {
        assert!(exit_is_an_answer("grep -rn needle src", 1));
        assert!(exit_is_an_answer("cat a | LC_ALL=C grep x", 1));
        assert!(exit_is_an_answer("[ -f x ]", 1));
        assert!(!exit_is_an_answer("grep x a; cat missing", 1));
        assert!(!exit_is_an_answer("grep x missing", 2));
        assert!(!exit_is_an_answer("false", 1));
    }

    #[test]
    fn anything_that_may_write_or_run_more_is_not() {
        for line in [
            "echo hi > out.txt",
            "cat a >> b",
            "rm -rf build",
            "find . -name '*.tmp' -delete",
            "find . -exec rm {} ;",
            "sort -o out in",
            "sort --output=out in",
            "echo $(rm x)",
            "echo `rm x`",
            "ls | tee listing",
            "sed -i s/a/b/ f",
            "awk '{print > \"f\"}' x",
            "cd src",
            "export X=1",
            "(cd src && ls)",
            "sleep 10 &",
            "xargs rm < list",
            "cat <(rm x)",
            "for f in *; do cat $f; done",
            "X=1",
            "",
            "ls 3>out",
            "find . $X",
            "find . *",
            "sort \"$OUT\" in",
            "uniq in out",
            "yq -i .a=1 f.yaml",
            "env rm x",
            "$CMD x",
            "git commit -am x",
            "git add .",
            "git",
            "git -c core.pager=sh log",
            "git diff --output=patch",
            "git diff --ext-diff",
            "git grep -O x",
            "git grep --open=vim x",
            "git diff --out=patch",
            "GIT_EXTERNAL_DIFF=x git diff",
            "GIT_CONFIG_COUNT=1 git status",
            "git log $OPTS",
            "python3 gen.py",
            "python3 -c 'print(1)'",
            "node --version extra",
            "make",
        ] {
            assert!(!is_read_only(line), "{line}");
        }
    }
}
