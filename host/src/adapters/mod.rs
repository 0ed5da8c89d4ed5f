//! Front-end formats: turning what a model API streams into tool uses, and
//! results back into what it expects. Pure functions and small state
//! machines; no I/O.

pub mod anthropic;
