//! The herd7 parser: the shared catalogues parse (as tests or as unsupported
//! with a reason, never as errors), exact decodes of a few tests, malformed
//! inputs give an error on the right line, and no input makes it panic.

use litmus::ast::*;
use litmus::parse::parse;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// The catalogues: `/work/shared/litmus` next to the workspace.
const CATALOGUES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/litmus");

/// Parse a test that must be a [`Parsed::Test`].
fn test(text: &str) -> Test {
    match parse(text) {
        Ok(Parsed::Test(t)) => t,
        other => panic!("expected a test, got {other:?}"),
    }
}

/// Parse a file that must be unsupported: its reason.
fn reason(text: &str) -> String {
    match parse(text) {
        Ok(Parsed::Unsupported { reason, .. }) => reason,
        other => panic!("expected unsupported, got {other:?}"),
    }
}

/// Parse a file that must be malformed: (line, message).
fn error(text: &str) -> (usize, String) {
    match parse(text) {
        Err(ParseError { line, msg }) => (line, msg),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// The register index of `name` in `t`'s thread `th`.
fn reg(t: &Test, th: usize, name: &str) -> Reg {
    let regs = &t.threads[th].regs;
    regs.iter()
        .position(|r| r == name)
        .unwrap_or_else(|| panic!("{name} not in {regs:?}"))
}

/// Per folder: how many files are tests, and the unsupported reasons.
#[derive(Default)]
struct Tally {
    tests: usize,
    reasons: BTreeMap<String, usize>,
}

impl Tally {
    fn unsupported(&self) -> usize {
        self.reasons.values().sum()
    }
}

/// Parse every `.litmus` file of one folder; errors are collected.
fn tally_folder(dir: &Path, errors: &mut Vec<String>) -> Tally {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("readable catalogue folder")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "litmus"))
        .collect();
    files.sort();
    let mut tally = Tally::default();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable litmus file");
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        match parse(&text) {
            Ok(Parsed::Test(t)) => {
                assert_eq!(t.name, stem, "{}: the name is the file's", path.display());
                tally.tests += 1;
            }
            Ok(Parsed::Unsupported { reason, .. }) => {
                *tally.reasons.entry(reason).or_default() += 1;
            }
            Err(e) => errors.push(format!("{}:{}: {}", path.display(), e.line, e.msg)),
        }
    }
    tally
}

#[test]
fn every_catalogue_file_parses() {
    let root = Path::new(CATALOGUES);
    if !root.is_dir() {
        println!("note: {CATALOGUES} is absent; catalogue parse test skipped");
        return;
    }
    let mut errors = Vec::new();
    let mut tallies = BTreeMap::new();
    for entry in std::fs::read_dir(root).expect("readable catalogues") {
        let dir = entry.expect("directory entry").path();
        if let (true, Some(folder)) = (dir.is_dir(), dir.file_name()) {
            let folder = folder.to_string_lossy().into_owned();
            tallies.insert(folder, tally_folder(&dir, &mut errors));
        }
    }
    for (folder, t) in &tallies {
        println!(
            "{folder}: {} tests, {} unsupported",
            t.tests,
            t.unsupported()
        );
        for (reason, n) in &t.reasons {
            println!("  {n:4}  {reason}");
        }
    }
    assert!(errors.is_empty(), "malformed:\n{}", errors.join("\n"));
    for folder in ["aarch64", "riscv"] {
        let t = &tallies[folder];
        let total = t.tests + t.unsupported();
        assert!(
            t.tests * 100 >= total * 95,
            "{folder}: only {} of {total} parse to tests",
            t.tests
        );
    }
}

/// The x86 shapes bundled with the crate (`tests/x86`) are all tests.
#[test]
fn bundled_x86_shapes_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/x86");
    if !dir.is_dir() {
        println!("note: {} is absent; skipped", dir.display());
        return;
    }
    let mut errors = Vec::new();
    let t = tally_folder(&dir, &mut errors);
    assert!(errors.is_empty(), "malformed:\n{}", errors.join("\n"));
    assert_eq!(t.reasons, BTreeMap::new(), "every x86 shape is a test");
}

// ------------------------------------------------------------ exact decodes

const MP_REL_ADDR_LRS_ACQ: &str = "AArch64 MP+rel+addr-lrs-acq
{
 0:X1=x; 0:X3=y;
 1:X1=x; 1:X3=y; 1:X5=z;
}
 P0           | P1                  ;
 MOV W0,#1    | LDR W2,[X3]         ;
 STR W0,[X1]  | EOR W4,W2,W2        ;
 MOV W2,#1    | MOV W6,#1           ;
 STLR W2,[X3] | STR W6,[X5,W4,SXTW] ;
              | LDAR W7,[X5]        ;
              | EOR W8,W7,W7        ;
              | LDR W0,[X1]         ;
exists (1:X2=1 /\\ 1:X0=0)
";

#[test]
fn aarch64_mp_rel_addr_lrs_acq() {
    let t = test(MP_REL_ADDR_LRS_ACQ);
    assert_eq!(t.arch, Arch::AArch64);
    assert_eq!(t.locs, ["x", "y", "z"]);
    assert!(t.init_mem.is_empty());
    let p1 = &t.threads[1];
    assert_eq!(
        p1.regs,
        ["X1", "X3", "X5", "X2", "X4", "X6", "X7", "X8", "X0"]
    );
    let loc = |l: &str| Value::Loc(l.to_string());
    assert_eq!(p1.init, [(0, loc("x")), (1, loc("y")), (2, loc("z"))]);
    let r = |n| Operand::Reg(reg(&t, 1, n));
    let at = |base, offset| Addr { base, offset };
    let eor = |d, a| Instr::Alu {
        dst: reg(&t, 1, d),
        op: AluOp::Xor,
        a: r(a),
        b: r(a),
    };
    let expected = [
        Instr::Load {
            dst: Some(reg(&t, 1, "X2")),
            addr: at(r("X3"), Operand::Imm(0)),
            kind: LoadKind::Plain,
        },
        eor("X4", "X2"),
        Instr::Alu {
            dst: reg(&t, 1, "X6"),
            op: AluOp::Mov,
            a: Operand::Imm(1),
            b: Operand::Imm(0),
        },
        Instr::Store {
            src: r("X6"),
            addr: at(r("X5"), r("X4")),
            kind: StoreKind::Plain,
        },
        Instr::Load {
            dst: Some(reg(&t, 1, "X7")),
            addr: at(r("X5"), Operand::Imm(0)),
            kind: LoadKind::Acquire,
        },
        eor("X8", "X7"),
        Instr::Load {
            dst: Some(reg(&t, 1, "X0")),
            addr: at(r("X1"), Operand::Imm(0)),
            kind: LoadKind::Plain,
        },
    ];
    assert_eq!(p1.code, expected);
    assert_eq!(t.threads[0].code[3].clone(), {
        let r0 = |n| Operand::Reg(reg(&t, 0, n));
        Instr::Store {
            src: r0("X2"),
            addr: at(r0("X3"), Operand::Imm(0)),
            kind: StoreKind::Release,
        }
    });
    assert_eq!(t.quant, Quant::Exists);
    let x = |n| Atom::Reg {
        thread: 1,
        reg: reg(&t, 1, n),
    };
    let expected = Prop::And(vec![
        Prop::Eq(x("X2"), Value::Int(1)),
        Prop::Eq(x("X0"), Value::Int(0)),
    ]);
    assert_eq!(t.cond, expected);
}

#[test]
fn riscv_fence_r_rw_and_annotations() {
    let t = test(
        "RISCV MP+fence.r.rw+aq
\"doc\"
Cycle=Rfe Fence.r.rwdRR Fre
{
0:x5=1; 0:x6=x; 0:x7=y;
1:x6=y; 1:x8=x;
}
 P0             | P1          ;
 sw x5,0(x6)    | lw.aq x5,0(x6) ;
 fence r,rw     | fence w,r   ;
 sw.rl x5,8(x7) | lw x7,0(x8) ;
 fence          | fence.tso   ;
 amoswap.w.aqrl x0,x5,(x6) | fence.i ;
~exists
(1:x5=1 /\\ 1:x7=0)
",
    );
    let p0 = &t.threads[0];
    assert_eq!(
        p0.init,
        [
            (0, Value::Int(1)),
            (1, Value::Loc("x".into())),
            (2, Value::Loc("y".into()))
        ]
    );
    let order = |pred_r, pred_w, succ_r, succ_w| {
        Instr::Fence(Fence::Order {
            pred_r,
            pred_w,
            succ_r,
            succ_w,
        })
    };
    assert_eq!(p0.code[1], order(true, false, true, true));
    assert_eq!(p0.code[3], order(true, true, true, true));
    assert_eq!(
        p0.code[2],
        Instr::Store {
            src: Operand::Reg(0),
            addr: Addr {
                base: Operand::Reg(2),
                offset: Operand::Imm(8)
            },
            kind: StoreKind::Release,
        }
    );
    assert_eq!(
        p0.code[4],
        Instr::Rmw {
            op: RmwOp::Swap,
            dst: None,
            src: Operand::Reg(0),
            addr: Addr {
                base: Operand::Reg(1),
                offset: Operand::Imm(0)
            },
            load: LoadKind::Acquire,
            store: StoreKind::Release,
        }
    );
    let p1 = &t.threads[1];
    assert!(matches!(
        p1.code[0],
        Instr::Load {
            kind: LoadKind::Acquire,
            ..
        }
    ));
    assert_eq!(p1.code[1], order(false, true, true, false));
    assert_eq!(p1.code[3], Instr::Fence(Fence::Tso));
    assert_eq!(p1.code[4], Instr::Fence(Fence::FenceI));
    assert_eq!(t.quant, Quant::NotExists);
}

#[test]
fn branches_resolve_forward_labels() {
    let t = test(
        "AArch64 LB+rel+BEQ3
{
0:X5=x; 0:X4=y;
1:X4=y; 1:X5=x;
}
P0          | P1         ;
LDR W0,[X5] | LDR W3,[X4];
MOV W2,#1   | CMP W0,#0  ;
STLR W2,[X4]| MOV W1,#7  ;
            | B.EQ over  ;
            | MOV W1,W3  ;
            | over:      ;
            | CBNZ W1,L9 ;
            | L9: B over ;
exists(0:X0=7 /\\ 1:X3=1)
",
    );
    let p1 = &t.threads[1];
    let br = |cond, target| Instr::Branch { cond, target };
    assert_eq!(p1.code[3], br(BranchCond::Flags(Cond::Eq), 5));
    let w1 = Operand::Reg(reg(&t, 1, "X1"));
    assert_eq!(
        p1.code[5],
        br(BranchCond::Cmp(w1, Operand::Zero, Cond::Ne), 6)
    );
    assert_eq!(p1.code[6], br(BranchCond::Always, 5));
    assert_eq!(
        p1.code[1],
        Instr::Cmp {
            a: Operand::Reg(reg(&t, 1, "X0")),
            b: Operand::Imm(0)
        }
    );
}

#[test]
fn riscv_branch_and_label_at_the_end() {
    let t = test(
        "RISCV LB+ctrl
{ 0:x6=x; 0:x8=y; 1:x6=y; 1:x8=x; }
 P0              | P1          ;
 lw x5,0(x6)     | lw x5,0(x6) ;
 bne x5,x0,LC00  | li t0,1     ;
 LC00:           | sw t0,0(x8) ;
 ori x7,x0,1     |             ;
 sw x7,0(x8)     |             ;
 j LC01          |             ;
 LC01:           |             ;
exists (0:x5=1 /\\ 1:a0=0)
",
    );
    let p0 = &t.threads[0];
    let x5 = Operand::Reg(reg(&t, 0, "x5"));
    let cond = BranchCond::Cmp(x5, Operand::Zero, Cond::Ne);
    assert_eq!(p0.code[1], Instr::Branch { cond, target: 2 });
    assert_eq!(
        p0.code[4],
        Instr::Branch {
            cond: BranchCond::Always,
            target: 5
        }
    );
    assert_eq!(t.threads[1].regs, ["x6", "x8", "x5", "x10"]);
}

#[test]
fn initial_state_forms() {
    let t = test(
        "AArch64 Init
{
int z=1; uint64_t w;
0:X1=x; 0:W2=-3;
y=0; [v]=0x10;
int64_t 1:X0;
}
 P0          | P1 ;
 LDR W0,[X1] |    ;
exists (0:X0=x \\/ [q]=2)
",
    );
    assert_eq!(t.locs, ["z", "w", "x", "y", "v", "q"]);
    let int = Value::Int;
    assert_eq!(
        t.init_mem,
        [
            ("z".into(), int(1)),
            ("y".into(), int(0)),
            ("v".into(), int(16))
        ]
    );
    assert_eq!(t.threads[0].regs[..2], ["X1", "X2"]);
    assert_eq!(
        t.threads[0].init,
        [(0, Value::Loc("x".into())), (1, int(-3))]
    );
    assert_eq!(t.threads[1].regs, ["X0"]);
    assert!(t.threads[1].init.is_empty());
}

#[test]
fn and_binds_tighter_than_or() {
    let t = test(
        "AArch64 Prec
{ 0:X1=x; }
 P0 ;
 LDR W0,[X1] ;
forall 0:X0=1 /\\ x=2 \\/ ~[x]=3 /\\ not (0:W0=4 \\/ true) \\/ false
",
    );
    let r0 = Atom::Reg { thread: 0, reg: 1 };
    let x = || Atom::Mem("x".into());
    let eq = |a, n| Prop::Eq(a, Value::Int(n));
    let expected = Prop::Or(vec![
        Prop::And(vec![eq(r0.clone(), 1), eq(x(), 2)]),
        Prop::And(vec![
            Prop::Not(Box::new(eq(x(), 3))),
            Prop::Not(Box::new(Prop::Or(vec![eq(r0, 4), Prop::True]))),
        ]),
        Prop::False,
    ]);
    assert_eq!(t.quant, Quant::Forall);
    assert_eq!(t.cond, expected);
}

#[test]
fn lse_atomics() {
    let t = test(
        "AArch64 LSE
{ 0:X3=y; }
 P0 ;
 CAS WZR,W4,[X3] ;
 SWPA W4,WZR,[X3] ;
 LDADDAL W4,W2,[X3] ;
 STADDL W4,[X3] ;
 CASL W1,W4,[X3] ;
 LDSETA W4,W2,[X3] ;
 LDCLRL W4,WZR,[X3] ;
 STCLR W4,[X3] ;
 STSETL W4,[X3] ;
exists (y=1)
",
    );
    let r = |n| reg(&t, 0, n);
    let addr = Addr {
        base: Operand::Reg(r("X3")),
        offset: Operand::Imm(0),
    };
    let rmw = |op, dst, src, load, store| Instr::Rmw {
        op,
        dst,
        src,
        addr,
        load,
        store,
    };
    let x4 = Operand::Reg(r("X4"));
    let (plain_l, acq) = (LoadKind::Plain, LoadKind::Acquire);
    let (plain_s, rel) = (StoreKind::Plain, StoreKind::Release);
    let cas0 = RmwOp::Cas {
        expected: Operand::Zero,
    };
    let cas1 = RmwOp::Cas {
        expected: Operand::Reg(r("X1")),
    };
    let expected = [
        rmw(cas0, None, x4, plain_l, plain_s),
        rmw(RmwOp::Swap, None, x4, acq, plain_s),
        rmw(RmwOp::Add, Some(r("X2")), x4, acq, rel),
        rmw(RmwOp::Add, None, x4, plain_l, rel),
        rmw(cas1, Some(r("X1")), x4, plain_l, rel),
        rmw(RmwOp::Set, Some(r("X2")), x4, acq, plain_s),
        rmw(RmwOp::Clr, None, x4, plain_l, rel),
        rmw(RmwOp::Clr, None, x4, plain_l, plain_s),
        rmw(RmwOp::Set, None, x4, plain_l, rel),
    ];
    assert_eq!(t.threads[0].code, expected);
}

#[test]
fn x86_store_buffering() {
    let t = test(
        "X86 SB
{ x=0; y=0; }
 P0          | P1          ;
 MOV [x],$1  | MOV [y],$1  ;
 MFENCE      | XCHG [z],EBX ;
 MOV EAX,[y] | MOV EAX,[x] ;
exists (0:EAX=0 /\\ 1:EAX=0)
",
    );
    assert_eq!(t.locs, ["x", "y", "z"]);
    let sym = |i| Addr {
        base: Operand::Sym(i),
        offset: Operand::Imm(0),
    };
    let p0 = &t.threads[0].code;
    assert_eq!(
        p0[0],
        Instr::Store {
            src: Operand::Imm(1),
            addr: sym(0),
            kind: StoreKind::Plain
        }
    );
    assert_eq!(
        p0[2],
        Instr::Load {
            dst: Some(0),
            addr: sym(1),
            kind: LoadKind::Plain
        }
    );
    let ebx = reg(&t, 1, "EBX");
    assert!(matches!(
        t.threads[1].code[1],
        Instr::Rmw { op: RmwOp::Swap, dst: Some(d), src: Operand::Reg(s), .. } if d == ebx && s == ebx
    ));
}

#[test]
fn comments_are_skipped_and_lines_kept() {
    let (line, msg) = error(
        "AArch64 C (* a comment *)
(* a comment
   over lines *)
{ 0:X1=x; }
 P0 ; (* row *)
 LDR W0,[X1] (* here *) ;
 B nowhere ;
exists (0:X0=1)
",
    );
    assert_eq!(line, 7, "{msg}");
    assert!(msg.contains("unknown label nowhere"), "{msg}");
}

// ---------------------------------------------------------- unsupported

#[test]
fn unsupported_reasons_name_the_first_offender() {
    let base =
        |code: &str| format!("AArch64 U\n{{ 0:X1=x; }}\n P0 ;\n {code} ;\nexists (0:X0=1)\n");
    assert_eq!(reason(&base("TLBI ALLE1IS")), "instruction TLBI ALLE1IS");
    assert_eq!(reason(&base("ADR X0,L0")), "instruction ADR");
    let cset = test(&base("CSET W0,EQ"));
    assert!(matches!(
        cset.threads[0].code[0],
        Instr::Csel {
            a: Operand::Imm(1),
            b: Operand::Zero,
            cond: Cond::Eq,
            ..
        }
    ));
    assert_eq!(reason(&base("LDXR W0,[X1]")), "exclusive LDXR");
    assert_eq!(reason(&base("LDRB W0,[X1]")), "mixed-size access LDRB");
    assert_eq!(
        reason(&base("ADD W0,W0,W1,LSL #2")),
        "shifted operand LSL #2"
    );
    assert_eq!(reason(&base("B.HI L")), "condition code HI");
    // VMSA tests parse; the features the model leaves out are reasons.
    let vmsa = "AArch64 V\nVariant=vmsa,fatal\n{ }\n P0 ;\nexists (x=0)\n";
    test(vmsa);
    let pte = "AArch64 V\n{ [PTE(z)]=(oa:PA(z), valid:0); }\n P0 ;\nexists (x=0)\n";
    test(pte);
    let handler = "AArch64 F\n{ }\n P0 | P1 | P1.F ;\n NOP | NOP | NOP ;\nexists (x=0)\n";
    test(handler);
    let fault = "AArch64 F\n{ 0:X1=x; }\n P0 ;\nL0: LDR W0,[X1] ;\nexists(~fault(P0:L0, x))\n";
    test(fault);
    let imprecise = "AArch64 V\nVariant=vmsa,imprecise\n{ }\n P0 ;\nexists (x=0)\n";
    assert_eq!(reason(imprecise), "Variant=imprecise");
    let riscv = "RISCV R\n{ 0:x6=x; }\n P0 ;\n lr.w x5,0(x6) ;\nexists (x=0)\n";
    assert_eq!(reason(riscv), "exclusive lr.w");
    match parse("PPC MP\n{ }\n P0 ;\nexists (x=0)\n") {
        Ok(Parsed::Unsupported {
            arch: None, reason, ..
        }) => assert_eq!(reason, "architecture PPC"),
        other => panic!("{other:?}"),
    }
}

// ------------------------------------------------------------- malformed

#[test]
fn malformed_inputs_name_the_line() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 1, "empty first line"),
        ("AArch64\n", 1, "missing test name"),
        (
            "AArch64 M\n 0:X1=x;\n P0 ;\nexists (x=1)\n",
            2,
            "expected '{'",
        ),
        (
            "AArch64 M\n{ 0:X1=x;\n P0 ;\n NOP ;\nexists (x=1)\n",
            2,
            "never closed",
        ),
        (
            "AArch64 M\n{ 0:X1=x; }\n P0 | P1 ;\n NOP ;\nexists (x=1)\n",
            4,
            "row has 1 columns",
        ),
        (
            "AArch64 M\n{ }\n P0 | P1 ;\n NOP | NOP\nexists (x=1)\n",
            4,
            "does not end with ';'",
        ),
        (
            "AArch64 M\n{ }\n P0 ;\n NOP ;\n B.EQ out ;\nexists (x=1)\n",
            5,
            "unknown label out",
        ),
        (
            "AArch64 M\n{ }\n P0 ;\n NOP ;\nexists (x=1 /\\ 2:X0=1)\n",
            5,
            "thread 2",
        ),
        (
            "AArch64 M\n{ 3:X0=1; }\n P0 ;\n NOP ;\nexists (x=1)\n",
            2,
            "thread 3",
        ),
        (
            "AArch64 M\n{ }\n P0 ;\n NOP ;\nexists (x=1 /\\ )\n",
            5,
            "expected a register",
        ),
        (
            "AArch64 M\n{ }\n P0 ;\n NOP ;\nexists (x=1\n",
            6,
            "expected ')'",
        ),
        (
            "AArch64 M\n{ }\n P0 ;\n NOP ;\nexists x=1 y=2\n",
            5,
            "after the condition",
        ),
        (
            "AArch64 M\n{ }\n P0 ;\n NOP ;\nperhaps (x=1)\n",
            5,
            "does not end with ';'",
        ),
        (
            "AArch64 M\n{ }\n P0 ;\n NOP ;\n",
            4,
            "missing final condition",
        ),
        (
            "AArch64 M\n{ }\n P1 ;\n NOP ;\nexists (x=1)\n",
            3,
            "expected thread name P0",
        ),
        (
            "AArch64 M\n{ }\n P0 ;\n MOV W0 ;\nexists (x=1)\n",
            4,
            "MOV takes 2 operands",
        ),
        (
            "AArch64 M\n{ }\n P0 ;\n L: ;\n L: ;\nexists (x=1)\n",
            5,
            "label L defined twice",
        ),
        ("AArch64 M\n(* open\n{ }\n", 2, "comment"),
        (
            "AArch64 M\n{ 0:Q1=1; }\n P0 ;\nexists (x=1)\n",
            2,
            "unknown register Q1",
        ),
        (
            "RISCV M\n{ }\n P0 ;\n lw x5,x6 ;\nexists (x=1)\n",
            4,
            "offset(register)",
        ),
    ];
    for (text, line, needle) in cases {
        let (l, msg) = error(text);
        assert_eq!(
            (l, msg.contains(needle)),
            (*line, true),
            "{text:?}: {l}: {msg}"
        );
    }
}

#[test]
fn messages_escape_control_characters() {
    let (line, msg) = error("AArch64 M\n{ }\n P0 ;\n LDR W0,[X1\u{7}] ;\nexists (x=1)\n");
    assert_eq!(line, 4);
    assert!(msg.contains("\\u{7}"), "{msg}");
    let (_, msg) = error("AArch64 M\n{ }\n P\r0 ;\nexists (x=1)\n");
    assert!(!msg.contains('\r'), "{msg:?}");
}

/// A message or a reason is one line.
fn one_line(s: &str) -> bool {
    !s.contains(['\n', '\r'])
}

/// Text that looks like a litmus test, with pieces swapped or corrupted.
fn litmusish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "AArch64 T\n",
        "RISCV T\n",
        "X86 T\n",
        "{",
        "}",
        "0:X1=x;",
        "int x=1;",
        "P0 | P1 ;",
        "P0 ;",
        " LDR W0,[X1] ;",
        " STR W0,[X1,W2,SXTW] ;",
        "L0:",
        " B.EQ L0 ;",
        "|",
        ";",
        "exists",
        "~exists",
        "forall",
        "(",
        ")",
        "/\\",
        "\\/",
        "0:X0=1",
        "[x]=2",
        "~",
        "(* c *)",
        "(*",
        "\n",
        "\r",
        "\u{0}",
        "é",
        "\u{2028}",
        " lw.aq x5,0(x6) ;",
        " MOV [x],$1 ;",
        "fault(P0:L0,x)",
        "[PTE(x)]=(valid:0);",
        "locations [x;]",
    ]);
    prop::collection::vec(pieces, 0..40).prop_map(|v| v.concat())
}

/// Check one input: no panic, one-line messages.
fn check_input(text: &str) -> Result<(), TestCaseError> {
    match parse(text) {
        Ok(Parsed::Test(_)) => {}
        Ok(Parsed::Unsupported { reason, .. }) => prop_assert!(one_line(&reason), "{reason:?}"),
        Err(e) => {
            prop_assert!(one_line(&e.msg), "{:?}", e.msg);
            prop_assert!(e.line >= 1);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        check_input(&text)?;
    }

    #[test]
    fn litmus_like_strings_never_panic(text in litmusish()) {
        check_input(&text)?;
    }

    #[test]
    fn corrupted_catalogue_tests_never_panic(cut in 0usize..400, byte in any::<char>()) {
        let mut text: Vec<char> = MP_REL_ADDR_LRS_ACQ.chars().collect();
        let i = cut % text.len();
        text[i] = byte;
        check_input(&text.into_iter().collect::<String>())?;
    }
}
