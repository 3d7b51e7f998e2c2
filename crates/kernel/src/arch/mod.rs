//! Architecture code (`arch/`).
pub mod x86;
