//! x86 `switch_mm_irqs_off` sets this CPU in `mm_cpumask(next)` only if
//! it is not there yet (`if (!cpumask_test_cpu(...)) cpumask_set_cpu`,
//! sparing the shared line a write), and never for init_mm.

use kernel::arch::x86::tlb::switch_mm_irqs_off;
use kernel::effects::Charge;
use kernel::world::layout;
use kernel::{Effects, World, INIT_MM};
use machine::Scenario;

#[test]
fn cpumask_written_only_when_the_bit_is_new() {
    let mut s = Scenario::default();
    s.machine.cpus = 2;
    let mut w = World::new(&s).unwrap();
    let a = w.mm_alloc().unwrap();
    let b = w.mm_alloc().unwrap();
    let line = |mm| Charge::Line {
        addr: layout::mm_cpumask(mm, 0) & !63,
        write: true,
        batch: false,
    };
    let mut fx = Effects::default();
    switch_mm_irqs_off(&mut w, 0, a, &mut fx);
    assert!(fx.charges.contains(&line(a)), "first switch sets the bit");
    assert!(w.mms[a as usize].cpumask.test(0));
    switch_mm_irqs_off(&mut w, 0, b, &mut fx);
    let mut fx = Effects::default();
    switch_mm_irqs_off(&mut w, 0, a, &mut fx);
    assert!(!fx.charges.contains(&line(a)), "bit still set: no write");
    switch_mm_irqs_off(&mut w, 0, INIT_MM, &mut fx);
    assert!(
        !w.mms[INIT_MM as usize].cpumask.test(0),
        "init_mm's mask untouched"
    );
}
