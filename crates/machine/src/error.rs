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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(s) => write!(f, "bad scenario: {s}"),
            Error::Range(s) => write!(f, "out of range: {s}"),
            Error::TooBig(s) => write!(f, "refused: {s}"),
            Error::Io(s) => write!(f, "cannot read {s}"),
            Error::Write(s) => write!(f, "cannot write {s}"),
            Error::Unsupported(s) => write!(f, "unsupported: {s}"),
            Error::Parse(s) => write!(f, "cannot parse {s}"),
        }
    }
}

impl std::error::Error for Error {}
