//! The server end a command aims at: what `--server` and its companions
//! name, checked together, and a `plumb serve` started over ssh.

use crate::args::ServerArgs;
use crate::Failure;
use plumb_samples::{Peer, ServerStart};
use plumb_spec::{Family, Spec};

/// Finds or copies this plumb on the far host of `--server ssh://` and
/// starts its server there; the run's records name it from then on.
pub(crate) fn start_far_end(
    target: &plumb_run::ssh::SshTarget,
    a: &ServerArgs,
    family: Family,
) -> Result<plumb_run::ssh::SshServer, Failure> {
    let server_address = match &a.server_address {
        Some(s) => Some(s.parse::<std::net::IpAddr>().map_err(|_| {
            Failure::usage(format!("--server-address: '{s}' is not an IP address"))
        })?),
        None => None,
    };
    let opts = plumb_run::ssh::SshOptions {
        command: plumb_run::ssh::ssh_command(a.ssh_command.as_deref()),
        server_address,
        copy_dynamic: a.ssh_copy_dynamic,
        exe: std::env::current_exe()
            .map_err(|e| Failure::usage(format!("cannot find the plumb executable: {e}")))?,
        build: env!("PLUMB_BUILD").to_string(),
        prefer_v6: family == Family::V6,
        notify: |m| eprintln!("plumb: {m}"),
    };
    plumb_run::ssh::SshServer::start(target, &opts)
        .map_err(|e| Failure::usage(format!("--server {e}")))
}

/// A server started over ssh as the records name it.
pub(super) fn far_peer(
    target: &plumb_run::ssh::SshTarget,
    far: &plumb_run::ssh::SshServer,
) -> Peer {
    Peer {
        started: ServerStart::Ssh,
        server: Some(target.given.clone()),
        address: Some(far.addr.to_string()),
        build: Some(far.build.clone()),
        build_id: Some(far.build_id.clone()),
        same_host: false,
    }
}

/// The server end `--server` names, checked with the flags that go with
/// it.
pub(crate) enum ServerEnd {
    Embedded,
    /// A `plumb serve` at an address, the host part as given, and the key
    /// of its `--psk-file`.
    Manual(std::net::SocketAddr, String, Option<Vec<u8>>),
    /// One plumb starts over ssh (see [`start_far_end`]).
    Ssh(plumb_run::ssh::SshTarget),
}

impl ServerEnd {
    /// Points `spec` at this end as far as it is known before it is
    /// reached: the host it names, and for an address the family; a server
    /// started over ssh gives its family when it answers.
    pub(crate) fn aim(&self, spec: &mut Spec) {
        match self {
            ServerEnd::Manual(addr, host, _) => {
                spec.family = family_of(addr);
                spec.server_host = Some(host.clone());
            }
            ServerEnd::Ssh(t) => spec.server_host = Some(t.host.clone()),
            ServerEnd::Embedded => {}
        }
    }
}

/// Reads `--server` and its companions; `asked` is the family -4/-6 chose
/// among a name's addresses.
pub(crate) fn server_end(f: &ServerArgs, asked: Option<Family>) -> Result<ServerEnd, Failure> {
    let ssh = match f
        .server
        .as_deref()
        .and_then(plumb_run::ssh::SshTarget::parse)
    {
        Some(t) => Some(t.map_err(|e| Failure::usage(format!("--server: {e}")))?),
        None => None,
    };
    if ssh.is_none() {
        for (flag, set) in [
            ("--ssh-command", f.ssh_command.is_some()),
            ("--server-address", f.server_address.is_some()),
            ("--ssh-copy-dynamic", f.ssh_copy_dynamic),
        ] {
            if set {
                return Err(Failure::usage(format!(
                    "{flag}: only with --server ssh://[USER@]HOST[:SSHPORT]"
                )));
            }
        }
    } else if f.psk_file.is_some() {
        return Err(Failure::usage(
            "--psk-file: not with --server ssh://; plumb hands the server it starts a fresh key",
        ));
    }
    if f.server.is_none() && f.psk_file.is_some() {
        return Err(Failure::usage(
            "--psk-file: only with --server HOST[:PORT] (the key of its plumb serve)",
        ));
    }
    let key = match &f.psk_file {
        Some(p) => Some(plumb_ctl::auth::load_key(p, "--psk-file").map_err(Failure::usage)?),
        None => None,
    };
    Ok(match (&f.server, ssh) {
        (_, Some(t)) => ServerEnd::Ssh(t),
        (Some(s), None) => ServerEnd::Manual(
            super::parse_addr_of(s, plumb_ctl::DEFAULT_PORT, "--server", asked)?,
            host_part(s),
            key,
        ),
        (None, None) => ServerEnd::Embedded,
    })
}

/// The family the flows use to reach `addr`: the server's address decides
/// what the record says they used.
pub(crate) fn family_of(addr: &std::net::SocketAddr) -> Family {
    if addr.is_ipv6() {
        Family::V6
    } else {
        Family::V4
    }
}

/// The host of a `--server` value as the user wrote it, without its port or
/// brackets: `hostb:5201` → `hostb`, `[2001:2::12]:5201` → `2001:2::12`.
fn host_part(s: &str) -> String {
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest).to_string();
    }
    if s.parse::<std::net::IpAddr>().is_ok() {
        return s.to_string();
    }
    s.rsplit_once(':')
        .map_or(s, |(host, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                host
            } else {
                s
            }
        })
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_part_leaves_out_the_port() {
        use super::host_part;
        assert_eq!(host_part("hostb"), "hostb");
        assert_eq!(host_part("hostb:5201"), "hostb");
        assert_eq!(host_part("198.18.0.2:5201"), "198.18.0.2");
        assert_eq!(host_part("2001:2::12"), "2001:2::12");
        assert_eq!(host_part("[2001:2::12]:5201"), "2001:2::12");
    }
}
