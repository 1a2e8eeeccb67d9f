//! Pure statistics on slices and histograms, kept apart from all I/O:
//! summaries, Student-t confidence intervals, Welch's test, Mann-Whitney U
//! (written here; statrs' exact path returns the complement p-value for some
//! orderings), bootstrap intervals of ratios with a stored seed, MAD-based
//! outlier flags, bimodality and cliff detection over sweeps.
//!
//! Nothing is implemented yet beyond what the run summary needs; the
//! regression core fills this crate.
#![deny(unsafe_code)]
