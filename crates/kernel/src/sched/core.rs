//! kernel/sched/core.c: picking the next task and `context_switch`.

use crate::arch::{enter_lazy_tlb, switch_mm};
use crate::effects::Effects;
use crate::world::{TaskState, World};
use crate::INIT_MM;
use machine::{Cost, CpuId};

/// kernel/sched/core.c: `__schedule` → `context_switch`: run the next task on
/// this CPU's runqueue, or go idle. A task without an mm (kernel thread, idle)
/// gets `enter_lazy_tlb`; a user task gets `switch_mm` (x86: `switch_mm_irqs_off`).
pub fn schedule(w: &mut World, cpu: CpuId, fx: &mut Effects) {
    let next = w.cpus[cpu as usize].rq.pop_front();
    fx.cost(Cost::ContextSwitch, 1);
    match next {
        Some(t) => {
            w.cpus[cpu as usize].curr = Some(t);
            let task = &mut w.tasks[t as usize];
            task.state = TaskState::Running;
            let mm = task.mm;
            if mm == INIT_MM {
                enter_lazy_tlb(w, cpu, fx);
            } else {
                switch_mm(w, cpu, mm, fx);
            }
        }
        None => enter_lazy_tlb(w, cpu, fx),
    }
}
