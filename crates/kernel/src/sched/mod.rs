//! The scheduler (`kernel/sched/`).
pub mod core;
pub mod fair;
