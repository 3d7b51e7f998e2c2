//! AArch64 (herd7's `AArch64` tests): moves and ALU, `CMP`/`CSEL`, plain,
//! acquire and release loads and stores, the LSE atomics `SWP`, `LDADD`,
//! `LDSET`, `LDCLR`, `STADD`, `STSET`, `STCLR`, `CAS`, `DMB`/`DSB`/`ISB`,
//! `TLBI` and branches. Registers are
//! case-insensitive; `Wn` and `Xn` fold to `Xn`, `WZR`/`XZR` are the zero
//! register. Operand widths are not modelled (values stay small).

use super::{
    alu_or_nop, arity, imm, malformed, named, show, split_mnemonic, split_operands, unsupported,
    Ctx, DecodeError, RegName,
};
use crate::ast::{
    Addr, AluOp, BranchCond, Cond, Fence, Instr, LoadKind, Operand, RmwOp, StoreKind,
};

/// `W5`/`X5` -> `X5`, `WZR`/`XZR` -> zero; registers 0 to 30.
pub(crate) fn fold_reg(name: &str) -> Option<RegName> {
    let up = name.to_ascii_uppercase();
    if up == "WZR" || up == "XZR" {
        return Some(RegName::Zero);
    }
    let num = up.strip_prefix('W').or_else(|| up.strip_prefix('X'))?;
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u32 = num.parse().ok()?;
    (n <= 30).then(|| RegName::Named(format!("X{n}")))
}

/// Decode one AArch64 instruction.
pub(crate) fn decode(text: &str, ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    let (mnem, rest) = split_mnemonic(text)?;
    let m = mnem.to_ascii_uppercase();
    let ops = split_operands(rest);
    match m.as_str() {
        "NOP" => arity(&m, &ops, 0).map(|()| Instr::Nop),
        "MOV" => mov(&ops, ctx),
        "ADD" | "SUB" | "AND" | "ORR" | "EOR" | "LSR" | "LSL" | "BIC" => alu(&m, &ops, ctx),
        "CMP" => cmp(&ops, ctx),
        "CSEL" => csel(&ops, ctx),
        "CSET" => cset(&ops, ctx),
        "LDR" | "LDAR" | "LDAPR" => load(&m, &ops, ctx),
        "STR" | "STLR" => store(&m, &ops, ctx),
        "DMB" | "DSB" => barrier(&m, &ops),
        "TLBI" => tlbi(&ops, ctx),
        "ISB" => isb(&ops),
        "B" => branch(&m, BranchCond::Always, &ops, ctx),
        "CBZ" | "CBNZ" => cbz(&m, &ops, ctx),
        "STADD" | "STADDL" | "STSET" | "STSETL" | "STCLR" | "STCLRL" => stadd(&m, &ops, ctx),
        _ => other(&m, &ops, ctx),
    }
}

/// `B.cond`, the `SWP`/`LDADD`/`CAS` families, or an unsupported instruction.
fn other(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    if let Some(c) = m.strip_prefix("B.") {
        return branch(m, BranchCond::Flags(cond(c)?), ops, ctx);
    }
    if let Some((op, load, store)) = rmw_mnemonic(m) {
        return rmw(m, op, (load, store), ops, ctx);
    }
    Err(unsupported(reason(m, ops)))
}

/// A register operand's folded name; `SP` is unsupported.
fn reg(s: &str) -> Result<RegName, DecodeError> {
    fold_reg(s).ok_or_else(|| {
        if matches!(s.to_ascii_uppercase().as_str(), "SP" | "WSP") {
            unsupported(format!("stack pointer {}", show(s)))
        } else {
            malformed(format!("expected a register, found {}", named(s)))
        }
    })
}

/// A register read (the zero register reads 0).
fn src(s: &str, ctx: &mut Ctx) -> Result<Operand, DecodeError> {
    Ok(ctx.operand(reg(s)?))
}

/// A register or an immediate `#n` (the `#` is optional in Arm syntax).
fn reg_or_imm(s: &str, ctx: &mut Ctx) -> Result<Operand, DecodeError> {
    match s.strip_prefix('#') {
        Some(n) => imm(n.trim()),
        None if super::parse_int(s).is_some() => imm(s),
        None => src(s, ctx),
    }
}

/// `MOV Rd, Rn|#imm`: `Alu Mov` (`b` is `Imm(0)`); to the zero register, a `Nop`.
fn mov(ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity("MOV", ops, 2)?;
    let dst = ctx.dest(reg(ops[0])?);
    let a = reg_or_imm(ops[1], ctx)?;
    Ok(alu_or_nop(dst, AluOp::Mov, a, Operand::Imm(0)))
}

/// `ADD/SUB/AND/ORR/EOR/LSR/LSL/BIC Rd, Rn, Rm|#imm`; a shifted operand is
/// unsupported.
fn alu(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    if ops.len() == 4 {
        return Err(unsupported(format!("shifted operand {}", show(ops[3]))));
    }
    arity(m, ops, 3)?;
    let op = match m {
        "ADD" => AluOp::Add,
        "SUB" => AluOp::Sub,
        "AND" => AluOp::And,
        "ORR" => AluOp::Or,
        "LSR" => AluOp::Lsr,
        "LSL" => AluOp::Lsl,
        "BIC" => AluOp::Bic,
        _ => AluOp::Xor,
    };
    let dst = ctx.dest(reg(ops[0])?);
    let a = src(ops[1], ctx)?;
    let b = reg_or_imm(ops[2], ctx)?;
    Ok(alu_or_nop(dst, op, a, b))
}

/// `CMP Rn, Rm|#imm`.
fn cmp(ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    if ops.len() == 3 {
        return Err(unsupported(format!("shifted operand {}", show(ops[2]))));
    }
    arity("CMP", ops, 2)?;
    let a = src(ops[0], ctx)?;
    let b = reg_or_imm(ops[1], ctx)?;
    Ok(Instr::Cmp { a, b })
}

/// `CSEL Rd, Rn, Rm, cond`; to the zero register, a `Nop`.
fn csel(ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity("CSEL", ops, 4)?;
    let dst = ctx.dest(reg(ops[0])?);
    let a = src(ops[1], ctx)?;
    let b = src(ops[2], ctx)?;
    let cond = cond(ops[3])?;
    Ok(match dst {
        Some(dst) => Instr::Csel { dst, a, b, cond },
        None => Instr::Nop,
    })
}

/// `CSET Rd, cond`: `CSINC Rd, XZR, XZR, invert(cond)`, that is a select
/// of 1 or 0 by the condition.
fn cset(ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity("CSET", ops, 2)?;
    let dst = ctx.dest(reg(ops[0])?);
    let cond = cond(ops[1])?;
    Ok(match dst {
        Some(dst) => Instr::Csel {
            dst,
            a: Operand::Imm(1),
            b: Operand::Zero,
            cond,
        },
        None => Instr::Nop,
    })
}

/// A condition code; the ones [`Cond`] lacks (unsigned, flags) are unsupported.
fn cond(s: &str) -> Result<Cond, DecodeError> {
    let up = s.trim().to_ascii_uppercase();
    Ok(match up.as_str() {
        "EQ" => Cond::Eq,
        "NE" => Cond::Ne,
        "LT" => Cond::Lt,
        "GE" => Cond::Ge,
        "GT" => Cond::Gt,
        "LE" => Cond::Le,
        "HI" | "LS" | "CS" | "HS" | "CC" | "LO" | "MI" | "PL" | "VS" | "VC" | "AL" | "NV" => {
            return Err(unsupported(format!("condition code {up}")));
        }
        _ => return Err(malformed(format!("bad condition code {}", named(s)))),
    })
}

/// `LDR/LDAR/LDAPR Rt, [addr]`; post-indexing is unsupported.
fn load(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    no_post_index(ops)?;
    arity(m, ops, 2)?;
    let dst = ctx.dest(reg(ops[0])?);
    let addr = addr(ops[1], ctx)?;
    let kind = match m {
        "LDAR" => LoadKind::Acquire,
        "LDAPR" => LoadKind::AcquirePc,
        _ => LoadKind::Plain,
    };
    Ok(Instr::Load { dst, addr, kind })
}

/// `STR/STLR Rt, [addr]`.
fn store(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    no_post_index(ops)?;
    arity(m, ops, 2)?;
    let src = src(ops[0], ctx)?;
    let addr = addr(ops[1], ctx)?;
    let kind = match m {
        "STLR" => StoreKind::Release,
        _ => StoreKind::Plain,
    };
    Ok(Instr::Store { src, addr, kind })
}

/// `LDR Rt, [Xn], #imm` (a third operand after the address).
fn no_post_index(ops: &[&str]) -> Result<(), DecodeError> {
    match ops {
        [_, a, post] if a.starts_with('[') => Err(unsupported(format!(
            "post-indexed address {},{}",
            show(a),
            show(post)
        ))),
        _ => Ok(()),
    }
}

/// `[Xn]`, `[Xn,#imm]`, `[Xn,Xm]`, `[Xn,Wm,SXTW]` (or `UXTW`/`SXTX`/`UXTX`).
/// Pre-indexing and scaled indices are unsupported.
fn addr(s: &str, ctx: &mut Ctx) -> Result<Addr, DecodeError> {
    if s.ends_with("]!") {
        return Err(unsupported(format!("pre-indexed address {}", show(s))));
    }
    let inner = s.strip_prefix('[').and_then(|r| r.strip_suffix(']'));
    let inner = inner.ok_or_else(|| malformed(format!("expected [Xn...], found {}", named(s))))?;
    let parts = split_operands(inner);
    let base = match parts.first().map(|b| reg(b)).transpose()? {
        Some(RegName::Named(n)) => Operand::Reg(ctx.intern_reg(&n)),
        _ => return Err(malformed(format!("bad base register in {}", show(s)))),
    };
    let offset = match parts[1..] {
        [] => Operand::Imm(0),
        [off] => reg_or_imm(off, ctx)?,
        [idx, ext] if is_plain_extend(ext) => src(idx, ctx)?,
        [_, _] => return Err(unsupported(format!("scaled index {}", show(s)))),
        _ => return Err(malformed(format!("bad address {}", show(s)))),
    };
    Ok(Addr { base, offset })
}

/// An index extension that does not scale (`SXTW`, not `LSL #3`).
fn is_plain_extend(ext: &str) -> bool {
    matches!(
        ext.to_ascii_uppercase().as_str(),
        "SXTW" | "UXTW" | "SXTX" | "UXTX"
    )
}

/// `DMB`/`DSB` with a domain and access types.
fn barrier(m: &str, ops: &[&str]) -> Result<Instr, DecodeError> {
    arity(m, ops, 1)?;
    let (pr, pw, sr, sw) = match ops[0].to_ascii_uppercase().as_str() {
        "SY" | "ISH" | "OSH" | "NSH" => (true, true, true, true),
        "LD" | "ISHLD" | "OSHLD" | "NSHLD" => (true, false, true, true),
        "ST" | "ISHST" | "OSHST" | "NSHST" => (false, true, false, true),
        _ => return Err(malformed(format!("bad barrier option {}", named(ops[0])))),
    };
    Ok(Instr::Fence(if m == "DSB" {
        Fence::Dsb {
            pred_r: pr,
            pred_w: pw,
            succ_r: sr,
            succ_w: sw,
        }
    } else {
        Fence::Order {
            pred_r: pr,
            pred_w: pw,
            succ_r: sr,
            succ_w: sw,
        }
    }))
}

/// `TLBI VAAE1IS, Xt` (and `VAE1`, `VALE1`, `VAALE1`, with or without
/// `IS`: by page number in `Xt`; the ASID is not modelled, every test
/// runs in one address space) or `TLBI VMALLE1[IS]` (every entry).
/// Other operations are unsupported.
fn tlbi(ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    let Some(op) = ops.first().map(|o| o.to_ascii_uppercase()) else {
        return Err(malformed("TLBI takes an operation".into()));
    };
    let (base, broadcast) = match op.strip_suffix("IS") {
        Some(b) => (b, true),
        None => (op.as_str(), false),
    };
    match (base, &ops[1..]) {
        ("VMALLE1", []) => Ok(Instr::Tlbi {
            page: None,
            broadcast,
        }),
        ("VAE1" | "VAAE1" | "VALE1" | "VAALE1", [r]) => Ok(Instr::Tlbi {
            page: Some(src(r, ctx)?),
            broadcast,
        }),
        _ => Err(unsupported(format!("instruction TLBI {}", show(&op)))),
    }
}

/// `ISB` (or `ISB SY`).
fn isb(ops: &[&str]) -> Result<Instr, DecodeError> {
    match ops {
        [] => Ok(Instr::Fence(Fence::Isb)),
        [o] if o.eq_ignore_ascii_case("SY") => Ok(Instr::Fence(Fence::Isb)),
        _ => Err(malformed(format!(
            "bad ISB operands {}",
            show(&ops.join(","))
        ))),
    }
}

/// `B label` / `B.cond label`.
fn branch(m: &str, cond: BranchCond, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity(m, ops, 1)?;
    let target = ctx.label(ops[0])?;
    Ok(Instr::Branch { cond, target })
}

/// `CBZ/CBNZ Rn, label`: a compare with zero.
fn cbz(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity(m, ops, 2)?;
    let a = src(ops[0], ctx)?;
    let c = if m == "CBZ" { Cond::Eq } else { Cond::Ne };
    let target = ctx.label(ops[1])?;
    let cond = BranchCond::Cmp(a, Operand::Zero, c);
    Ok(Instr::Branch { cond, target })
}

/// A read-modify-write before its operands are read: `SWP`/`LDADD`
/// (`Src`), or `CAS`, whose expected value comes from its first operand.
#[derive(Clone, Copy)]
enum RmwFamily {
    Src(RmwOp),
    Cas,
}

/// `SWP`, `LDADD`, `LDSET`, `LDCLR`, `CAS` with an `A`, `L` or `AL`
/// suffix: family and kinds.
fn rmw_mnemonic(m: &str) -> Option<(RmwFamily, LoadKind, StoreKind)> {
    let bases = [
        ("SWP", RmwFamily::Src(RmwOp::Swap)),
        ("LDADD", RmwFamily::Src(RmwOp::Add)),
        ("LDSET", RmwFamily::Src(RmwOp::Set)),
        ("LDCLR", RmwFamily::Src(RmwOp::Clr)),
        ("CAS", RmwFamily::Cas),
    ];
    let (family, suffix) = bases
        .iter()
        .find_map(|(b, f)| m.strip_prefix(b).map(|s| (*f, s)))?;
    let (load, store) = match suffix {
        "" => (LoadKind::Plain, StoreKind::Plain),
        "A" => (LoadKind::Acquire, StoreKind::Plain),
        "L" => (LoadKind::Plain, StoreKind::Release),
        "AL" => (LoadKind::Acquire, StoreKind::Release),
        _ => return None,
    };
    Some((family, load, store))
}

/// `SWP/LDADD Rs, Rt, [Xn]` (src Rs, old value to Rt) and `CAS Rs, Rt, [Xn]`
/// (expects Rs, writes Rt, old value to Rs).
fn rmw(
    m: &str,
    family: RmwFamily,
    (load, store): (LoadKind, StoreKind),
    ops: &[&str],
    ctx: &mut Ctx,
) -> Result<Instr, DecodeError> {
    arity(m, ops, 3)?;
    let (rs, rt) = (reg(ops[0])?, reg(ops[1])?);
    let (op, dst, src) = match family {
        RmwFamily::Src(op) => {
            let src = ctx.operand(rs);
            (op, ctx.dest(rt), src)
        }
        RmwFamily::Cas => {
            let expected = ctx.operand(rs.clone());
            let src = ctx.operand(rt);
            (RmwOp::Cas { expected }, ctx.dest(rs), src)
        }
    };
    let addr = addr(ops[2], ctx)?;
    Ok(Instr::Rmw {
        op,
        dst,
        src,
        addr,
        load,
        store,
    })
}

/// `STADD{L}`, `STSET{L}`, `STCLR{L}` `Rs, [Xn]`: an atomic add, or, or
/// bit clear that returns nothing (`LDADD` ... with destination `XZR`).
fn stadd(m: &str, ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity(m, ops, 2)?;
    let src = src(ops[0], ctx)?;
    let addr = addr(ops[1], ctx)?;
    let store = if m.ends_with('L') {
        StoreKind::Release
    } else {
        StoreKind::Plain
    };
    let op = match &m[2..5] {
        "ADD" => RmwOp::Add,
        "SET" => RmwOp::Set,
        _ => RmwOp::Clr,
    };
    Ok(Instr::Rmw {
        op,
        dst: None,
        src,
        addr,
        load: LoadKind::Plain,
        store,
    })
}

/// Why an instruction this decoder does not know is unsupported.
fn reason(m: &str, ops: &[&str]) -> String {
    const EXCLUSIVE: [&str; 8] = [
        "LDXR", "LDAXR", "STXR", "STLXR", "LDXP", "LDAXP", "STXP", "STLXP",
    ];
    let m = show(m);
    if EXCLUSIVE.iter().any(|e| m.starts_with(e)) {
        format!("exclusive {m}")
    } else if is_mixed_size(&m) {
        format!("mixed-size access {m}")
    } else if matches!(m.as_str(), "TLBI" | "DC" | "IC" | "AT") && !ops.is_empty() {
        format!("instruction {m} {}", show(&ops[0].to_ascii_uppercase()))
    } else {
        format!("instruction {m}")
    }
}

/// A byte, halfword or sign-extending form of a supported access.
fn is_mixed_size(m: &str) -> bool {
    const ACCESS: [&str; 11] = [
        "LDR", "LDAR", "LDAPR", "STR", "STLR", "STADD", "STADDL", "STSET", "STSETL", "STCLR",
        "STCLRL",
    ];
    if m.starts_with("LDRS") {
        return true;
    }
    let narrow = m.strip_suffix('B').or_else(|| m.strip_suffix('H'));
    narrow.is_some_and(|n| ACCESS.contains(&n) || rmw_mnemonic(n).is_some())
}
