//! Running files against reference verdicts: kinds files, one row per
//! test, and the conformance summary.

use crate::ast::Parsed;
use crate::run::{run_with, Verdict};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A kinds file: `NAME  Allowed|Forbidden|Required` per line.
#[derive(Clone, Debug, Default)]
pub struct Kinds(BTreeMap<String, Verdict>);

/// A file that cannot be read or parsed: one line naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub msg: String,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.path.display(), self.msg),
            None => write!(f, "{}: {}", self.path.display(), self.msg),
        }
    }
}

fn read(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|e| FileError {
        path: path.to_owned(),
        line: None,
        msg: format!("cannot read: {e}"),
    })
}

impl Kinds {
    /// Parse a kinds file.
    pub fn load(path: &Path) -> Result<Kinds, FileError> {
        let mut k = Kinds::default();
        for (i, line) in read(path)?.lines().enumerate() {
            let mut words = line.split_whitespace();
            let (Some(name), Some(kind), None) = (words.next(), words.next(), words.next()) else {
                if line.trim().is_empty() || line.trim_start().starts_with('#') {
                    continue;
                }
                return Err(FileError {
                    path: path.to_owned(),
                    line: Some(i + 1),
                    msg: format!("expected 'NAME KIND', got {:?}", line.trim()),
                });
            };
            let v = Verdict::parse(kind).ok_or_else(|| FileError {
                path: path.to_owned(),
                line: Some(i + 1),
                msg: format!("unknown kind {kind:?} (Allowed, Forbidden, Required)"),
            })?;
            k.0.insert(name.to_owned(), v);
        }
        Ok(k)
    }
    pub fn get(&self, name: &str) -> Option<Verdict> {
        self.0.get(name).copied()
    }
}

/// One test's row.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub name: String,
    pub arch: Option<&'static str>,
    pub verdict: Option<Verdict>,
    pub expected: Option<Verdict>,
    /// `None` when there is no verdict or no expectation to compare.
    pub agrees: Option<bool>,
    /// Why the model cannot run this test (`None` when it can).
    pub unsupported: Option<String>,
    #[serde(skip)]
    pub states: usize,
    #[serde(skip)]
    pub path: PathBuf,
}

/// Parse and run one file; `kinds` gives the expected verdict; `reduce`:
/// with the partial-order reduction ([`crate::run::run_with`]).
pub fn run_file(path: &Path, kinds: &Reference, reduce: bool) -> Result<Row, FileError> {
    let text = read(path)?;
    let parsed = crate::parse::parse(&text).map_err(|e| FileError {
        path: path.to_owned(),
        line: Some(e.line),
        msg: e.msg,
    })?;
    let (name, arch, result) = match parsed {
        Parsed::Test(t) => (t.name.clone(), Some(t.arch), run_with(&t, reduce)),
        Parsed::Unsupported { name, arch, reason } => (name, arch, Err(reason)),
    };
    let expected = kinds.get(path, &name);
    let (verdict, states, unsupported) = match result {
        Ok(r) => (Some(r.verdict), r.states, None),
        Err(why) => (None, 0, Some(why)),
    };
    Ok(Row {
        agrees: verdict.zip(expected).map(|(v, e)| v == e),
        name,
        arch: arch.map(|a| a.name()),
        verdict,
        expected,
        unsupported,
        states,
        path: path.to_owned(),
    })
}

/// The `.litmus` files a command line names: files as given, directories
/// searched (not recursively), sorted. Other files are returned apart.
pub fn expand(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<PathBuf>), FileError> {
    let (mut tests, mut other) = (Vec::new(), Vec::new());
    for p in paths {
        if p.is_dir() {
            let dir = std::fs::read_dir(p).map_err(|e| FileError {
                path: p.clone(),
                line: None,
                msg: format!("cannot read directory: {e}"),
            })?;
            let mut found: Vec<PathBuf> = dir
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "litmus"))
                .collect();
            found.sort();
            tests.extend(found);
        } else if p.extension().is_some_and(|x| x == "litmus") || !p.exists() {
            tests.push(p.clone());
        } else {
            other.push(p.clone());
        }
    }
    Ok((tests, other))
}

/// Where each test's expected verdict comes from: one kinds file for
/// every test (`--kinds`), or the `kinds.txt` beside each test (names
/// repeat across catalogues: `LB` is Allowed on Arm, Forbidden on x86).
#[derive(Clone, Debug)]
pub enum Reference {
    One(Kinds),
    PerDirectory(BTreeMap<PathBuf, Kinds>),
}

impl Reference {
    /// The kinds files beside `tests` (`kinds.txt` in each one's directory).
    pub fn beside(tests: &[PathBuf]) -> Result<Reference, FileError> {
        let mut by_dir = BTreeMap::new();
        for dir in tests.iter().filter_map(|t| t.parent()) {
            let f = dir.join("kinds.txt");
            if !by_dir.contains_key(dir) && f.exists() {
                by_dir.insert(dir.to_owned(), Kinds::load(&f)?);
            }
        }
        Ok(Reference::PerDirectory(by_dir))
    }
    /// The expected verdict of test `name` in file `path`.
    pub fn get(&self, path: &Path, name: &str) -> Option<Verdict> {
        match self {
            Reference::One(k) => k.get(name),
            Reference::PerDirectory(m) => path.parent().and_then(|d| m.get(d)?.get(name)),
        }
    }
}

/// Run every file (in parallel; rows in the files' order).
pub fn run_all(tests: &[PathBuf], kinds: &Reference, reduce: bool) -> Result<Vec<Row>, FileError> {
    tests
        .par_iter()
        .map(|p| run_file(p, kinds, reduce))
        .collect()
}

/// Per directory: tests, supported, agreeing, disagreeing, and the
/// unsupported reasons with their counts.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub tests: usize,
    pub supported: usize,
    pub agree: usize,
    pub disagree: usize,
    /// Supported tests with no expected verdict.
    pub unchecked: usize,
    /// States explored, summed over the supported tests.
    pub states: usize,
    pub unsupported: BTreeMap<String, usize>,
}

/// Summaries keyed by each file's directory name.
pub fn summarise(rows: &[Row]) -> BTreeMap<String, Summary> {
    let mut out: BTreeMap<String, Summary> = BTreeMap::new();
    for r in rows {
        let dir = r
            .path
            .parent()
            .and_then(|d| d.file_name())
            .map_or(String::from("."), |d| d.to_string_lossy().into_owned());
        let s = out.entry(dir).or_default();
        s.tests += 1;
        s.states += r.states;
        match (&r.unsupported, r.agrees) {
            (Some(why), _) => *s.unsupported.entry(reason_class(why)).or_default() += 1,
            (None, Some(true)) => s.agree += 1,
            (None, Some(false)) => s.disagree += 1,
            (None, None) => s.unchecked += 1,
        }
        s.supported += usize::from(r.unsupported.is_none());
    }
    out
}

/// A reason without its particulars, for counting ("instruction TLBI
/// VAE1IS, X1" -> "instruction TLBI").
pub fn reason_class(why: &str) -> String {
    why.split([' ', ',', '('])
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}
