//! The sequence every end of a test steps through, from its flows to its
//! figures: check and read back what the kernel granted, wait for the go,
//! start the traffic (and the profile), open the window when the warm-up
//! ends, tick once a second, close it, and stop. The client (`lib.rs`),
//! `plumb serve`'s sessions (`serve.rs`) and any other place an end runs
//! step this one sequence; what differs is where the moments come from
//! (the [`Cues`]): the client keeps time and tells its peer, a server
//! hears them from it.

use plumb_engine::{Link, ReadyEnd, RunningEnd, SampleSink, SetupError, Sockets, Stopped};
use plumb_samples::{EndResult, ProfileAsk, Role};
use plumb_spec::Spec;

/// What an end waits for at each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cue {
    /// The warm-up is over: the window opens.
    Open,
    /// A second of the window has passed.
    Tick,
    /// The window closes (its time is up, or the test stops early).
    Close,
}

/// Where failures of the end's own steps go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Starting the traffic.
    Engine,
    /// Opening the profile's samplers.
    Profile,
}

/// Where an end's moments come from, and how its failures are told.
pub trait Cues {
    type Error;

    /// Waits for the go (or gives it) once the flows are up.
    fn go(&mut self) -> Result<(), Self::Error>;
    /// The traffic runs.
    fn started(&mut self) -> Result<(), Self::Error>;
    /// Waits for the end of the warm-up: [`Cue::Open`], or [`Cue::Close`]
    /// where the test stopped before.
    fn warm_up(&mut self) -> Result<Cue, Self::Error>;
    /// Waits for the next moment of the window: [`Cue::Tick`] or
    /// [`Cue::Close`].
    fn next(&mut self) -> Result<Cue, Self::Error>;
    /// The window is closing; the counts are taken next.
    fn closing(&mut self) -> Result<(), Self::Error>;
    /// The window closed with `figures`; the traffic stops next.
    fn closed(&mut self, figures: &mut EndResult) -> Result<(), Self::Error>;
    /// The error of a flow set-up the kernel refused.
    fn refused(&mut self, e: SetupError) -> Self::Error;
    /// The error of a step of the end's own that failed.
    fn failed(&mut self, step: Step, message: String) -> Self::Error;
}

/// An end's flows and what it needs to measure over them.
pub struct EndPlan<'a> {
    pub spec: &'a Spec,
    pub role: Role,
    pub link: &'a Link,
    pub sockets: Sockets,
    pub profile: Option<ProfileAsk>,
}

/// Runs one end of a test through its window: its figures, and what
/// stopping it found beside them.
pub fn run_end<C: Cues>(
    plan: EndPlan<'_>,
    cues: &mut C,
    sink: &mut dyn SampleSink,
) -> Result<(EndResult, Stopped), C::Error> {
    let end = ReadyEnd::new(plan.spec, plan.role, plan.link, plan.sockets)
        .map_err(|e| cues.refused(e))?;
    cues.go()?;
    let mut end = end
        .start()
        .map_err(|e| cues.failed(Step::Engine, e.to_string()))?;
    if let Some(ask) = plan.profile {
        end.profile(ask)
            .map_err(|e| cues.failed(Step::Profile, e))?;
    }
    cues.started()?;
    // A failure from here on drops the end, which stops its engine.
    let mut figures = window(&mut end, cues, sink)?;
    cues.closed(&mut figures)?;
    let stopped = end
        .stop(&mut figures)
        .map_err(|e| cues.failed(Step::Engine, e.to_string()))?;
    Ok((figures, stopped))
}

/// The window of a started end, as the cues open, tick and close it; one
/// that the test stopped before it opened opens and closes at once.
fn window<C: Cues>(
    end: &mut RunningEnd,
    cues: &mut C,
    sink: &mut dyn SampleSink,
) -> Result<EndResult, C::Error> {
    if cues.warm_up()? == Cue::Open {
        end.open_window();
        while cues.next()? == Cue::Tick {
            end.tick(sink);
        }
    }
    // The peer tears its flows down as soon as it hears the window closed;
    // a reset seen from here on is that, not a failure of the run.
    end.mark_window_closed();
    cues.closing()?;
    Ok(end.close_window(sink))
}
