//! The Arm VMSA extension of the view machine ([`crate::hw::wmm`]):
//! translation-table walks as reads, TLBIs, their completion at a DSB,
//! context synchronisation, translation faults.
