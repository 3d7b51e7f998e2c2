//! RISC-V (herd7's `RISCV` tests): word and doubleword loads and stores with
//! `.aq`/`.rl` annotations, `amoswap`/`amoadd`, `li`/`mv`, register and
//! immediate ALU, `beq`/`bne`/`blt`/`bge`/`j` and the fences. Registers are
//! `x0`-`x31` or their ABI names (`a0`, `t1`, `s2`, ...), folded to `xN`;
//! `x0` (`zero`) is the zero register. Immediates are plain (`1`, `-8`, `0x10`).

use super::{
    alu_or_nop, arity, imm, malformed, named, show, split_mnemonic, split_operands, unsupported,
    Ctx, DecodeError, RegName,
};
use crate::ast::{
    Addr, AluOp, BranchCond, Cond, Fence, Instr, LoadKind, Operand, RmwOp, StoreKind,
};

/// `x5`/`t0` -> `x5`; `x0`/`zero` -> zero. Case-insensitive.
pub(crate) fn fold_reg(name: &str) -> Option<RegName> {
    let low = name.to_ascii_lowercase();
    let n = match low.strip_prefix('x').and_then(number) {
        Some(n) if n <= 31 => n,
        Some(_) => return None,
        None => abi(&low)?,
    };
    Some(if n == 0 {
        RegName::Zero
    } else {
        RegName::Named(format!("x{n}"))
    })
}

/// A register number written as plain digits.
fn number(s: &str) -> Option<u32> {
    let digits = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| s.parse().ok()).flatten()
}

/// The number of an ABI register name.
fn abi(name: &str) -> Option<u32> {
    let fixed = [
        ("zero", 0),
        ("ra", 1),
        ("sp", 2),
        ("gp", 3),
        ("tp", 4),
        ("fp", 8),
    ];
    if let Some((_, n)) = fixed.iter().find(|(s, _)| *s == name) {
        return Some(*n);
    }
    let k = number(name.get(1..)?)?;
    match (name.as_bytes().first()?, k) {
        (b't', 0..=2) => Some(5 + k),
        (b't', 3..=6) => Some(25 + k),
        (b's', 0..=1) => Some(8 + k),
        (b's', 2..=11) => Some(16 + k),
        (b'a', 0..=7) => Some(10 + k),
        _ => None,
    }
}

/// Decode one RISC-V instruction.
pub(crate) fn decode(text: &str, ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    let (mnem, rest) = split_mnemonic(text)?;
    let m = mnem.to_ascii_lowercase();
    let ops = split_operands(rest);
    match m.as_str() {
        "nop" => arity(&m, &ops, 0).map(|()| Instr::Nop),
        "li" | "mv" => mov(&m, &ops, ctx),
        "add" | "sub" | "xor" | "or" | "and" => alu(&m, &ops, ctx),
        "addi" | "xori" | "ori" | "andi" => alu(&m, &ops, ctx),
        "beq" | "bne" | "blt" | "bge" => branch(&m, &ops, ctx),
        "beqz" | "bnez" => branch_zero(&m, &ops, ctx),
        "j" => jump(&ops, ctx),
        "fence" => fence(&ops),
        "fence.tso" => arity(&m, &ops, 0).map(|()| Instr::Fence(Fence::Tso)),
        "fence.i" => arity(&m, &ops, 0).map(|()| Instr::Fence(Fence::FenceI)),
        _ => memory(&m, &ops, ctx),
    }
}

/// Loads, stores and AMOs (mnemonics with `.` annotations), else unsupported.
fn memory(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    let (base, rest) = m.split_once('.').unwrap_or((m, ""));
    let bad = || unsupported(format!("instruction {}", show(m)));
    match base {
        "lw" | "ld" => load(m, annotations(rest).ok_or_else(bad)?, ops, ctx),
        "sw" | "sd" => store(m, annotations(rest).ok_or_else(bad)?, ops, ctx),
        "amoswap" | "amoadd" => amo(m, base, rest, ops, ctx),
        "lb" | "lbu" | "lh" | "lhu" | "lwu" | "sb" | "sh" => {
            Err(unsupported(format!("mixed-size access {}", show(m))))
        }
        "lr" | "sc" => Err(unsupported(format!("exclusive {}", show(m)))),
        _ => Err(bad()),
    }
}

/// `.aq`, `.rl`, `.aqrl` (or `.aq.rl`), or none: (acquire, release).
fn annotations(s: &str) -> Option<(bool, bool)> {
    match s {
        "" => Some((false, false)),
        "aq" => Some((true, false)),
        "rl" => Some((false, true)),
        "aqrl" | "aq.rl" => Some((true, true)),
        _ => None,
    }
}

/// A register's folded name, or a malformed-operand error.
fn reg(s: &str) -> Result<RegName, DecodeError> {
    fold_reg(s).ok_or_else(|| malformed(format!("expected a register, found {}", named(s))))
}

/// A register read (`x0` reads 0).
fn src(s: &str, ctx: &mut Ctx) -> Result<Operand, DecodeError> {
    Ok(ctx.operand(reg(s)?))
}

/// `li rd, imm` / `mv rd, rs`: `Alu Mov` (`b` is `Imm(0)`).
fn mov(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity(m, ops, 2)?;
    let dst = ctx.dest(reg(ops[0])?);
    let a = if m == "li" {
        imm(ops[1])?
    } else {
        src(ops[1], ctx)?
    };
    Ok(alu_or_nop(dst, AluOp::Mov, a, Operand::Imm(0)))
}

/// `add rd, rs1, rs2` and the immediate forms `addi rd, rs1, imm`.
fn alu(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity(m, ops, 3)?;
    let (name, immediate) = match m.strip_suffix('i') {
        Some(n) => (n, true),
        None => (m, false),
    };
    let op = match name {
        "add" => AluOp::Add,
        "sub" => AluOp::Sub,
        "xor" => AluOp::Xor,
        "or" => AluOp::Or,
        _ => AluOp::And,
    };
    let dst = ctx.dest(reg(ops[0])?);
    let a = src(ops[1], ctx)?;
    let b = if immediate {
        imm(ops[2])?
    } else {
        src(ops[2], ctx)?
    };
    Ok(alu_or_nop(dst, op, a, b))
}

/// `beq/bne/blt/bge rs1, rs2, label`.
fn branch(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity(m, ops, 3)?;
    let cond = match m {
        "beq" => Cond::Eq,
        "bne" => Cond::Ne,
        "blt" => Cond::Lt,
        _ => Cond::Ge,
    };
    let a = src(ops[0], ctx)?;
    let b = src(ops[1], ctx)?;
    let target = ctx.label(ops[2])?;
    let cond = BranchCond::Cmp(a, b, cond);
    Ok(Instr::Branch { cond, target })
}

/// `beqz/bnez rs, label`: a compare with zero.
fn branch_zero(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity(m, ops, 2)?;
    let c = if m == "beqz" { Cond::Eq } else { Cond::Ne };
    let a = src(ops[0], ctx)?;
    let target = ctx.label(ops[1])?;
    let cond = BranchCond::Cmp(a, Operand::Zero, c);
    Ok(Instr::Branch { cond, target })
}

/// `j label`.
fn jump(ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity("j", ops, 1)?;
    let target = ctx.label(ops[0])?;
    Ok(Instr::Branch {
        cond: BranchCond::Always,
        target,
    })
}

/// `fence pred,succ` (subsets of `rw`), or `fence` alone (= `rw,rw`).
/// Device I/O sets (`i`, `o`) are unsupported.
fn fence(ops: &[&str]) -> Result<Instr, DecodeError> {
    let ((pred_r, pred_w), (succ_r, succ_w)) = match ops {
        [] => ((true, true), (true, true)),
        [p, s] => (access_set(p, ops)?, access_set(s, ops)?),
        _ => return Err(malformed(format!("bad fence {}", show(&ops.join(","))))),
    };
    Ok(Instr::Fence(Fence::Order {
        pred_r,
        pred_w,
        succ_r,
        succ_w,
    }))
}

/// One side of a fence, `r`, `w` or `rw`: (reads, writes).
fn access_set(s: &str, ops: &[&str]) -> Result<(bool, bool), DecodeError> {
    let low = s.to_ascii_lowercase();
    let dup = |c| low.matches(c).count() > 1;
    if low.is_empty() || dup('r') || dup('w') || dup('i') || dup('o') {
        return Err(malformed(format!("bad fence set {}", named(s))));
    }
    if !low.chars().all(|c| "iorw".contains(c)) {
        return Err(malformed(format!("bad fence set {}", named(s))));
    }
    if low.contains(['i', 'o']) {
        let all = show(&ops.join(","));
        return Err(unsupported(format!("device-I/O fence {all}")));
    }
    Ok((low.contains('r'), low.contains('w')))
}

/// `off(rs)` (the offset may be omitted).
fn mem(s: &str, ctx: &mut Ctx) -> Result<Addr, DecodeError> {
    let bad = || malformed(format!("expected offset(register), found {}", named(s)));
    let (off, inner) = s
        .strip_suffix(')')
        .and_then(|r| r.split_once('('))
        .ok_or_else(bad)?;
    let off = off.trim();
    let offset = if off.is_empty() {
        Operand::Imm(0)
    } else {
        imm(off)?
    };
    let base = src(inner.trim(), ctx)?;
    Ok(Addr { base, offset })
}

/// `lw/ld rd, off(rs)`: `.aq` is an acquire. `.aqrl` is taken as an
/// acquire too (the release half, ordering earlier accesses before the
/// load, is not expressed); `.rl` alone is unsupported.
fn load(
    m: &str,
    (aq, rl): (bool, bool),
    ops: &[&str],
    ctx: &mut Ctx,
) -> Result<Instr, DecodeError> {
    if rl && !aq {
        return Err(unsupported(format!("instruction {}", show(m))));
    }
    arity(m, ops, 2)?;
    let dst = ctx.dest(reg(ops[0])?);
    let addr = mem(ops[1], ctx)?;
    let kind = if aq {
        LoadKind::Acquire
    } else {
        LoadKind::Plain
    };
    Ok(Instr::Load { dst, addr, kind })
}

/// `sw/sd rs, off(rb)`: `.rl` is a release. `.aqrl` is taken as a release
/// too (the acquire half is not expressed); `.aq` alone is unsupported.
fn store(
    m: &str,
    (aq, rl): (bool, bool),
    ops: &[&str],
    ctx: &mut Ctx,
) -> Result<Instr, DecodeError> {
    if aq && !rl {
        return Err(unsupported(format!("instruction {}", show(m))));
    }
    arity(m, ops, 2)?;
    let src = src(ops[0], ctx)?;
    let addr = mem(ops[1], ctx)?;
    let kind = if rl {
        StoreKind::Release
    } else {
        StoreKind::Plain
    };
    Ok(Instr::Store { src, addr, kind })
}

/// `amoswap.w/d{.aq,.rl,.aqrl} rd, rs2, (rs1)` and `amoadd`: the old value to
/// `rd` (`None` for `x0`), `rs2` written (or added).
fn amo(m: &str, base: &str, rest: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    let (width, ann) = rest.split_once('.').unwrap_or((rest, ""));
    let kinds = annotations(ann).filter(|_| matches!(width, "w" | "d"));
    let (aq, rl) = kinds.ok_or_else(|| unsupported(format!("instruction {}", show(m))))?;
    arity(m, ops, 3)?;
    let dst = ctx.dest(reg(ops[0])?);
    let src = src(ops[1], ctx)?;
    let addr = mem(ops[2], ctx)?;
    if addr.offset != Operand::Imm(0) {
        return Err(malformed(format!(
            "{} takes (register), found {}",
            show(m),
            show(ops[2])
        )));
    }
    let op = if base == "amoswap" {
        RmwOp::Swap
    } else {
        RmwOp::Add
    };
    Ok(Instr::Rmw {
        op,
        dst,
        src,
        addr,
        load: if aq {
            LoadKind::Acquire
        } else {
            LoadKind::Plain
        },
        store: if rl {
            StoreKind::Release
        } else {
            StoreKind::Plain
        },
    })
}
