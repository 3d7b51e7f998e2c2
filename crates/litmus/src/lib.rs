//! herd7-format litmus tests (AArch64, RISC-V, X86) run on the
//! architectures' memory models ([`kernel::hw::wmm`], the view machine the
//! kernel checker is moving onto: docs/checker.md), with their verdicts
//! compared to a kinds file.

pub mod ast;
pub mod catalogue;
mod isa;
pub mod parse;
pub mod run;
