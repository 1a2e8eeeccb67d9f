use crate::args::{LogArg, ServeArgs};
use crate::Failure;
use plumb_ctl::{Cidr, Limits, DEFAULT_PORT};
use plumb_run::serve::{serve, LogFormat, ServeConfig, ServeError};

pub fn exec(a: ServeArgs) -> Result<i32, Failure> {
    // Started over ssh, the server takes an ephemeral port and says which.
    let default_port = if a.ssh_session { 0 } else { DEFAULT_PORT };
    let listen = super::parse_addr(
        a.listen.as_deref().unwrap_or("[::]"),
        default_port,
        "--listen",
    )?;
    let psk = match &a.psk_file {
        Some(p) => Some(plumb_ctl::auth::load_key(p, "--psk-file").map_err(Failure::usage)?),
        None if a.ssh_session => {
            // The key comes on the channel, never on a command line or in a
            // file; the ssh login is what lets the client in.
            let key = plumb_run::ssh::far_end_hello(env!("PLUMB_BUILD"))
                .map_err(|e| Failure::usage(e.to_string()))?;
            plumb_run::ssh::exit_at_end_of_input().map_err(|e| Failure::usage(e.to_string()))?;
            Some(key)
        }
        None => None,
    };
    let allow = a
        .allow
        .iter()
        .map(|s| Cidr::parse(s).map_err(|e| Failure::usage(format!("--allow: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    // A server started over ssh:// takes the ssh login as the right to
    // change its host.
    let allow_knobs = a.allow_knobs || a.ssh_session;
    if allow_knobs {
        // What a killed server of this host left set goes back first.
        super::knob::recover_at_start();
    }
    match serve(&ServeConfig {
        listen,
        once: a.once,
        psk,
        limits: Limits {
            max_flows: a.max_flows,
            max_duration_ms: a.max_duration,
            max_buffer: a.max_buffer,
            max_rate_bps: a.max_rate,
        },
        allow,
        data_ports: a.data_ports,
        concurrent: a.concurrent,
        log: match a.log {
            LogArg::Text => LogFormat::Text,
            LogArg::Json => LogFormat::Json,
        },
        capture_env: !a.same_host,
        allow_knobs,
    }) {
        Ok(()) => Ok(0),
        Err(e @ ServeError::Listen { .. }) => Err(Failure::usage(e.to_string())),
        // A failed session was already logged; the embedded server's parent
        // reports it to the user.
        Err(ServeError::Session(_)) => Ok(1),
    }
}
