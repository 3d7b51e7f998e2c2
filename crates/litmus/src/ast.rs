//! A litmus test after parsing: the threads' instructions in one small
//! instruction set that the three architectures' assembly decodes into,
//! the initial state, and the final condition.
//!
//! The instruction set keeps exactly what the memory models need to see:
//! which register each value came from (dependencies), the kind of each
//! access (acquire, release, ...), barriers with what they order, and
//! branches (control dependencies).

/// The architecture a test is written for (herd7's first word).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    AArch64,
    RiscV,
    X86,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::AArch64 => "AArch64",
            Arch::RiscV => "RISCV",
            Arch::X86 => "X86",
        }
    }
}

/// A register of one thread: an index into [`Thread::regs`].
pub type Reg = usize;

/// A value in the initial state or in a condition: an integer, or the
/// address of a named location (`0:X1=x`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Int(i64),
    Loc(String),
    /// VMSA: the address of location `x`'s page-table entry (`pte_x`,
    /// `PTE(x)`).
    PteOf(String),
    /// VMSA: the physical address of location `x` (`phy_x`, `PA(x)`).
    PhysOf(String),
    /// VMSA: a page-table entry value `(oa:phy_x, valid:0, ...)`.
    Pte(PteLit),
}

/// A page-table entry as written: unlisted fields take herd7's defaults
/// (valid, af, db: 1; dbm: 0; el0: 1; oa: the entry's own location's
/// page, where there is one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PteLit {
    /// The output address: the location whose physical page it names.
    pub oa: Option<String>,
    pub valid: Option<bool>,
    pub af: Option<bool>,
    pub db: Option<bool>,
    pub dbm: Option<bool>,
    pub el0: Option<bool>,
}

/// An instruction operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    Reg(Reg),
    Imm(i64),
    /// The zero register (`WZR`/`XZR`, RISC-V `x0`): reads 0, writes vanish.
    Zero,
    /// The address of location [`Test::locs`]`[i]` (x86 `MOV [x],$1`).
    Sym(usize),
}

/// Arithmetic and logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    Add,
    Sub,
    And,
    Or,
    Xor,
    /// `dst = a` (`b` ignored).
    Mov,
    /// Logical shift right / left by `b` (Arm `LSR`, `LSL`).
    Lsr,
    Lsl,
    /// Bit clear: `a & !b` (Arm `BIC`).
    Bic,
}

/// A comparison (condition codes after `CMP a, b`, or a RISC-V branch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    Eq,
    Ne,
    /// Signed less than.
    Lt,
    /// Signed greater or equal.
    Ge,
    /// Signed greater than.
    Gt,
    /// Signed less or equal.
    Le,
}

/// The kind of a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadKind {
    Plain,
    /// Arm `LDAR`, RISC-V `.aq`: RCsc (ordered after earlier releases) on
    /// Arm and on RISC-V AMOs; a RISC-V `lw.aq` is RCpc (the model decides).
    Acquire,
    /// Arm `LDAPR` (RCpc): not ordered after earlier releases.
    AcquirePc,
}

/// The kind of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreKind {
    Plain,
    /// Arm `STLR`, RISC-V `.rl`.
    Release,
}

/// An address: `base + offset`, where the base register holds a
/// location's address (`[X1]`, `[X1,W4,SXTW]`, `8(x6)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Addr {
    pub base: Operand,
    pub offset: Operand,
}

/// A barrier, described by what it orders. `pred`/`succ` name the kinds
/// of earlier and later accesses ordered (RISC-V `fence pred,succ`; Arm
/// `DMB SY` = rw,rw, `DMB LD` = r,rw, `DMB ST` = w,w).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fence {
    Order {
        pred_r: bool,
        pred_w: bool,
        succ_r: bool,
        succ_w: bool,
    },
    /// RISC-V `fence.tso`: r -> rw and w -> w.
    Tso,
    /// Arm `DSB` (ordering as `Order`; it also completes TLBIs and what
    /// a later `ISB` orders translation walks after).
    Dsb {
        pred_r: bool,
        pred_w: bool,
        succ_r: bool,
        succ_w: bool,
    },
    /// Arm `ISB`: context synchronisation (later loads wait for earlier
    /// control and address dependencies to resolve).
    Isb,
    /// RISC-V `fence.i`: orders instruction fetch only; no data access.
    FenceI,
}

/// Which read-modify-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RmwOp {
    /// `SWP`: write `src`.
    Swap,
    /// `LDADD`/`STADD`: write old + `src`.
    Add,
    /// `LDSET`/`STSET`: write old | `src`.
    Set,
    /// `LDCLR`/`STCLR`: write old & !`src`.
    Clr,
    /// `CAS`: write `src` only if old == `expected`.
    Cas { expected: Operand },
}

/// What a branch tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BranchCond {
    Always,
    /// The flags of the last `Cmp` (Arm `B.EQ`).
    Flags(Cond),
    /// Compare two operands (RISC-V `bne a,b`, Arm `CBZ a` = `Cmp(a, Zero, Eq)`).
    Cmp(Operand, Operand, Cond),
}

/// One instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instr {
    Nop,
    /// `dst = a op b`; the value depends on both operands.
    Alu {
        dst: Reg,
        op: AluOp,
        a: Operand,
        b: Operand,
    },
    /// Arm `CMP a, b`: sets the flags (which carry the operands' dependencies).
    Cmp {
        a: Operand,
        b: Operand,
    },
    /// Arm `CSEL dst, a, b, cond`: `dst = cond(flags) ? a : b`. The value
    /// depends on `a` and `b`, not on the flags (herd7's aarch64 model).
    Csel {
        dst: Reg,
        a: Operand,
        b: Operand,
        cond: Cond,
    },
    /// `dst = [addr]` (`dst: None`: the zero register).
    Load {
        dst: Option<Reg>,
        addr: Addr,
        kind: LoadKind,
    },
    /// `[addr] = src`.
    Store {
        src: Operand,
        addr: Addr,
        kind: StoreKind,
    },
    /// An atomic read-modify-write of `[addr]` (Arm LSE `SWP`, `LDADD`,
    /// `STADD`, `CAS` and their `A`/`L`/`AL` forms). `dst` receives the
    /// old value; `None` (the zero register) makes it a no-return atomic,
    /// whose read Arm does not order as a read (DMB LD, acquire).
    Rmw {
        op: RmwOp,
        dst: Option<Reg>,
        src: Operand,
        addr: Addr,
        load: LoadKind,
        store: StoreKind,
    },
    Fence(Fence),
    /// Arm `TLBI`: invalidate the TLB entries of the page whose number
    /// (`VA >> 12`) is in `page` (`None`: every entry, `VMALLE1`), in
    /// every thread's TLB if `broadcast` (`...IS`), else in its own.
    Tlbi {
        page: Option<Operand>,
        broadcast: bool,
    },
    /// Jump to instruction index `target` if `cond` holds.
    Branch {
        cond: BranchCond,
        target: usize,
    },
}

/// One thread (herd7's `Pn` column).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Thread {
    /// Register names as written in the test (`X1`, `x5`, `EAX`), upper-cased
    /// for Arm with `W`/`X` folded to `X` (W1 and X1 are one register).
    pub regs: Vec<String>,
    /// Initial register values (unlisted registers start at 0).
    pub init: Vec<(Reg, Value)>,
    /// The thread's code, then its fault handler's (`P1.F`), if any.
    pub code: Vec<Instr>,
    /// Where the fault handler starts in `code` (`code.len()`: none).
    pub main_len: usize,
    /// The labels of the thread's code: name and instruction index.
    pub labels: Vec<(String, usize)>,
}

/// Something a condition can name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Atom {
    /// `1:X0`: thread 1's register (an index into its `regs`).
    Reg { thread: usize, reg: Reg },
    /// `x` or `[x]`: the final value of a location.
    Mem(String),
    /// VMSA: `pte_x` or `[PTE(x)]`: the final value of `x`'s entry.
    Pte(String),
}

/// The kinds of fault a condition may name (`MMU:Translation`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    Translation,
    AccessFlag,
    Permission,
}

/// The VMSA settings of a test (herd7 `Variant=vmsa`, `TTHM=...`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vmsa {
    /// Hardware AF / DB management per thread (`TTHM=HA HD`, `P1:HA`).
    pub ha: Vec<bool>,
    pub hd: Vec<bool>,
    /// `Variant=fatal`: a fault ends its thread, handler or not.
    pub fatal: bool,
    /// Initial page-table entries (`pte_x=(...)`, `[PTE(x)]=(...)`).
    pub init_pte: Vec<(String, PteLit)>,
}

/// A proposition over the final state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prop {
    True,
    False,
    Eq(Atom, Value),
    Not(Box<Prop>),
    /// VMSA: `fault(P0:L0,x,MMU:Translation)`: thread `thread` took a
    /// fault (at the instruction `at`, on location `loc`, of `kind`:
    /// each `None` matches any).
    Fault {
        thread: usize,
        at: Option<usize>,
        loc: Option<String>,
        kind: Option<FaultKind>,
    },
    And(Vec<Prop>),
    Or(Vec<Prop>),
}

/// The final condition's quantifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quant {
    /// `exists P`: Allowed if some final state satisfies P, else Forbidden.
    Exists,
    /// `~exists P`: the same question, reported the same way.
    NotExists,
    /// `forall P`: Required if every final state satisfies P.
    Forall,
}

/// A parsed test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Test {
    pub name: String,
    pub arch: Arch,
    /// Every location the test names (initial state, addresses, condition).
    pub locs: Vec<String>,
    /// Initial memory values (unlisted locations start at 0).
    pub init_mem: Vec<(String, Value)>,
    pub threads: Vec<Thread>,
    /// VMSA settings: `Some` when the test uses virtual memory (every
    /// access then goes through its location's page-table entry).
    pub vmsa: Option<Vmsa>,
    pub quant: Quant,
    pub cond: Prop,
}

/// What parsing a file gives: a test the models can run, or a test they
/// cannot express (with the reason), or an error (malformed file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    Test(Test),
    /// Well-formed, but uses something the models do not express.
    Unsupported {
        name: String,
        arch: Option<Arch>,
        reason: String,
    },
}

/// A malformed file: the line (1-based) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub msg: String,
}
