//! `npugate compare`: two models measured interleaved on the same device in one session, so that
//! whatever the device does meanwhile (heat, clocks, background load) moves both alike and cancels
//! in the paired ratio. [`session`] runs one comparison on one target; the judgement itself is the
//! pure `npugate_gate::compare::judge_compare`.

pub mod session;

pub use session::{compare_on, CompareReport, CompareSpec};
