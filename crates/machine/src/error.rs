//! One error type for bad input: every variant prints as one line that names
//! the problem, and the CLI maps it to exit status 2.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A scenario or profile that does not parse or names an unknown key.
    Config(String),
    /// A value out of its allowed range.
    Range(String),
    /// The scenario would need more memory than allowed.
    TooBig(String),
    /// A file could not be read.
    Io(String),
    /// A file or directory could not be written or made.
    Write(String),
    /// The host cannot run what was asked.
    Unsupported(String),
    /// An input file (a litmus test, a kinds file) is malformed: the file,
    /// the line and what is wrong.
    Parse(String),
}

impl fmt::Display for Error {
    /// One line whatever the input held: control characters a message
    /// echoes from its input (a newline in a `--set` value, an escape in a
    /// TOML string) are printed escaped (`\n`, `\u{1b}`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, s) = match self {
            Error::Config(s) => ("bad scenario: ", s),
            Error::Range(s) => ("out of range: ", s),
            Error::TooBig(s) => ("refused: ", s),
            Error::Io(s) => ("cannot read ", s),
            Error::Write(s) => ("cannot write ", s),
            Error::Unsupported(s) => ("unsupported: ", s),
            Error::Parse(s) => ("cannot parse ", s),
        };
        f.write_str(what)?;
        for c in s.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn control_characters_from_the_input_are_escaped() {
        let e = Error::Config("machine.cpus=4\n\r\u{1b}[31m\tx: not a number".into());
        let m = e.to_string();
        assert_eq!(
            m,
            "bad scenario: machine.cpus=4\\n\\r\\u{1b}[31m\\tx: not a number"
        );
        assert!(!m.chars().any(char::is_control));
    }
}
