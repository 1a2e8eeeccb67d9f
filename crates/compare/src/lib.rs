//! Verdicts from records handed in (never paths or the store): matching by
//! spec key, deltas, significance, the environment diff and the CPU-budget
//! diff per end that explains a throughput change.
//!
//! Empty until the regression core lands.
#![deny(unsafe_code)]
