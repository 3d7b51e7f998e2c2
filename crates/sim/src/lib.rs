//! The discrete-event driver: runs the kernel model in simulated time.
//!
//! ```text
//!  heap of (time, seq, cpu, kind) ──pop──> World::step(cpu) ──> Effects
//!        ^                                                       │
//!        └── next step at now+cost, IPI arrival at now+offset+delivery,
//!            wake-ups at now+offset  <── price charges (cost profile,
//!                                         cache-line model) ─────┘
//! ```
//!
//! Equal-time events run in insertion order (a sequence number), so a
//! scenario and seed always give the same run. Nothing allocates per event
//! once the first few thousand events have warmed the buffers up.

pub mod cache;
pub mod chrome_trace;
pub mod dvm;
pub mod engine;
pub mod queue;
pub mod report;

pub use engine::{End, Sim, SimOptions, Snapshot};
pub use report::Report;
