//! containerd leases: everything a run creates (content, snapshots, containers) is made under a
//! lease labelled as arena's, so what a crashed process leaves behind is found and removed by
//! `gc`, and nothing half-imported is collected while we work.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use containerd_client::services::v1::leases_client::LeasesClient;
use containerd_client::services::v1::{AddResourceRequest, CreateRequest, DeleteRequest, Resource};

use super::Containerd;
use crate::boundary::MANAGED_LABEL;
use crate::error::{call, Result};

/// Formats a time as RFC 3339 UTC (for `containerd.io/gc.expire`).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Creates a lease that containerd expires by itself after `ttl` (a last resort if even
/// `arenactl gc` never runs).
pub async fn create(
    c: &Containerd,
    id: &str,
    ttl: Duration,
    extra: &HashMap<String, String>,
) -> Result<String> {
    let mut labels = extra.clone();
    labels.insert(MANAGED_LABEL.to_string(), "true".to_string());
    labels.insert(
        "containerd.io/gc.expire".to_string(),
        rfc3339(SystemTime::now() + ttl),
    );
    let mut client = LeasesClient::new(c.channel());
    let r = call(
        client
            .create(c.req(
                CreateRequest {
                    id: id.to_string(),
                    labels,
                },
                None,
            ))
            .await,
        "leases.Create",
        id,
    )?;
    Ok(r.lease.map(|l| l.id).unwrap_or_else(|| id.to_string()))
}

/// Puts something another process created (content, a snapshot) under our lease too, so it
/// cannot be collected while we use it if that process's lease goes first. `kind` is
/// `content` or `snapshots/<snapshotter>`.
pub async fn add_resource(c: &Containerd, lease: &str, id: &str, kind: &str) -> Result<()> {
    let mut client = LeasesClient::new(c.channel());
    call(
        client
            .add_resource(c.req(
                AddResourceRequest {
                    id: lease.to_string(),
                    resource: Some(Resource {
                        id: id.to_string(),
                        r#type: kind.to_string(),
                    }),
                },
                None,
            ))
            .await,
        "leases.AddResource",
        id,
    )
    .map(|_| ())
}

pub async fn delete(c: &Containerd, id: &str) -> Result<()> {
    let mut client = LeasesClient::new(c.channel());
    call(
        client
            .delete(c.req(
                DeleteRequest {
                    id: id.to_string(),
                    sync: false,
                },
                None,
            ))
            .await,
        "leases.Delete",
        id,
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        // Checked with `date -u -d @1795000000`.
        assert_eq!(rfc3339(t), "2026-11-18T11:06:40Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }
}
