//! What the flows of a test do, one variant a workload, each holding its
//! plan; the only place the engine names every workload.

use crate::crr::CrrPlan;
use crate::flow::{FlowError, Shared};
use crate::plan::Plan;
use crate::rr::RrPlan;
use crate::stream::StreamPlan;
use crate::udp::UdpPlan;
use plumb_spec::Io;
use std::io;

/// What the flows of a test do; each worker of an engine runs the same.
#[derive(Debug, Clone)]
pub enum Workload {
    /// Bulk transfer one way or both.
    Stream(StreamPlan),
    /// Request/response on long-lived TCP flows.
    Rr(RrPlan),
    /// A TCP connection per transaction.
    Crr(CrrPlan),
    /// UDP datagrams, streamed or request/response.
    Udp(UdpPlan),
}

impl Workload {
    fn plan(&self) -> &dyn Plan {
        match self {
            Workload::Stream(p) => p,
            Workload::Rr(p) => p,
            Workload::Crr(p) => p,
            Workload::Udp(p) => p,
        }
    }

    fn run(self, sh: Shared, io: Io) -> io::Result<Vec<FlowError>> {
        match self {
            Workload::Stream(p) => p.run(sh, io),
            Workload::Rr(p) => p.run(sh, io),
            Workload::Crr(p) => p.run(sh, io),
            Workload::Udp(p) => p.run(sh, io),
        }
    }

    /// Whether the flows make transactions (request/response).
    pub fn transactional(&self) -> bool {
        self.plan().conduct().transactional
    }

    /// Whether this end times transactions (and so hands latencies over).
    pub fn timed(&self) -> bool {
        self.plan().conduct().timed
    }

    /// Whether this end's workers hand their counts over at the window's
    /// edges (see [`crate::plan::Conduct::hands_over`]).
    pub fn hands_over(&self) -> bool {
        self.plan().conduct().hands_over
    }

    /// Transactions a second this end starts on a schedule, if it does.
    pub fn schedule(&self) -> Option<f64> {
        self.plan().conduct().schedule
    }
}

pub(crate) struct WorkerPlan {
    pub shared: Shared,
    pub workload: Workload,
    pub cpu: Option<u32>,
    pub io: Io,
}

/// Runs a worker to its end: the flows that failed, or why the worker
/// itself could not go on.
pub(crate) fn run(plan: WorkerPlan) -> io::Result<Vec<FlowError>> {
    if let Some(cpu) = plan.cpu {
        plumb_sys::affinity::pin_current_thread(cpu)?;
    }
    plan.workload.run(plan.shared, plan.io)
}
