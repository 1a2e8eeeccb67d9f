//! The rows of `tcp_samples`: each end's sampled TCP state summed over its
//! flows, one row per sample, for plots and queries without decoding
//! records. Both backends write the same rows from a record.

use plumb_samples::RunRecord;

/// One sample of one end of one iteration.
pub(crate) struct TcpRow {
    pub iteration: i64,
    pub role: &'static str,
    pub t_s: f64,
    pub flows: i64,
    /// Congestion windows summed over the flows, segments.
    pub cwnd: i64,
    pub in_flight_bytes: i64,
    /// The mean over the flows.
    pub srtt_us: f64,
    pub delivery_rate_bps: i64,
    /// Since the window opened, summed over the flows.
    pub retrans: i64,
    pub busy_s: f64,
    pub rwnd_limited_s: f64,
    pub sndbuf_limited_s: f64,
}

/// The table, in SQL both backends take.
pub(crate) const TCP_SAMPLES_TABLE: &str = "CREATE TABLE tcp_samples (
        run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        iteration BIGINT NOT NULL,
        role TEXT NOT NULL,
        t_s DOUBLE PRECISION NOT NULL,
        flows BIGINT NOT NULL,
        cwnd BIGINT NOT NULL,
        in_flight_bytes BIGINT NOT NULL,
        srtt_us DOUBLE PRECISION NOT NULL,
        delivery_rate_bps BIGINT NOT NULL,
        retrans BIGINT NOT NULL,
        busy_s DOUBLE PRECISION NOT NULL,
        rwnd_limited_s DOUBLE PRECISION NOT NULL,
        sndbuf_limited_s DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX tcp_samples_run ON tcp_samples(run_id, iteration);";

pub(crate) fn tcp_rows(r: &RunRecord) -> Vec<TcpRow> {
    let mut rows = Vec::new();
    for it in &r.iterations {
        for (role, end) in [("client", &it.client), ("server", &it.server)] {
            let Some(s) = &end.tcp_series else { continue };
            let a = &s.all;
            let at = |v: &[u64], k: usize| v.get(k).copied().unwrap_or(0);
            let int = |v: &[u64], k: usize| at(v, k).min(i64::MAX as u64) as i64;
            let secs = |v: &[u64], k: usize| at(v, k) as f64 / 1e6;
            for (k, &t) in s.t_ms.iter().enumerate() {
                rows.push(TcpRow {
                    iteration: i64::from(it.index),
                    role,
                    t_s: f64::from(t) / 1000.0,
                    flows: i64::from(s.flows),
                    cwnd: int(&a.cwnd, k),
                    in_flight_bytes: int(&a.in_flight_bytes, k),
                    srtt_us: at(&a.srtt_us, k) as f64 / f64::from(s.flows.max(1)),
                    delivery_rate_bps: int(&a.delivery_rate_bps, k),
                    retrans: int(&a.retrans, k),
                    busy_s: secs(&a.busy_us, k),
                    rwnd_limited_s: secs(&a.rwnd_limited_us, k),
                    sndbuf_limited_s: secs(&a.sndbuf_limited_us, k),
                });
            }
        }
    }
    rows
}
