//! The scheduler (`kernel/sched/`).
pub mod core;
