//! Presentation only: renderings of records handed in. The terminal summary
//! of a run (`summary`, kept within 80 columns) and comparisons as a terminal table,
//! Markdown, mail text and CSV; HTML with SVG plots grows here.
#![deny(unsafe_code)]

mod chart;
pub mod compare;
pub mod doctor;
pub mod flame;
pub mod format;
pub use format::Format;
pub mod history;
pub mod openmetrics;
pub mod profile;
pub mod summary;
pub mod sweep;
pub mod table;
pub mod tcp;

pub(crate) use summary::wrap;
pub use summary::{delayed_ack_hint, irq_time_note, median_iteration, run_summary};
