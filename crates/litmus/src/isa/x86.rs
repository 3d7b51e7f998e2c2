//! X86 (herd7's `X86` tests, Intel syntax): `MOV` between registers,
//! immediates (`$1`) and named locations (`[x]`), `XCHG` with memory and
//! `MFENCE`. Registers are `EAX`..`EDI` (`RAX`..`RDI` fold onto them);
//! a memory operand `[x]` is the location's address ([`Operand::Sym`]).

use super::{
    alu_or_nop, arity, imm, is_ident, malformed, named, show, split_mnemonic, split_operands,
    unsupported, Ctx, DecodeError, RegName,
};
use crate::ast::{Addr, AluOp, Fence, Instr, LoadKind, Operand, RmwOp, StoreKind};

/// The general-purpose registers herd7's X86 tests use.
const REGS: [&str; 8] = ["EAX", "EBX", "ECX", "EDX", "ESI", "EDI", "EBP", "ESP"];

/// `EAX` -> `EAX`, `RAX` -> `EAX`. Case-insensitive; no zero register.
pub(crate) fn fold_reg(name: &str) -> Option<RegName> {
    let up = name.to_ascii_uppercase();
    let e = match up.strip_prefix('R') {
        Some(rest) => format!("E{rest}"),
        None => up,
    };
    REGS.contains(&e.as_str()).then_some(RegName::Named(e))
}

/// Decode one X86 instruction.
pub(crate) fn decode(text: &str, ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    let (mnem, rest) = split_mnemonic(text)?;
    let m = mnem.to_ascii_uppercase();
    let ops = split_operands(rest);
    match m.as_str() {
        "MOV" => mov(&ops, ctx),
        "XCHG" => xchg(&ops, ctx),
        "MFENCE" => arity(&m, &ops, 0).map(|()| Instr::Fence(full_fence())),
        "LOCK" => {
            let next = rest.split_whitespace().next().unwrap_or("");
            Err(unsupported(format!("instruction LOCK {}", show(next))))
        }
        _ => Err(unsupported(format!("instruction {}", show(&m)))),
    }
}

/// `MFENCE`: orders everything.
fn full_fence() -> Fence {
    Fence::Order {
        pred_r: true,
        pred_w: true,
        succ_r: true,
        succ_w: true,
    }
}

/// A register's folded name, or a malformed-operand error.
fn reg(s: &str) -> Result<RegName, DecodeError> {
    fold_reg(s).ok_or_else(|| malformed(format!("expected a register, found {}", named(s))))
}

/// A register or an immediate `$n`.
fn reg_or_imm(s: &str, ctx: &mut Ctx) -> Result<Operand, DecodeError> {
    match s.strip_prefix('$') {
        Some(n) => imm(n.trim()),
        None => Ok(ctx.operand(reg(s)?)),
    }
}

/// `[x]`: the address of location `x`. Register-indirect or computed
/// addresses are unsupported.
fn mem(s: &str, ctx: &mut Ctx) -> Result<Addr, DecodeError> {
    let inner = s.strip_prefix('[').and_then(|r| r.strip_suffix(']'));
    let inner = inner.ok_or_else(|| malformed(format!("bad memory operand {}", named(s))))?;
    let name = inner.trim();
    if !is_ident(name) || fold_reg(name).is_some() {
        return Err(unsupported(format!("address {}", show(s))));
    }
    let base = Operand::Sym(ctx.loc(name));
    Ok(Addr {
        base,
        offset: Operand::Imm(0),
    })
}

/// `MOV [x],src` (store), `MOV reg,[x]` (load), `MOV reg,src` (`Alu Mov`).
fn mov(ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity("MOV", ops, 2)?;
    match (ops[0].starts_with('['), ops[1].starts_with('[')) {
        (true, true) => Err(malformed("MOV from memory to memory".to_string())),
        (true, false) => {
            let addr = mem(ops[0], ctx)?;
            let src = reg_or_imm(ops[1], ctx)?;
            let kind = StoreKind::Plain;
            Ok(Instr::Store { src, addr, kind })
        }
        (false, true) => {
            let dst = ctx.dest(reg(ops[0])?);
            let addr = mem(ops[1], ctx)?;
            let kind = LoadKind::Plain;
            Ok(Instr::Load { dst, addr, kind })
        }
        (false, false) => {
            let dst = ctx.dest(reg(ops[0])?);
            let a = reg_or_imm(ops[1], ctx)?;
            Ok(alu_or_nop(dst, AluOp::Mov, a, Operand::Imm(0)))
        }
    }
}

/// `XCHG [x],reg` / `XCHG reg,[x]`: a swap whose old value lands in the
/// register it wrote (acquire read, release write: locked, fully ordered).
fn xchg(ops: &[&str], ctx: &mut Ctx) -> Result<Instr, DecodeError> {
    arity("XCHG", ops, 2)?;
    let (m, r) = match (ops[0].starts_with('['), ops[1].starts_with('[')) {
        (true, false) => (ops[0], ops[1]),
        (false, true) => (ops[1], ops[0]),
        (false, false) => return Err(unsupported("register XCHG".to_string())),
        (true, true) => return Err(malformed("XCHG of memory with memory".to_string())),
    };
    let (addr, dst) = (mem(m, ctx)?, ctx.dest(reg(r)?));
    let src = dst.map_or(Operand::Zero, Operand::Reg);
    Ok(Instr::Rmw {
        op: RmwOp::Swap,
        dst,
        src,
        addr,
        load: LoadKind::Acquire,
        store: StoreKind::Release,
    })
}
