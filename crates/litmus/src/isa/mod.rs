//! Each architecture's assembly, decoded into [`crate::ast::Instr`].
//!
//! The program table hands every cell's instruction text to [`decode`] with
//! a [`Ctx`]: the thread's registers (interned into [`crate::ast::Thread::regs`]
//! as they are met), the test's locations (x86 names them in memory
//! operands) and the thread's labels, all known before the first decode
//! (labels are forward references). A decoder answers an [`Instr`], or a
//! [`DecodeError`]: the instruction is well formed but the models cannot
//! express it ([`DecodeError::Unsupported`]), or it cannot be read
//! ([`DecodeError::Malformed`]).

use crate::ast::{AluOp, Arch, Instr, Operand, Reg};
use std::collections::HashMap;

pub(crate) mod aarch64;
pub(crate) mod riscv;
pub(crate) mod x86;

/// Why an instruction did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// Well formed, outside what the models express: a short reason naming
    /// the offending thing ("instruction TLBI VAE1IS").
    Unsupported(String),
    /// Cannot be read: what is wrong, on one line.
    Malformed(String),
}

/// A register name after folding (`W5` and `X5` are one register).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RegName {
    /// `WZR`/`XZR`, RISC-V `x0`.
    Zero,
    /// The canonical name, as it goes into [`crate::ast::Thread::regs`].
    Named(String),
}

/// What a decoder may look up or add to while decoding one thread.
pub(crate) struct Ctx<'a> {
    /// The thread's registers; new names are appended.
    pub(crate) regs: &'a mut Vec<String>,
    /// The test's locations; new names are appended.
    pub(crate) locs: &'a mut Vec<String>,
    /// The thread's labels: name -> index of the instruction that follows.
    pub(crate) labels: &'a HashMap<String, usize>,
}

impl Ctx<'_> {
    /// The index of a canonical register name, added if new.
    pub(crate) fn intern_reg(&mut self, canonical: &str) -> Reg {
        intern(self.regs, canonical)
    }

    /// The index of a location, added if new.
    pub(crate) fn loc(&mut self, name: &str) -> usize {
        intern(self.locs, name)
    }

    /// The instruction index a label marks.
    pub(crate) fn label(&self, name: &str) -> Result<usize, DecodeError> {
        self.labels
            .get(name)
            .copied()
            .ok_or_else(|| malformed(format!("unknown label {}", show(name))))
    }

    /// A register operand from a folded name (the zero register included).
    pub(crate) fn operand(&mut self, reg: RegName) -> Operand {
        match reg {
            RegName::Zero => Operand::Zero,
            RegName::Named(n) => Operand::Reg(self.intern_reg(&n)),
        }
    }

    /// A destination: `None` for the zero register (the write vanishes).
    pub(crate) fn dest(&mut self, reg: RegName) -> Option<Reg> {
        match reg {
            RegName::Zero => None,
            RegName::Named(n) => Some(self.intern_reg(&n)),
        }
    }
}

/// Decode one instruction (a cell's text, labels already removed).
pub(crate) fn decode(arch: Arch, text: &str, ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    match arch {
        Arch::AArch64 => aarch64::decode(text, ctx),
        Arch::RiscV => riscv::decode(text, ctx),
        Arch::X86 => x86::decode(text, ctx),
    }
}

/// Fold a register name as written (`W5`, `x5`, `a0`, `EAX`) the way the
/// architecture's code does; `None` if it is no register of `arch`.
pub(crate) fn fold_reg(arch: Arch, name: &str) -> Option<RegName> {
    match arch {
        Arch::AArch64 => aarch64::fold_reg(name),
        Arch::RiscV => riscv::fold_reg(name),
        Arch::X86 => x86::fold_reg(name),
    }
}

/// The index of `name` in `list`, appended if absent.
pub(crate) fn intern(list: &mut Vec<String>, name: &str) -> usize {
    match list.iter().position(|n| n == name) {
        Some(i) => i,
        None => {
            list.push(name.to_string());
            list.len() - 1
        }
    }
}

/// Input text made safe for a one-line message: control characters
/// (newlines, tabs, NUL, ...) and line separators escaped like Rust's
/// `{:?}` does, cut to 60 characters.
pub(crate) fn show(s: &str) -> String {
    const MAX: usize = 60;
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == MAX {
            out.push_str("...");
            break;
        }
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// [`show`], or "nothing" for empty text (an operand that is missing).
pub(crate) fn named(s: &str) -> String {
    if s.is_empty() {
        "nothing".to_string()
    } else {
        show(s)
    }
}

/// A [`DecodeError::Malformed`].
pub(crate) fn malformed(msg: String) -> DecodeError {
    DecodeError::Malformed(msg)
}

/// A [`DecodeError::Unsupported`].
pub(crate) fn unsupported(reason: String) -> DecodeError {
    DecodeError::Unsupported(reason)
}

/// Split an instruction into its mnemonic and the operand text. The
/// mnemonic must be letters, digits and dots (`B.EQ`, `lw.aq`).
pub(crate) fn split_mnemonic(text: &str) -> Result<(&str, &str), DecodeError> {
    let text = text.trim();
    let (mnem, rest) = match text.find(char::is_whitespace) {
        Some(i) => text.split_at(i),
        None => (text, ""),
    };
    let readable = mnem.starts_with(|c: char| c.is_ascii_alphabetic())
        && mnem.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    if readable {
        Ok((mnem, rest.trim()))
    } else {
        Err(malformed(format!("cannot read instruction {}", show(text))))
    }
}

/// Split operands at the commas outside brackets and parentheses
/// (`W7,[X0,W5,SXTW]` is two operands), trimmed; none for blank text.
pub(crate) fn split_operands(text: &str) -> Vec<&str> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(text[start..].trim());
    out
}

/// Require exactly `n` operands.
pub(crate) fn arity(mnem: &str, ops: &[&str], n: usize) -> Result<(), DecodeError> {
    if ops.len() == n {
        Ok(())
    } else {
        Err(malformed(format!(
            "{} takes {n} operand{}, found {}",
            show(mnem),
            if n == 1 { "" } else { "s" },
            ops.len()
        )))
    }
}

/// An integer: decimal or `0x` hexadecimal, optionally negative. Values up
/// to 64 bits wrap into `i64` (`0xffffffffffffffff` is -1).
pub(crate) fn parse_int(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let hex = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"));
    let magnitude = match hex {
        Some(h) if !h.starts_with(['+', '-']) => u64::from_str_radix(h, 16).ok()? as i64,
        Some(_) => return None,
        None if digits.starts_with(['+', '-']) => return None,
        None => digits.parse::<u64>().ok()? as i64,
    };
    Some(if neg {
        magnitude.wrapping_neg()
    } else {
        magnitude
    })
}

/// `parse_int`, as an operand or a malformed-immediate error.
pub(crate) fn imm(s: &str) -> Result<Operand, DecodeError> {
    parse_int(s)
        .map(Operand::Imm)
        .ok_or_else(|| malformed(format!("bad immediate {}", named(s))))
}

/// An `Alu`, or a `Nop` when it writes the zero register (`dst: None`):
/// the result vanishes and an ALU operation has no other effect.
pub(crate) fn alu_or_nop(dst: Option<Reg>, op: AluOp, a: Operand, b: Operand) -> Instr {
    match dst {
        Some(dst) => Instr::Alu { dst, op, a, b },
        None => Instr::Nop,
    }
}

/// `true` for a label name: a letter or `_`, then letters, digits, `_`.
pub(crate) fn is_ident(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
