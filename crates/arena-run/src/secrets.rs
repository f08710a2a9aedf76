//! Values that belong to a run's submitter, not to the machine that runs it: the API keys of
//! agents that call a model. An agent file names them (`secrets = ["NAME"]`); the
//! submitter gives each value with the run (`arenactl run --secret NAME=FILE`, or
//! `SubmitRunRequest.secrets`), never the runner's environment, which every submitter of a
//! shared runner would share. A value is held in memory for the run and put in the agent's
//! container's environment only: it is written to no file of the run (not run.json, so a
//! resumed run is given it again), no log, no event, no result, and no other container. The
//! agent, and any code it runs, can read its own key; what the agent prints or leaves in its
//! workspace is redacted ([`Secrets::redact`]) once its container ends.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use crate::error::{Result, RunError};

/// The most bytes of one value (an API key is well under this).
pub const MAX_VALUE_BYTES: usize = 64 << 10;

/// Values by name. Its `Debug` names the names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(BTreeMap<String, String>);

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Secrets")
            .field(&self.0.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// An environment variable's name: a letter or `_`, then letters, digits and `_`.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    let mut chars = name.chars();
    let first = chars.next().ok_or("is empty")?;
    if !(first.is_ascii_alphabetic() || first == '_')
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(format!(
            "`{}` is not a variable name (a letter or _, then letters, digits and _)",
            name.escape_debug()
        ));
    }
    Ok(())
}

impl Secrets {
    /// Checks every name and value (`from` names where they came from, for the error).
    pub fn new(values: BTreeMap<String, String>, from: &str) -> Result<Secrets> {
        for (name, value) in &values {
            check_name(name).map_err(|why| RunError::invalid(from, "secrets", why))?;
            if value.is_empty() || value.len() > MAX_VALUE_BYTES || value.contains('\0') {
                return Err(RunError::invalid(
                    from,
                    "secrets",
                    format!(
                        "{name}: its value must be 1 to {MAX_VALUE_BYTES} bytes with no NUL \
                         ({} bytes given)",
                        value.len()
                    ),
                ));
            }
        }
        Ok(Secrets(values))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Refuses values the agent (`name`, from `file`) does not ask for in `wanted` (a key sent
    /// to the wrong agent stays with its owner) and names the ones it asks for and lacks.
    pub fn check_for(&self, name: &str, file: &Path, wanted: &[String]) -> Result<()> {
        if let Some(extra) = self.0.keys().find(|k| !wanted.contains(k)) {
            return Err(RunError::invalid(
                "request",
                "secrets",
                format!(
                    "{extra}: agent `{name}` ({}) asks for no such secret (its `secrets`: \
                     {wanted:?})",
                    file.display(),
                ),
            ));
        }
        let missing: Vec<&String> = wanted.iter().filter(|n| !self.0.contains_key(*n)).collect();
        if !missing.is_empty() {
            return Err(RunError::invalid(
                file.display(),
                "secrets",
                format!(
                    "{missing:?}: the agent needs these from whoever starts the run \
                     (`arenactl run --secret NAME=FILE`); a resumed run is given them again"
                ),
            ));
        }
        Ok(())
    }

    /// `NAME=value` entries for the agent's container.
    pub fn environment(&self) -> Vec<String> {
        self.0.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    /// `bytes` with every verbatim occurrence of a value replaced by `[redacted NAME]`, and the
    /// names found; None where no value occurs. (Verbatim only: what an agent encodes on
    /// purpose is not found. The agent can read its key; this keeps a CLI that logs its
    /// configuration from leaving the key in the run directory.)
    pub fn redact(&self, bytes: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
        let mut out: Option<Vec<u8>> = None;
        let mut found = Vec::new();
        for (name, value) in &self.0 {
            let cur = out.as_deref().unwrap_or(bytes);
            let v = value.as_bytes();
            let Some(first) = find(cur, v) else { continue };
            let mark = format!("[redacted {name}]");
            let mut next = Vec::with_capacity(cur.len());
            next.extend_from_slice(&cur[..first]);
            let mut rest = &cur[first..];
            while let Some(at) = find(rest, v) {
                next.extend_from_slice(&rest[..at]);
                next.extend_from_slice(mark.as_bytes());
                rest = &rest[at + v.len()..];
            }
            next.extend_from_slice(rest);
            out = Some(next);
            found.push(name.clone());
        }
        out.map(|o| (o, found))
    }
}

/// Where `needle` (not empty) first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_replaces_every_occurrence_of_every_value_by_its_name() {
        let s = Secrets::new(
            [
                ("KEY".to_string(), "sk-123".to_string()),
                ("B".to_string(), "xy".to_string()),
            ]
            .into_iter()
            .collect(),
            "test",
        )
        .unwrap();
        let (out, names) = s.redact(b"a sk-123 b sk-123sk-123 xy").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "a [redacted KEY] b [redacted KEY][redacted KEY] [redacted B]"
        );
        assert_eq!(names, ["B", "KEY"]);
        assert!(s.redact(b"sk-12 3 x y").is_none());
        assert!(s.redact(b"").is_none());
    }

    /// The check for an agent `a` that asks for `secrets`.
    fn check(given: &Secrets, secrets: &[&str]) -> Result<()> {
        let wanted: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
        given.check_for("a", Path::new("agents/a.toml"), &wanted)
    }

    fn of(pairs: &[(&str, &str)]) -> Result<Secrets> {
        let m = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Secrets::new(m, "request")
    }

    #[test]
    fn values_are_kept_out_of_debug_output() {
        let s = of(&[("API_KEY", "sk-canary")]).unwrap();
        let shown = format!("{s:?}");
        assert!(
            shown.contains("API_KEY") && !shown.contains("sk-canary"),
            "{shown}"
        );
        assert_eq!(s.environment(), ["API_KEY=sk-canary"]);
    }

    #[test]
    fn bad_names_and_values_are_refused_naming_the_field() {
        for pairs in [
            vec![("1KEY", "x")],
            vec![("A-B", "x")],
            vec![("", "x")],
            vec![("KEY", "")],
            vec![("KEY", "a\0b")],
        ] {
            let e = of(&pairs).unwrap_err().to_string();
            assert!(e.contains("request: secrets:"), "{e}");
            assert!(!e.contains("a\0b"), "{e}");
        }
        let big = "k".repeat(MAX_VALUE_BYTES + 1);
        assert!(of(&[("KEY", &big)]).is_err());
    }

    #[test]
    fn the_agent_gets_exactly_the_secrets_it_names() {
        check(&of(&[("API_KEY", "v")]).unwrap(), &["API_KEY"]).unwrap();
        let missing = check(&Secrets::default(), &["API_KEY"])
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("API_KEY") && missing.contains("--secret"),
            "{missing}"
        );
        let given = of(&[("API_KEY", "v"), ("OTHER", "sk-other")]).unwrap();
        let extra = check(&given, &["API_KEY"]).unwrap_err().to_string();
        assert!(
            extra.contains("OTHER") && !extra.contains("sk-other"),
            "{extra}"
        );
        check(&Secrets::default(), &[]).unwrap();
    }
}
