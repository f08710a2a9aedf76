//! What the runner allows, whatever a client sends: agent mounts only from host roots the
//! runner was configured with (and never the host's system directories), the host network
//! only when the runner was started to allow it, and runs acted on only by the identity that
//! submitted them or an admin.

use std::path::{Path, PathBuf};

use arena_run::{Agent, AgentNetwork, RunRecord};
use arena_runtime::Network;

use crate::error::{Result, RunnerError};

/// Host paths no agent may mount, nor any directory above them.
pub const SENSITIVE_HOST_PATHS: &[&str] = &[
    "/",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/run",
    "/boot",
    "/root",
    "/var/lib",
    "/usr/lib/systemd",
];

#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Agents may use the host's network namespace (`network = "host"`).
    pub allow_host_network: bool,
    /// Host directories agent mounts may come from (canonical paths). Empty: none.
    pub mount_roots: Vec<PathBuf>,
    /// Identities that may act on any run, and name any path.
    pub admins: Vec<String>,
    /// Directories token callers may name paths below (client_paths.rs; canonical).
    pub client_roots: Vec<PathBuf>,
}

impl Policy {
    /// A policy whose mount roots are canonicalized (a root that does not exist is refused).
    pub fn new(
        allow_host_network: bool,
        mount_roots: &[PathBuf],
        admins: Vec<String>,
    ) -> Result<Policy> {
        let mut roots = Vec::new();
        for r in mount_roots {
            let c = r.canonicalize().map_err(|e| RunnerError::io(r, e))?;
            if let Some(bad) = sensitive(&c) {
                return Err(RunnerError::invalid(
                    "--agent-mount-root",
                    &r.display().to_string(),
                    format!(
                        "covers {bad}; choose a directory that holds only what agents may read"
                    ),
                ));
            }
            roots.push(c);
        }
        Ok(Policy {
            allow_host_network,
            mount_roots: roots,
            admins,
            client_roots: Vec::new(),
        })
    }

    /// Refuses an agent this runner will not run, naming the agent file and field.
    pub fn check_agent(&self, agent: &Agent) -> Result<()> {
        let file = agent.file.display();
        if agent.network == AgentNetwork::Host && !self.allow_host_network {
            return Err(RunnerError::invalid(
                &file,
                "network",
                "`host` gives the agent the host's network (its loopback services, the runner, \
                 containerd's abstract sockets); this runner was not started with \
                 --allow-host-network. Use `egress`",
            ));
        }
        for (i, m) in agent.mounts.iter().enumerate() {
            let field = format!("mount[{i}].host");
            // Resolved again here: the file was read elsewhere, and links may have changed.
            let host = m.host.canonicalize().map_err(|e| {
                RunnerError::invalid(&file, &field, format!("{}: {e}", m.host.display()))
            })?;
            if let Some(bad) = sensitive(&host) {
                return Err(RunnerError::invalid(
                    &file,
                    &field,
                    format!("{}: covers {bad}, which no agent may see", host.display()),
                ));
            }
            if !self.mount_roots.iter().any(|r| host.starts_with(r)) {
                let roots: Vec<String> = self
                    .mount_roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect();
                return Err(RunnerError::invalid(
                    &file,
                    &field,
                    format!(
                        "{} is outside the directories this runner lets agents mount ({})",
                        host.display(),
                        if roots.is_empty() {
                            "none: start it with --agent-mount-root DIR".to_string()
                        } else {
                            roots.join(", ")
                        }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Refuses `caller` acting on a run it does not own (None: the runner's own process).
    pub fn check_owner(&self, record: &RunRecord, caller: Option<&str>) -> Result<()> {
        match (caller, &record.owner) {
            (None, _) | (_, None) => Ok(()),
            (Some(c), Some(o)) if c == o || self.admins.iter().any(|a| a == c) => Ok(()),
            (Some(c), Some(o)) => Err(RunnerError::PermissionDenied(format!(
                "run {} belongs to {o}; {c} may not act on it",
                record.run_id
            ))),
        }
    }
}

/// The sensitive path `p` is, or is above; None if it is neither.
fn sensitive(p: &Path) -> Option<&'static str> {
    SENSITIVE_HOST_PATHS.iter().copied().find(|s| {
        let s = Path::new(s);
        p == s || s.starts_with(p)
    })
}

/// The runtime's network for an agent's.
pub fn agent_network(n: &AgentNetwork) -> Network {
    match n {
        AgentNetwork::None => Network::None,
        AgentNetwork::Egress { allow } => Network::Egress {
            allow: allow.clone(),
        },
        AgentNetwork::Host => Network::Host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(net: AgentNetwork, mounts: &[&Path]) -> Agent {
        let mut a = Agent::recorded("t", "sha256:x");
        a.file = "/agents/t.toml".into();
        a.network = net;
        a.mounts = mounts
            .iter()
            .map(|h| arena_run::agent::AgentMount {
                host: h.to_path_buf(),
                container: "/opt/x".into(),
            })
            .collect();
        a
    }

    #[test]
    fn sensitive_paths_and_their_parents() {
        assert_eq!(sensitive(Path::new("/")), Some("/"));
        assert_eq!(sensitive(Path::new("/etc")), Some("/etc"));
        assert_eq!(sensitive(Path::new("/var")), Some("/var/run"));
        assert_eq!(sensitive(Path::new("/srv/solutions")), None);
        assert_eq!(
            sensitive(Path::new("/etc/ssl")),
            None,
            "below is the root's business"
        );
    }

    #[test]
    fn mounts_only_from_configured_roots_and_never_system_directories() {
        let d = tempfile::tempdir().unwrap();
        let inside = d.path().join("sol");
        std::fs::create_dir_all(&inside).unwrap();
        let p = Policy::new(false, &[d.path().to_path_buf()], vec![]).unwrap();
        p.check_agent(&agent(AgentNetwork::None, &[&inside]))
            .unwrap();
        let e = p
            .check_agent(&agent(AgentNetwork::None, &[Path::new("/etc")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mount[0].host") && e.contains("covers /etc"),
            "{e}"
        );
        let e = p
            .check_agent(&agent(AgentNetwork::None, &[Path::new("/")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("covers /"), "{e}");
        let e = p
            .check_agent(&agent(AgentNetwork::None, &[Path::new("/usr/share")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the directories"), "{e}");
        // A link inside a root that points outside it is judged by where it points.
        let link = d.path().join("escape");
        std::os::unix::fs::symlink("/usr/share", &link).unwrap();
        let e = p
            .check_agent(&agent(AgentNetwork::None, &[&link]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the directories"), "{e}");
        assert!(Policy::new(false, &[PathBuf::from("/")], vec![]).is_err());
    }

    #[test]
    fn host_network_only_when_allowed() {
        let no = Policy::default();
        let e = no
            .check_agent(&agent(AgentNetwork::Host, &[]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("network") && e.contains("--allow-host-network"),
            "{e}"
        );
        let yes = Policy {
            allow_host_network: true,
            ..Default::default()
        };
        yes.check_agent(&agent(AgentNetwork::Host, &[])).unwrap();
        no.check_agent(&agent(AgentNetwork::Egress { allow: vec![] }, &[]))
            .unwrap();
    }

    #[test]
    fn owners_and_admins() {
        let mut r = RunRecord::new(
            Path::new("/l"),
            "d".into(),
            &Agent::recorded("a", "g"),
            vec![],
            1,
            None,
        );
        r.owner = Some("uid:1000".into());
        let p = Policy {
            admins: vec!["uid:0".into()],
            ..Default::default()
        };
        p.check_owner(&r, Some("uid:1000")).unwrap();
        p.check_owner(&r, Some("uid:0")).unwrap();
        p.check_owner(&r, None).unwrap();
        let e = p.check_owner(&r, Some("uid:1001")).unwrap_err().to_string();
        assert!(e.contains("belongs to uid:1000"), "{e}");
    }
}
