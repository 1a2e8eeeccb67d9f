//! What the engine asks of a workload's plan, whatever the workload: its
//! plan from the spec, how the engine treats the end ([`Conduct`]), and the
//! machine each engine drives ([`on_engine`]). Each workload's module
//! implements [`Plan`] for its own.

use crate::flow::{FlowError, Handler, Shared};
use crate::ring::{self, RingFlows};
use plumb_spec::Io;
use std::io;

/// What the engine asks of one end's plan, whatever its workload: each
/// workload's module answers for its own, so that the engine names the
/// workloads in `workload.rs` and nowhere else.
pub(crate) trait Plan {
    /// How `server` (or the client) runs `spec`'s flows with the other end
    /// `link`.
    fn for_spec(spec: &plumb_spec::Spec, server: bool, link: &crate::Link) -> Self
    where
        Self: Sized;

    /// How the engine treats this end.
    fn conduct(&self) -> Conduct;

    /// Runs one worker's flows on the engine `io` names, to their end.
    fn run(self, sh: Shared, io: Io) -> io::Result<Vec<FlowError>>
    where
        Self: Sized;
}

/// How the engine treats one end of a workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Conduct {
    /// The flows make transactions (request/response).
    pub transactional: bool,
    /// This end times transactions (and so hands latencies over).
    pub timed: bool,
    /// This end's workers hand their counts over at the window's edges
    /// rather than being read live: a timed end, so that the counts are
    /// those of the latencies, and any end whose workers hold what arrived
    /// in the window until they read it.
    pub hands_over: bool,
    /// Transactions a second this end starts on a schedule (`--rate`, a
    /// stream's self probes); None where each follows the last.
    pub schedule: Option<f64>,
}

impl Conduct {
    /// An end of request/response flows: the client times them, on a
    /// schedule where it has a `rate`.
    pub(crate) fn transactions(client: bool, rate: Option<f64>) -> Conduct {
        Conduct {
            transactional: true,
            timed: client,
            hands_over: client,
            schedule: rate.filter(|_| client),
        }
    }
}

/// Runs a worker's flows on the engine `io` names: `epoll` makes from the
/// plan what the epoll loop drives, `ring` what the ring's does.
pub(crate) fn on_engine<P, H: Handler, R: RingFlows>(
    plan: P,
    sh: Shared,
    io: Io,
    epoll: impl FnOnce(P, &Shared) -> io::Result<H>,
    ring: impl FnOnce(P, &Shared) -> io::Result<R>,
) -> io::Result<Vec<FlowError>> {
    match io {
        Io::Uring => {
            let r = ring(plan, &sh)?;
            ring::drive(sh, r)
        }
        Io::Epoll => {
            let h = epoll(plan, &sh)?;
            crate::worker::drive(sh, h)
        }
    }
}
