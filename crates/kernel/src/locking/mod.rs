//! kernel/locking/: the sleeping locks the model queues on.

pub mod rwsem;
