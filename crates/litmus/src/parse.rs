//! The herd7 litmus format: header, initial state, program table, condition.
//!
//! ```text
//! AArch64 MP                      <- ARCH NAME
//! "doc string"                    <- optional: a doc string, Key=Value lines
//! { 0:X1=x; 0:X3=y; int z=1; }    <- initial state, entries split by ';'
//!  P0          | P1          ;    <- thread columns
//!  MOV W0,#1   | LDR W0,[X3] ;    <- one row per line, ';'-terminated
//!  STR W0,[X1] | L0:         ;    <- a label marks the next instruction
//! locations [x;]                  <- optional, ignored
//! exists (1:X0=1 /\ [x]=0)        <- exists / ~exists / forall
//! ```
//!
//! `(* comments *)` (nested) are blanked first, keeping line numbers. A test
//! the models cannot express is [`Parsed::Unsupported`] with a reason naming
//! the first offending thing; a malformed file is a [`ParseError`] with the
//! line. Messages are one line: input text in them goes through
//! `show`, which escapes control characters.

use crate::ast::{
    Arch, Atom, FaultKind, Instr, ParseError, Parsed, Prop, PteLit, Quant, Test, Thread, Value,
    Vmsa,
};
use crate::isa::{self, intern, is_ident, named, parse_int, show, Ctx, DecodeError, RegName};
use std::collections::HashMap;

/// Why parsing stopped before the end.
enum Stop {
    Unsupported(String),
    Malformed(ParseError),
}

type Res<T> = Result<T, Stop>;

/// A malformed-input stop at `line`.
fn bad<T>(line: usize, msg: String) -> Res<T> {
    Err(Stop::Malformed(ParseError { line, msg }))
}

/// An unsupported-feature stop.
fn unsup<T>(reason: String) -> Res<T> {
    Err(Stop::Unsupported(reason))
}

/// Parse one litmus file.
pub fn parse(text: &str) -> Result<Parsed, ParseError> {
    let src = Source::new(text)?;
    let (arch, name) = first_line(&src)?;
    let arch = match arch {
        Ok(arch) => arch,
        Err(word) => {
            let reason = format!("architecture {}", show(&word));
            return Ok(Parsed::Unsupported {
                name,
                arch: None,
                reason,
            });
        }
    };
    match body(&src, arch, &name) {
        Ok(test) => Ok(Parsed::Test(test)),
        Err(Stop::Unsupported(reason)) => Ok(Parsed::Unsupported {
            name,
            arch: Some(arch),
            reason,
        }),
        Err(Stop::Malformed(e)) => Err(e),
    }
}

/// The text with comments blanked, and where each line starts.
struct Source {
    text: String,
    starts: Vec<usize>,
}

impl Source {
    fn new(raw: &str) -> Result<Source, ParseError> {
        let text = strip_comments(raw)?;
        let breaks = text.match_indices('\n').map(|(i, _)| i + 1);
        let starts = std::iter::once(0).chain(breaks).collect();
        Ok(Source { text, starts })
    }

    /// The 1-based line of a byte offset.
    fn line(&self, off: usize) -> usize {
        self.starts.partition_point(|&s| s <= off).max(1)
    }

    /// The offset of the end of the line holding `off` (its `\n` or the end).
    fn line_end(&self, off: usize) -> usize {
        self.text[off..]
            .find('\n')
            .map_or(self.text.len(), |i| off + i)
    }

    /// The last line with text on it (for "missing ..." at the end).
    fn eof_line(&self) -> usize {
        self.line(self.text.trim_end().len().saturating_sub(1))
    }

    /// The offset of the next non-whitespace character at or after `off`.
    fn skip_ws(&self, off: usize) -> usize {
        let rest = &self.text[off..];
        off + (rest.len() - rest.trim_start().len())
    }

    /// The rest of the line from `off`, trimmed, made safe for a message.
    fn snippet(&self, off: usize) -> String {
        named(self.text[off..self.line_end(off)].trim())
    }
}

/// Blank `(* ... *)` comments (nested, as in herd7) to spaces, keeping
/// newlines so that line numbers stay right.
fn strip_comments(raw: &str) -> Result<String, ParseError> {
    let mut out = String::with_capacity(raw.len());
    let (mut depth, mut line, mut open_line) = (0usize, 1, 1);
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '(' && chars.peek() == Some(&'*') {
            chars.next();
            if depth == 0 {
                open_line = line;
            }
            depth += 1;
            out.push_str("  ");
        } else if depth > 0 && c == '*' && chars.peek() == Some(&')') {
            chars.next();
            depth -= 1;
            out.push_str("  ");
        } else if c == '\n' {
            line += 1;
            out.push('\n');
        } else {
            out.push(if depth > 0 { ' ' } else { c });
        }
    }
    if depth > 0 {
        let msg = "comment '(*' is never closed by '*)'".to_string();
        return Err(ParseError {
            line: open_line,
            msg,
        });
    }
    Ok(out)
}

/// Line 1, `ARCH NAME`: the architecture (or the unknown word) and the name.
fn first_line(src: &Source) -> Result<(Result<Arch, String>, String), ParseError> {
    let line = src.text[..src.line_end(0)].trim();
    let fail = |msg: String| Err(ParseError { line: 1, msg });
    if line.is_empty() {
        return fail("empty first line: expected ARCH NAME".to_string());
    }
    let (word, name) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    if name.trim().is_empty() {
        return fail(format!("missing test name after {}", show(word)));
    }
    let arch = match word.to_ascii_uppercase().as_str() {
        "AARCH64" => Ok(Arch::AArch64),
        "RISCV" => Ok(Arch::RiscV),
        "X86" => Ok(Arch::X86),
        _ => Err(word.to_string()),
    };
    Ok((arch, name.trim().to_string()))
}

/// Everything after line 1.
fn body(src: &Source, arch: Arch, name: &str) -> Res<Test> {
    let mut b = Builder {
        arch,
        locs: Vec::new(),
        init_mem: Vec::new(),
        threads: Vec::new(),
        head: Header::default(),
        init_pte: Vec::new(),
        vmsa: false,
    };
    let open = header(src, &mut b.head)?;
    let (inits, after) = init_state(src, open, &mut b)?;
    let (table, after) = program(src, after)?;
    b.threads = vec![Thread::default(); table.threads];
    b.apply_inits(inits)?;
    b.decode(&table)?;
    let (quant, cond) = Condition::new(src, after, &mut b).parse()?;
    let vmsa = b.vmsa_settings()?;
    Ok(Test {
        name: name.to_string(),
        arch,
        locs: b.locs,
        init_mem: b.init_mem,
        threads: b.threads,
        vmsa,
        quant,
        cond,
    })
}

/// What the header's `Key=Value` lines say about VMSA.
#[derive(Default)]
struct Header {
    /// `Variant=vmsa` (or another VMSA variant).
    vmsa: bool,
    fatal: bool,
    /// `TTHM` entries: (thread or all, HA, HD).
    tthm: Vec<(Option<usize>, bool, bool)>,
}

/// The test as it is assembled.
struct Builder {
    arch: Arch,
    locs: Vec<String>,
    init_mem: Vec<(String, Value)>,
    threads: Vec<Thread>,
    head: Header,
    init_pte: Vec<(String, PteLit)>,
    /// Page-table syntax was met (entries, faults, TLBIs, handlers).
    vmsa: bool,
}

// ---------------------------------------------------------------- header

/// Skip what lies between line 1 and the initial state (a quoted doc
/// string, `Key=Value` lines); the offset of the `{`.
fn header(src: &Source, head: &mut Header) -> Res<usize> {
    let mut pos = src.line_end(0);
    loop {
        pos = src.skip_ws(pos);
        match src.text[pos..].chars().next() {
            None => {
                let msg = "missing '{' opening the initial state".to_string();
                return bad(src.eof_line(), msg);
            }
            Some('{') => return Ok(pos),
            Some('"') => pos = doc_string(src, pos)?,
            Some(_) => pos = key_value(src, pos, head)?,
        }
    }
}

/// A doc string `"..."` starting at `pos`: the offset after its end.
fn doc_string(src: &Source, pos: usize) -> Res<usize> {
    match src.text[pos + 1..].find('"') {
        Some(i) => Ok(pos + 1 + i + 1),
        None => bad(src.line(pos), "doc string is never closed by '\"'".into()),
    }
}

/// A `Key=Value` line at `pos`: the end of the line. `Variant=vmsa`,
/// `fatal`, `precise`, `handled` and `TTHM=...` (hardware page-table
/// updates) set up VMSA; other variants, `EL0=...` and imprecise
/// exceptions are unsupported.
fn key_value(src: &Source, pos: usize, head: &mut Header) -> Res<usize> {
    let end = src.line_end(pos);
    let line = src.text[pos..end].trim();
    let Some((key, value)) = line.split_once('=').filter(|(k, _)| is_ident(k.trim())) else {
        let msg = format!(
            "expected '{{' opening the initial state, found {}",
            show(line)
        );
        return bad(src.line(pos), msg);
    };
    let (key, value) = (key.trim(), value.trim());
    if key.eq_ignore_ascii_case("variant") {
        for v in value.split(',').map(str::trim) {
            match v.to_ascii_lowercase().as_str() {
                "vmsa" => head.vmsa = true,
                "fatal" => head.fatal = true,
                "precise" | "handled" => {}
                _ => return unsup(format!("Variant={}", show(v))),
            }
        }
    } else if key.eq_ignore_ascii_case("tthm") {
        for v in value.split_whitespace() {
            head.tthm.push(tthm_entry(v)?);
        }
    } else if key.eq_ignore_ascii_case("el0") {
        return unsup(format!("EL0={}", show(value)));
    }
    Ok(end)
}

/// One `TTHM` entry: `HA`, `HD`, `P1:HA`.
fn tthm_entry(v: &str) -> Res<(Option<usize>, bool, bool)> {
    let (thread, what) = match v.split_once(':') {
        Some((p, w)) => {
            let n = p.strip_prefix(['P', 'p']).and_then(|n| n.parse().ok());
            let Some(n) = n else {
                return unsup(format!("TTHM={}", show(v)));
            };
            (Some(n), w)
        }
        None => (None, v),
    };
    match what.to_ascii_uppercase().as_str() {
        "HA" => Ok((thread, true, false)),
        "HD" => Ok((thread, false, true)),
        _ => unsup(format!("TTHM={}", show(v))),
    }
}

impl Builder {
    /// The test's VMSA settings, if it uses virtual memory.
    fn vmsa_settings(&mut self) -> Res<Option<Vmsa>> {
        let head = &self.head;
        if !(self.vmsa || head.vmsa || head.fatal || !head.tthm.is_empty()) {
            return Ok(None);
        }
        let n = self.threads.len();
        let (mut ha, mut hd) = (vec![false; n], vec![false; n]);
        for &(t, a, d) in &head.tthm {
            for i in (0..n).filter(|&i| t.is_none_or(|t| t == i)) {
                ha[i] |= a;
                hd[i] |= d;
            }
        }
        Ok(Some(Vmsa {
            ha,
            hd,
            fatal: head.fatal,
            init_pte: std::mem::take(&mut self.init_pte),
        }))
    }
}

// --------------------------------------------------------- initial state

/// A thread register's initial value, applied once the threads are known.
struct InitReg {
    line: usize,
    thread: usize,
    reg: String,
    value: Option<Value>,
}

/// The initial state `{ ... }` opening at `open`: the register entries and
/// the offset after the `}`. Memory entries go straight into `b`.
fn init_state(src: &Source, open: usize, b: &mut Builder) -> Res<(Vec<InitReg>, usize)> {
    let start = open + 1;
    let Some(close) = src.text[start..].find('}').map(|i| start + i) else {
        let msg = "initial state '{' is never closed by '}'".to_string();
        return bad(src.line(open), msg);
    };
    let mut regs = Vec::new();
    let mut off = start;
    for piece in src.text[start..close].split(';') {
        let lead = piece.len() - piece.trim_start().len();
        if !piece.trim().is_empty() {
            b.init_entry(piece.trim(), src.line(off + lead), &mut regs)?;
        }
        off += piece.len() + 1;
    }
    Ok((regs, close + 1))
}

/// The integer types a location or register may be declared with.
const TYPES: [&str; 11] = [
    "int",
    "long",
    "unsigned",
    "signed",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
    "intptr_t",
    "uintptr_t",
    "pteval_t",
];

/// Split `[type] target` (`int x`, `uint64_t 0:X1`, `[x]`).
fn split_type(lhs: &str) -> (&str, &str) {
    if lhs.ends_with(']') {
        if let Some(i) = lhs.rfind('[') {
            return (lhs[..i].trim(), &lhs[i..]);
        }
    }
    match lhs.rsplit_once(char::is_whitespace) {
        Some((ty, target)) => (ty.trim(), target),
        None => ("", lhs),
    }
}

/// The location named by a page-table-entry name: `pte_x`, `PTE(x)`,
/// `TTD(x)` (herd7's synonym), `[PTE(x)]`.
fn pte_name(s: &str) -> Option<&str> {
    let s = s.trim();
    let s = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .map_or(s, str::trim);
    let x = match s.strip_prefix("pte_") {
        Some(x) => x,
        None => s
            .strip_prefix("PTE(")
            .or_else(|| s.strip_prefix("TTD("))?
            .strip_suffix(')')?
            .trim(),
    };
    is_ident(x).then_some(x)
}

/// The location named by a physical-address name: `phy_x`, `PA(x)`.
fn phys_name(s: &str) -> Option<&str> {
    let s = s.trim();
    let x = match s.strip_prefix("phy_") {
        Some(x) => x,
        None => s.strip_prefix("PA(")?.strip_suffix(')')?.trim(),
    };
    is_ident(x).then_some(x)
}

/// A page-table entry's fields `oa:phy_x, valid:0, ...` (inside the
/// parentheses); `Err(Ok(reason))`: unsupported, `Err(Err(msg))`: malformed.
fn pte_fields(inner: &str) -> Result<PteLit, Result<String, String>> {
    let mut lit = PteLit::default();
    for field in inner.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let Some((k, v)) = field.split_once(':').map(|(k, v)| (k.trim(), v.trim())) else {
            return Err(Err(format!("bad page-table field {}", show(field))));
        };
        let flag = match v {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        };
        let slot = match k {
            "oa" => {
                let Some(x) = phys_name(v) else {
                    return Err(Ok(format!("page-table output address {}", show(v))));
                };
                lit.oa = Some(x.to_string());
                continue;
            }
            "valid" => &mut lit.valid,
            "af" => &mut lit.af,
            "db" => &mut lit.db,
            "dbm" => &mut lit.dbm,
            "el0" => &mut lit.el0,
            _ => return Err(Ok(format!("page-table field {}", show(k)))),
        };
        match flag {
            Some(b) => *slot = Some(b),
            None => return Err(Err(format!("bad page-table field {}", show(field)))),
        }
    }
    Ok(lit)
}

impl Builder {
    /// One entry `[type] target [= value]` of the initial state.
    fn init_entry(&mut self, entry: &str, line: usize, regs: &mut Vec<InitReg>) -> Res<()> {
        let (lhs, rhs) = match entry.split_once('=') {
            Some((l, r)) => (l.trim(), Some(r.trim())),
            None => (entry, None),
        };
        let (ty, target) = split_type(lhs);
        if target.starts_with('*') || rhs.is_some_and(|r| r.starts_with('&')) {
            return unsup(format!("pointer location {}", show(entry)));
        }
        check_type(ty, line)?;
        if target.is_empty() {
            return bad(line, format!("missing name in {}", show(entry)));
        }
        if let Some(x) = pte_name(target) {
            return self.init_pte(x, rhs, line);
        }
        match target.split_once(':') {
            Some((t, r)) => regs.push(self.init_reg(t, r, rhs, line)?),
            None => self.init_loc(target, rhs, line)?,
        }
        Ok(())
    }

    /// `pte_x = (...)`: location `x`'s initial page-table entry.
    fn init_pte(&mut self, x: &str, rhs: Option<&str>, line: usize) -> Res<()> {
        self.vmsa = true;
        intern(&mut self.locs, x);
        let Some(rhs) = rhs else { return Ok(()) };
        let Value::Pte(lit) = self.value(rhs, line)? else {
            return unsup(format!("page-table entry value {}", show(rhs)));
        };
        if self.init_pte.iter().any(|(n, _)| n == x) {
            return bad(line, format!("entry of {} initialised twice", show(x)));
        }
        self.init_pte.push((x.to_string(), lit));
        Ok(())
    }

    /// `N:REG [= value]`.
    fn init_reg(&mut self, t: &str, r: &str, rhs: Option<&str>, line: usize) -> Res<InitReg> {
        let thread = thread_number(t, line)?;
        let reg = match isa::fold_reg(self.arch, r.trim()) {
            Some(RegName::Named(n)) => n,
            Some(RegName::Zero) => return bad(line, format!("cannot set {}", show(r))),
            None => return bad(line, format!("unknown register {}", named(r))),
        };
        let value = rhs.map(|v| self.value(v, line)).transpose()?;
        Ok(InitReg {
            line,
            thread,
            reg,
            value,
        })
    }

    /// `x [= value]` or `[x] [= value]`.
    fn init_loc(&mut self, target: &str, rhs: Option<&str>, line: usize) -> Res<()> {
        let name = match target.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(inner) => inner.trim(),
            None => target,
        };
        if !is_ident(name) {
            return bad(line, format!("cannot read location {}", named(target)));
        }
        intern(&mut self.locs, name);
        let Some(rhs) = rhs else { return Ok(()) };
        let value = self.value(rhs, line)?;
        if self.init_mem.iter().any(|(n, _)| n == name) {
            return bad(line, format!("location {} initialised twice", show(name)));
        }
        self.init_mem.push((name.to_string(), value));
        Ok(())
    }

    /// An initial value: an integer, a location's address, or (VMSA) an
    /// entry's address, a physical address, an entry value.
    fn value(&mut self, s: &str, line: usize) -> Res<Value> {
        if let Some(v) = self.vmsa_value(s, line)? {
            self.vmsa = true;
            return Ok(v);
        }
        if let Some(n) = parse_int(s) {
            Ok(Value::Int(n))
        } else if is_ident(s) {
            intern(&mut self.locs, s);
            Ok(Value::Loc(s.to_string()))
        } else {
            bad(line, format!("bad value {}", named(s)))
        }
    }

    /// `pte_x`, `PTE(x)`, `phy_x`, `PA(x)` or `(oa:..., valid:...)`.
    fn vmsa_value(&mut self, s: &str, line: usize) -> Res<Option<Value>> {
        let s = s.trim();
        if let Some(inner) = s.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
            let lit = match pte_fields(inner) {
                Ok(lit) => lit,
                Err(Ok(why)) => return unsup(why),
                Err(Err(msg)) => return bad(line, msg),
            };
            if let Some(x) = &lit.oa {
                intern(&mut self.locs, x);
            }
            return Ok(Some(Value::Pte(lit)));
        }
        if let Some(x) = pte_name(s) {
            intern(&mut self.locs, x);
            return Ok(Some(Value::PteOf(x.to_string())));
        }
        if let Some(x) = phys_name(s) {
            intern(&mut self.locs, x);
            return Ok(Some(Value::PhysOf(x.to_string())));
        }
        Ok(None)
    }

    /// Put the register entries into their threads (which must exist).
    fn apply_inits(&mut self, inits: Vec<InitReg>) -> Res<()> {
        let n = self.threads.len();
        for InitReg {
            line,
            thread,
            reg,
            value,
        } in inits
        {
            let Some(th) = self.threads.get_mut(thread) else {
                let msg = format!(
                    "initial state names thread {thread}, but {}",
                    has_threads(n)
                );
                return bad(line, msg);
            };
            let r = intern(&mut th.regs, &reg);
            if th.init.iter().any(|(i, _)| *i == r) {
                return bad(line, format!("{thread}:{reg} initialised twice"));
            }
            th.init.extend(value.map(|v| (r, v)));
        }
        Ok(())
    }
}

/// A declared type must be an integer type; others are unsupported
/// (`char`, `short`: mixed-size), and non-words are malformed.
fn check_type(ty: &str, line: usize) -> Res<()> {
    for word in ty.split_whitespace() {
        if !is_ident(word) {
            return bad(line, format!("bad type {}", named(ty)));
        }
        if !TYPES.contains(&word) {
            return unsup(format!("initial-state type {}", show(ty)));
        }
    }
    Ok(())
}

/// "the test has 2 threads (P0..P1)", for an unknown thread's message.
fn has_threads(n: usize) -> String {
    match n {
        1 => "the test has 1 thread (P0)".to_string(),
        _ => format!("the test has {n} threads (P0..P{})", n.saturating_sub(1)),
    }
}

/// A thread number (`1` in `1:X0`).
fn thread_number(t: &str, line: usize) -> Res<usize> {
    let t = t.trim();
    match t.parse::<usize>() {
        Ok(n) if t.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => bad(line, format!("bad thread number {}", named(t))),
    }
}

// --------------------------------------------------------- program table

/// The program table: the thread count, each thread's labels, and every
/// instruction as (thread, line, text) in row-major order.
struct Table<'a> {
    threads: usize,
    /// Per column: its thread, and whether it is that thread's fault
    /// handler (`P1.F`).
    owner: Vec<(usize, bool)>,
    labels: Vec<HashMap<String, usize>>,
    /// Instructions so far per thread (the index a label marks).
    counts: Vec<usize>,
    code: Vec<(usize, usize, &'a str)>,
}

/// Read the table starting at `pos`: the table and the offset after it.
fn program(src: &Source, pos: usize) -> Res<(Table<'_>, usize)> {
    let (rows, after) = rows(src, pos)?;
    let Some(((line, head), rows)) = rows.split_first() else {
        let msg = "missing program table (P0 | P1 ... ;)".to_string();
        let line = if after < src.text.len() {
            src.line(after)
        } else {
            src.eof_line()
        };
        return bad(line, msg);
    };
    let owner = columns(*line, head)?;
    let n = owner.len();
    let mut table = Table {
        threads: owner.iter().filter(|o| !o.1).count(),
        owner,
        labels: vec![HashMap::new(); n],
        counts: vec![0; n],
        code: Vec::new(),
    };
    for (line, row) in rows {
        let cells: Vec<&str> = row.split('|').collect();
        if cells.len() != n {
            let msg = format!(
                "row has {} columns, expected {n} (one per thread)",
                cells.len()
            );
            return bad(*line, msg);
        }
        for (t, cell) in cells.into_iter().enumerate() {
            table.cell(t, *line, cell)?;
        }
    }
    Ok((table, after))
}

/// The `;`-terminated rows from `pos` up to the condition (`exists`,
/// `~exists`, `forall`, `locations`, `filter`) or the end: (line, text).
fn rows(src: &Source, mut pos: usize) -> Res<(Vec<(usize, &str)>, usize)> {
    let mut rows = Vec::new();
    loop {
        pos = src.skip_ws(pos);
        let rest = &src.text[pos..];
        if rest.is_empty() || starts_condition(rest) {
            return Ok((rows, pos));
        }
        let end = src.line_end(pos);
        let Some(semi) = src.text[pos..end].find(';') else {
            let msg = format!("row does not end with ';': {}", src.snippet(pos));
            return bad(src.line(pos), msg);
        };
        rows.push((src.line(pos), &src.text[pos..pos + semi]));
        pos += semi + 1;
    }
}

/// Does the text start with what follows the program table?
fn starts_condition(s: &str) -> bool {
    let keyword = |k: &str| {
        s.strip_prefix(k)
            .is_some_and(|r| !r.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
    };
    s.starts_with('~')
        || ["exists", "forall", "locations", "filter"]
            .into_iter()
            .any(keyword)
}

/// The header row `P0 | P1 | P1.F ...`: each column's thread, and
/// whether it is that thread's fault handler.
fn columns(line: usize, head: &str) -> Res<Vec<(usize, bool)>> {
    let names: Vec<&str> = head.split('|').map(str::trim).collect();
    let mut out: Vec<(usize, bool)> = Vec::new();
    for name in &names {
        let main = out.iter().filter(|o| !o.1).count();
        let digits = name.strip_prefix(['P', 'p']).unwrap_or("");
        let num_len = digits.bytes().take_while(u8::is_ascii_digit).count();
        let (num, suffix) = digits.split_at(num_len);
        let n = num.parse::<usize>().ok();
        if let (Some(n), true) = (n, suffix.eq_ignore_ascii_case(".F")) {
            if n >= main || out.contains(&(n, true)) {
                let msg = format!("fault handler {} of no thread before it", show(name));
                return bad(line, msg);
            }
            out.push((n, true));
            continue;
        }
        if num_len > 0 && suffix.starts_with(['.', '@', ':']) {
            return unsup(format!("thread column {}", show(name)));
        }
        if !suffix.is_empty() || n != Some(main) {
            let msg = format!("expected thread name P{main}, found {}", show(name));
            return bad(line, msg);
        }
        out.push((main, false));
    }
    Ok(out)
}

impl<'a> Table<'a> {
    /// One cell of thread `t`: leading `label:`s, then an instruction or nothing.
    fn cell(&mut self, t: usize, line: usize, cell: &'a str) -> Res<()> {
        let count = self.counts[t];
        let mut rest = cell.trim();
        while let Some((label, after)) = rest.split_once(':').filter(|(l, _)| is_ident(l.trim())) {
            let label = label.trim();
            if self.labels[t].insert(label.to_string(), count).is_some() {
                return bad(line, format!("label {} defined twice in P{t}", show(label)));
            }
            rest = after.trim();
        }
        if !rest.is_empty() {
            self.code.push((t, line, rest));
            self.counts[t] += 1;
        }
        Ok(())
    }
}

impl Builder {
    /// Decode every instruction into its column, in row-major order; then
    /// each thread's code is its column's, followed by its handler's
    /// (branch targets moved along).
    fn decode(&mut self, table: &Table) -> Res<()> {
        let mut cols: Vec<(Vec<String>, Vec<Instr>)> = vec![Default::default(); table.owner.len()];
        for &(c, line, text) in &table.code {
            let (t, _) = table.owner[c];
            let thread = &mut self.threads[t];
            let mut ctx = Ctx {
                regs: &mut thread.regs,
                locs: &mut self.locs,
                labels: &table.labels[c],
            };
            match isa::decode(self.arch, text, &mut ctx) {
                Ok(instr) => cols[c].1.push(instr),
                Err(DecodeError::Unsupported(reason)) => return unsup(reason),
                Err(DecodeError::Malformed(msg)) => {
                    return bad(line, format!("P{t}: {msg} in {}", show(text)));
                }
            }
        }
        for (c, &(t, handler)) in table.owner.iter().enumerate() {
            let code = std::mem::take(&mut cols[c].1);
            let th = &mut self.threads[t];
            if handler {
                self.vmsa = true;
                let off = th.code.len();
                th.code.extend(code.into_iter().map(|i| shift(i, off)));
            } else {
                th.code = code;
                th.main_len = th.code.len();
                let mut labels: Vec<(String, usize)> = table.labels[c]
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                labels.sort();
                th.labels = labels;
            }
        }
        for th in &self.threads {
            if th.code.iter().any(|i| matches!(i, Instr::Tlbi { .. })) {
                self.vmsa = true;
            }
        }
        Ok(())
    }
}

/// A handler's instruction placed `off` instructions into its thread.
fn shift(i: Instr, off: usize) -> Instr {
    match i {
        Instr::Branch { cond, target } => Instr::Branch {
            cond,
            target: target + off,
        },
        other => other,
    }
}

// ------------------------------------------------------------- condition

/// A token of the condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    LParen,
    RParen,
    LBrack,
    RBrack,
    Eq,
    Colon,
    Comma,
    Semi,
    Minus,
    And,
    Or,
    Not,
    Word(&'a str),
    End,
}

/// How deep `(` and `~` may nest (deeper input is refused, not overflowed).
const MAX_DEPTH: usize = 200;

/// The parser of the final condition (and the `locations` before it).
struct Condition<'a, 'b> {
    src: &'a Source,
    pos: usize,
    b: &'b mut Builder,
    depth: usize,
}

impl<'a, 'b> Condition<'a, 'b> {
    fn new(src: &'a Source, pos: usize, b: &'b mut Builder) -> Self {
        Condition {
            src,
            pos,
            b,
            depth: 0,
        }
    }

    /// `[locations [...]] (exists | ~exists | forall) prop`.
    fn parse(mut self) -> Res<(Quant, Prop)> {
        self.skip_locations()?;
        if self.peek()?.0 == Tok::Word("filter") {
            return unsup("filter clause".to_string());
        }
        let quant = self.quant()?;
        let prop = self.or()?;
        let (tok, start) = self.peek()?;
        if tok != Tok::End {
            let msg = format!("unexpected {} after the condition", self.src.snippet(start));
            return bad(self.src.line(start), msg);
        }
        Ok((quant, prop))
    }

    /// The next token and where it starts, without consuming it.
    fn peek(&self) -> Res<(Tok<'a>, usize)> {
        let text: &'a str = &self.src.text;
        let start = self.src.skip_ws(self.pos);
        let rest = &text[start..];
        let Some(c) = rest.chars().next() else {
            return Ok((Tok::End, start));
        };
        let tok = match c {
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            '[' => Tok::LBrack,
            ']' => Tok::RBrack,
            '=' => Tok::Eq,
            ':' => Tok::Colon,
            ',' => Tok::Comma,
            ';' => Tok::Semi,
            '-' => Tok::Minus,
            '~' => Tok::Not,
            '/' if rest.starts_with("/\\") => Tok::And,
            '\\' if rest.starts_with("\\/") => Tok::Or,
            c if is_word_char(c) => {
                let len = rest.find(|c| !is_word_char(c)).unwrap_or(rest.len());
                Tok::Word(&rest[..len])
            }
            _ => {
                let msg = format!("unexpected {} in the condition", show(&c.to_string()));
                return bad(self.src.line(start), msg);
            }
        };
        Ok((tok, start))
    }

    /// Consume the next token.
    fn next(&mut self) -> Res<Tok<'a>> {
        let (tok, start) = self.peek()?;
        self.pos = start
            + match tok {
                Tok::And | Tok::Or => 2,
                Tok::Word(w) => w.len(),
                Tok::End => 0,
                _ => 1,
            };
        Ok(tok)
    }

    /// Consume `want` or fail with "expected {what}".
    fn expect(&mut self, want: Tok, what: &str) -> Res<()> {
        let (tok, start) = self.peek()?;
        if tok != want {
            let found = self.src.snippet(start);
            return bad(
                self.src.line(start),
                format!("expected {what}, found {found}"),
            );
        }
        self.next().map(|_| ())
    }

    /// Skip `locations [ ... ]` clauses.
    fn skip_locations(&mut self) -> Res<()> {
        while self.peek()?.0 == Tok::Word("locations") {
            let start = self.peek()?.1;
            self.next()?;
            self.expect(Tok::LBrack, "'[' after locations")?;
            match self.src.text[self.pos..].find(']') {
                Some(i) => self.pos += i + 1,
                None => return bad(self.src.line(start), "locations [ is never closed".into()),
            }
        }
        Ok(())
    }

    /// `exists`, `~exists` or `forall`.
    fn quant(&mut self) -> Res<Quant> {
        let (tok, start) = self.peek()?;
        let quant = match tok {
            Tok::Word("exists") => Quant::Exists,
            Tok::Word("forall") => Quant::Forall,
            Tok::Not => {
                self.next()?;
                self.expect(Tok::Word("exists"), "exists after '~'")?;
                return Ok(Quant::NotExists);
            }
            Tok::End => {
                let msg = "missing final condition (exists, ~exists or forall)".to_string();
                return bad(self.src.eof_line(), msg);
            }
            _ => {
                let found = self.src.snippet(start);
                let msg = format!("expected exists, ~exists or forall, found {found}");
                return bad(self.src.line(start), msg);
            }
        };
        self.next()?;
        Ok(quant)
    }

    /// `and (\/ and)*`.
    fn or(&mut self) -> Res<Prop> {
        let mut terms = vec![self.and()?];
        while self.peek()?.0 == Tok::Or {
            self.next()?;
            terms.push(self.and()?);
        }
        Ok(flatten(terms, Prop::Or))
    }

    /// `unary (/\ unary)*`: binds tighter than `\/`.
    fn and(&mut self) -> Res<Prop> {
        let mut terms = vec![self.unary()?];
        while self.peek()?.0 == Tok::And {
            self.next()?;
            terms.push(self.unary()?);
        }
        Ok(flatten(terms, Prop::And))
    }

    /// `~ unary`, `not unary`, `( prop )`, `true`, `false` or an atom.
    fn unary(&mut self) -> Res<Prop> {
        let (tok, start) = self.peek()?;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return bad(self.src.line(start), "condition nested too deeply".into());
        }
        let prop = match tok {
            Tok::Not | Tok::Word("not") => {
                self.next()?;
                Prop::Not(Box::new(self.unary()?))
            }
            Tok::LParen => {
                self.next()?;
                let p = self.or()?;
                self.expect(Tok::RParen, "')'")?;
                p
            }
            Tok::Word("true") => self.next().map(|_| Prop::True)?,
            Tok::Word("false") => self.next().map(|_| Prop::False)?,
            _ => self.atom()?,
        };
        self.depth -= 1;
        Ok(prop)
    }

    /// `N:REG = value`, `x = value` or `[x] = value`.
    fn atom(&mut self) -> Res<Prop> {
        let (tok, start) = self.peek()?;
        if let Tok::Word(w) = tok {
            if w.eq_ignore_ascii_case("fault") {
                self.next()?;
                if self.peek()?.0 == Tok::LParen {
                    return self.fault(start);
                }
                let atom = Atom::Mem(self.loc_atom(w));
                return self.finish_atom(atom, start);
            }
        }
        let atom = match tok {
            Tok::Word(w) if w.bytes().all(|b| b.is_ascii_digit()) => self.reg_atom(w, start)?,
            Tok::Word(w) if is_thread_word(w) => self.reg_atom(&w[1..], start)?,
            Tok::Word(w) if is_ident(w) => {
                self.next()?;
                self.mem_atom(w, start)?
            }
            Tok::LBrack => {
                self.next()?;
                let Tok::Word(w) = self.next()? else {
                    return bad(self.src.line(start), "expected a location after '['".into());
                };
                let atom = self.mem_atom(w, start)?;
                self.expect(Tok::RBrack, "']'")?;
                atom
            }
            _ => {
                let found = self.src.snippet(start);
                let msg = format!("expected a register or location, found {found}");
                return bad(self.src.line(start), msg);
            }
        };
        self.finish_atom(atom, start)
    }

    /// `= value` after an atom.
    fn finish_atom(&mut self, atom: Atom, _start: usize) -> Res<Prop> {
        self.expect(Tok::Eq, "'='")?;
        let value = self.value()?;
        Ok(Prop::Eq(atom, value))
    }

    /// A location name, interned.
    fn loc_atom(&mut self, w: &str) -> String {
        intern(&mut self.b.locs, w);
        w.to_string()
    }

    /// `fault(P0[:L0][, x[, MMU:Kind]])` after the word `fault`.
    fn fault(&mut self, start: usize) -> Res<Prop> {
        let line = self.src.line(start);
        self.expect(Tok::LParen, "'('")?;
        let thread = match self.next()? {
            Tok::Word(p) => match p.strip_prefix(['P', 'p']).map(|n| thread_number(n, line)) {
                Some(n) => n?,
                None => {
                    return bad(
                        line,
                        format!("expected a thread in fault, found {}", show(p)),
                    )
                }
            },
            _ => return bad(line, "expected a thread in fault(...)".into()),
        };
        if thread >= self.b.threads.len() {
            let n = self.b.threads.len();
            return bad(
                line,
                format!("condition names thread {thread}, but {}", has_threads(n)),
            );
        }
        let mut at = None;
        if self.peek()?.0 == Tok::Colon {
            self.next()?;
            let Tok::Word(l) = self.next()? else {
                return bad(line, "expected a label in fault(...)".into());
            };
            match self.b.threads[thread].labels.iter().find(|(n, _)| n == l) {
                Some(&(_, i)) => at = Some(i),
                None => return bad(line, format!("unknown label {} in P{thread}", show(l))),
            }
        }
        let (mut loc, mut kind) = (None, None);
        if self.peek()?.0 == Tok::Comma {
            self.next()?;
            let Tok::Word(x) = self.next()? else {
                return bad(line, "expected a location in fault(...)".into());
            };
            if !is_ident(x) {
                return bad(line, format!("bad location {} in fault(...)", show(x)));
            }
            loc = Some(self.loc_atom(x));
            if self.peek()?.0 == Tok::Comma {
                self.next()?;
                kind = Some(self.fault_kind(line)?);
            }
        }
        self.expect(Tok::RParen, "')' closing fault(...)")?;
        self.b.vmsa = true;
        Ok(Prop::Fault {
            thread,
            at,
            loc,
            kind,
        })
    }

    /// `MMU:Translation`, `MMU:AccessFlag`, `MMU:Permission`.
    fn fault_kind(&mut self, line: usize) -> Res<FaultKind> {
        let Tok::Word(m) = self.next()? else {
            return bad(line, "expected a fault type".into());
        };
        if m != "MMU" || self.next()? != Tok::Colon {
            return unsup(format!("fault type {}", show(m)));
        }
        match self.next()? {
            Tok::Word("Translation") => Ok(FaultKind::Translation),
            Tok::Word("AccessFlag") => Ok(FaultKind::AccessFlag),
            Tok::Word("Permission") => Ok(FaultKind::Permission),
            Tok::Word(k) => unsup(format!("fault type MMU:{}", show(k))),
            _ => bad(line, "expected a fault type".into()),
        }
    }

    /// `N:REG`, whose thread must exist.
    fn reg_atom(&mut self, t: &str, start: usize) -> Res<Atom> {
        let line = self.src.line(start);
        let thread = thread_number(t, line)?;
        self.next()?;
        self.expect(Tok::Colon, "':' after the thread number")?;
        let Tok::Word(r) = self.next()? else {
            return bad(line, format!("expected a register after {thread}:"));
        };
        let n = self.b.threads.len();
        let Some(th) = self.b.threads.get_mut(thread) else {
            let msg = format!("condition names thread {thread}, but {}", has_threads(n));
            return bad(line, msg);
        };
        match isa::fold_reg(self.b.arch, r) {
            Some(RegName::Named(name)) => Ok(Atom::Reg {
                thread,
                reg: intern(&mut th.regs, &name),
            }),
            Some(RegName::Zero) => bad(line, format!("zero register {} in the condition", show(r))),
            None => bad(line, format!("unknown register {}", named(r))),
        }
    }

    /// A location `w` (already consumed): `x`, or (VMSA) an entry
    /// `pte_x` or `PTE(x)`.
    fn mem_atom(&mut self, w: &str, start: usize) -> Res<Atom> {
        if self.peek()?.0 == Tok::LParen {
            if w != "PTE" && w != "TTD" {
                return unsup(format!("condition {}", self.span(start)));
            }
            self.next()?;
            let Tok::Word(x) = self.next()? else {
                return bad(
                    self.src.line(start),
                    "expected a location in PTE(...)".into(),
                );
            };
            self.expect(Tok::RParen, "')'")?;
            return self.pte_atom(x, start);
        }
        if let Some(x) = pte_name(w) {
            return self.pte_atom(x, start);
        }
        Ok(Atom::Mem(self.loc_atom(w)))
    }

    /// The entry of location `x`.
    fn pte_atom(&mut self, x: &str, start: usize) -> Res<Atom> {
        if !is_ident(x) {
            return bad(self.src.line(start), format!("bad location {}", show(x)));
        }
        self.b.vmsa = true;
        Ok(Atom::Pte(self.loc_atom(x)))
    }

    /// A value: an integer (maybe negative), a location's address, or
    /// (VMSA) an entry value `(oa:...)`, `pte_x`, `phy_x`.
    fn value(&mut self) -> Res<Value> {
        let (tok, start) = self.peek()?;
        let line = self.src.line(start);
        let paren = matches!(tok, Tok::Word("PTE" | "TTD" | "PA"));
        if tok == Tok::LParen || paren {
            return self.vmsa_value(start);
        }
        let neg = tok == Tok::Minus;
        if neg {
            self.next()?;
        }
        let tok = self.peek()?.0;
        let Tok::Word(w) = tok else {
            return bad(
                line,
                format!("expected a value, found {}", self.src.snippet(start)),
            );
        };
        self.next()?;
        if w == "label" && self.peek()?.0 == Tok::Colon {
            return unsup("label value in the condition".to_string());
        }
        match parse_int(w) {
            Some(n) if neg => Ok(Value::Int(n.wrapping_neg())),
            Some(n) => Ok(Value::Int(n)),
            None if !neg && is_ident(w) => match self.b.vmsa_value(w, line)? {
                Some(v) => Ok(v),
                None => Ok(Value::Loc(self.loc_atom(w))),
            },
            None => bad(line, format!("bad value {}", named(w))),
        }
    }

    /// A parenthesised VMSA value (`(oa:...)`, `PTE(x)`, `PA(x)`) at `start`.
    fn vmsa_value(&mut self, start: usize) -> Res<Value> {
        let text = &self.src.text[start..];
        let open = text.find('(').unwrap_or(0);
        // The matching `)`: an entry literal may nest `PA(x)`.
        let mut depth = 0usize;
        let close = text[open..].char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(open + i)
        });
        let Some(close) = close else {
            return bad(self.src.line(start), "'(' is never closed by ')'".into());
        };
        let lit = &text[..close + 1];
        let line = self.src.line(start);
        let v = self.b.vmsa_value(lit, line)?;
        self.pos = start + close + 1;
        self.b.vmsa = true;
        match v {
            Some(v) => Ok(v),
            None => bad(line, format!("bad value {}", show(lit))),
        }
    }

    /// The source from `start` to its matching `)`/`]` (or the line's end),
    /// whitespace collapsed: for an unsupported reason.
    fn span(&self, start: usize) -> String {
        let text = &self.src.text[start..];
        let (mut depth, mut end) = (0i32, text.len());
        for (i, c) in text.char_indices() {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' if depth <= 1 => {
                    end = i + 1;
                    break;
                }
                ')' | ']' => depth -= 1,
                '\n' if depth <= 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let words: Vec<&str> = text[..end].split_whitespace().collect();
        show(&words.join(" "))
    }
}

/// `P0`: a thread named the herd7 way in a condition (`P0:X7=0`).
fn is_thread_word(w: &str) -> bool {
    w.len() > 1 && w.starts_with('P') && w[1..].bytes().all(|b| b.is_ascii_digit())
}

/// A chain of one is its only term.
fn flatten(mut terms: Vec<Prop>, join: fn(Vec<Prop>) -> Prop) -> Prop {
    if terms.len() == 1 {
        terms.remove(0)
    } else {
        join(terms)
    }
}

/// Characters of words in a condition (names, numbers, `0x10`).
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}
