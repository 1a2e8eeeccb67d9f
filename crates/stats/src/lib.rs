//! Pure statistics on slices and histograms, kept apart from all I/O:
//! summaries, Student-t confidence intervals, Welch's test, Mann-Whitney U
//! (written here; statrs' exact path returns the complement p-value for some
//! orderings), Fieller and bootstrap intervals of ratios, MAD-based
//! outlier flags, bimodality and cliff detection over sweeps, and the
//! regression verdict that combines them.
#![deny(unsafe_code)]

mod changepoint;
mod describe;
mod hypothesis;
mod interval;
mod rng;
pub use rng::Rng;
mod verdict;

#[cfg(test)]
mod tests;

pub use changepoint::{
    change_points, describe as describe_change_points, ChangeParams, ChangePoint,
};
pub use describe::{
    bimodal, cliff_steps, cliffs, jain_fairness, mad_outliers, mean, Bimodality, Cliff, Summary,
    MAD_THRESHOLD,
};
pub use hypothesis::{benjamini_hochberg, hodges_lehmann, mann_whitney, welch, Shift, Welch};
pub use interval::{
    bootstrap_ratio, fieller_ratio, mean_with_interval, required_iterations_met, t_interval,
    Interval,
};
pub use verdict::{
    compare, fewest_to_decide, iterations_to_tell, needed_a_side, CompareParams, Comparison,
    Verdict, DEFAULT_SEED, NEEDED_MAX, POWER,
};
