//! Plain data shared by every stage of plumb: what one end of a test measured
//! (interval samples, flow totals, CPU and kernel accounting, TCP_INFO), what a
//! whole run produced, and the units those numbers are in.
//!
//! No I/O and no logic beyond merging and unit conversion live here, so that the
//! engine, the control protocol, the store and the reports can all speak the same
//! types without depending on each other.
#![deny(unsafe_code)]

pub mod audit;
pub mod cpu;
pub mod env;
pub mod figure;
pub mod load;
pub mod profile;
pub mod result;
pub mod rpm;
pub mod schema;
pub mod tcp;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod units;

pub use audit::{Audit, BusyProcess, Finding, Status, AUDIT_SCHEMA};
pub use cpu::{CpuTimes, ProcessCpu, SchedTimes, SoftirqCounts, SoftnetCounts, ThreadCpu};
pub use env::{EnvChange, Environment};
pub use profile::{
    FunctionTime, Profile, ProfileAsk, ProfileStack, PROFILE_STACKS_MAX, REST_FRAME,
};
pub use result::{
    spread, AckSamples, FlowEvents, InterfaceCounts, IrqCounts, IrqCpu, NetDevCounters, NicQueue,
    Observe, PathCounts, PathQueue, PathResult, Peer, QdiscCounts, QdiscStats, QueueSample,
    RcvbufGrowth, RxZeroCopyTotals, SenderLimits, ServerStart, Sockstat, Tracepoints,
    ZeroCopyTotals, ACK_SAMPLES_KEPT, DELAY_LINE, PATH_THREAD,
};
pub use result::{
    Bimodal, Confidence, Derived, EndResult, FlowTotals, IntervalSample, Iteration, KernelCounters,
    Latency, OptionRecord, OptionStatus, PartIteration, Role, RunRecord, SoftirqShare, TcpInfo,
    TcpInfoSummary, Transfer, UdpTotals, VmInfo, INITIAL_SSTHRESH, RUN_SCHEMA,
    TCP_INFO_PER_FLOW_MAX, WINDOW_RTTS_MIN,
};
pub use tcp::{
    FlowSeries, TcpSeries, TcpState, TCP_READS_PER_SEC_MAX, TCP_SAMPLE_PERIOD_MS, TCP_SERIES_FLOWS,
};
pub use units::{format_bits_per_sec, format_bytes, Metric};
