//! Agents are data: one TOML file per agent names the image it runs in, the command line that
//! receives the prompt, the environment it may see, its network, timeout and iteration budget.
//! A scripted agent (a shell command that edits the workspace) is an agent like any other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Result, RunError};

/// Where an agent runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentImage {
    /// The task's own locked image (the harness's toolchain, e.g. Python + Triton).
    Task,
    /// Another image of the lockfile, by its name (an image with the agent's CLI installed).
    Locked(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    /// `task` or `lock:<image name>`.
    #[serde(default = "default_image")]
    image: String,
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    env_passthrough: Vec<String>,
    /// Variables whose values the run's submitter gives (crate::secrets).
    #[serde(default)]
    secrets: Vec<String>,
    #[serde(default = "default_network")]
    network: String,
    /// With `egress`: the only hosts (names, addresses or CIDR blocks) the agent may reach.
    #[serde(default)]
    allow_hosts: Vec<String>,
    timeout_s: u64,
    #[serde(default = "default_iterations")]
    max_iterations: u32,
    #[serde(default, rename = "mount")]
    mounts: Vec<MountFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct MountFile {
    /// Host path; relative paths are relative to the agent file.
    host: String,
    container: String,
}

fn default_image() -> String {
    "task".into()
}
fn default_network() -> String {
    "none".into()
}
fn default_iterations() -> u32 {
    10
}

/// How an agent reaches the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentNetwork {
    /// An own network namespace with only loopback (what evaluators get).
    None,
    /// An own network namespace with outbound connections (a veth pair to the host and
    /// masquerading out); nothing on the host (its loopback, its own addresses, the runner,
    /// containerd), no other agent and no link-local service is reachable. `allow`
    /// (`allow_hosts`) non-empty: only those destinations are.
    Egress { allow: Vec<String> },
    /// The host's network namespace: the agent reaches everything the host does. Only a
    /// runner started with `--allow-host-network` runs such an agent.
    Host,
}

/// A host directory or file the agent container sees read-only (its CLI, its solutions…).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentMount {
    pub host: PathBuf,
    pub container: String,
}

#[derive(Debug, Clone)]
pub struct Agent {
    pub name: String,
    pub description: Option<String>,
    pub file: PathBuf,
    /// sha256 of the agent file's bytes: the result names the agent it came from.
    pub digest: String,
    pub image: AgentImage,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub env_passthrough: Vec<String>,
    /// Variables whose values the submitter gives with the run, never the runner's
    /// environment ([`crate::secrets`]).
    pub secrets: Vec<String>,
    pub network: AgentNetwork,
    pub timeout_s: u64,
    pub max_iterations: u32,
    pub mounts: Vec<AgentMount>,
}

/// Container paths no agent mount may cover or sit in: what arena mounts itself, and the
/// kernel's file systems.
pub const RESERVED_DESTINATIONS: &[&str] =
    &[WORKSPACE, REFERENCE, "/arena", "/proc", "/sys", "/dev"];

/// Checks a mount destination inside the container: absolute, made of plain names only (no
/// `.`, `..` or empty part, so `/x/../workspace` is refused before anything resolves it), not
/// `/`, and neither inside nor above a reserved path.
pub fn check_destination(p: &str) -> std::result::Result<(), String> {
    let Some(rest) = p.strip_prefix('/') else {
        return Err("must be an absolute path".into());
    };
    if rest.is_empty() {
        return Err("must not be the container's root".into());
    }
    if rest
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == ".." || c.contains('\0'))
    {
        return Err("must be made of plain names (no `.`, `..`, `//` or trailing `/`)".into());
    }
    for r in RESERVED_DESTINATIONS {
        let inside = p == *r || p.starts_with(&format!("{r}/"));
        let above = r.starts_with(&format!("{p}/"));
        if inside || above {
            return Err(format!(
                "must stay outside {}",
                RESERVED_DESTINATIONS.join(", ")
            ));
        }
    }
    Ok(())
}

/// Placeholders a command template may use.
pub const PLACEHOLDERS: &[&str] = &[
    "{prompt_file}",
    "{prompt}",
    "{task_id}",
    "{max_iterations}",
    "{workspace}",
];

/// `{name}` with a lowercase identifier inside: what a mistyped placeholder looks like.
fn looks_like_placeholder(s: &str) -> bool {
    let Some(end) = s.find('}') else { return false };
    let inner = &s[1..end];
    !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// Paths inside the agent container.
pub const WORKSPACE: &str = "/workspace";
pub const REFERENCE: &str = "/reference";
pub const PROMPT_FILE: &str = "/arena/prompt.md";

impl Agent {
    /// `name_or_path`: a file, or the name of `DIR/NAME.toml` in one of `dirs`.
    /// The agent of a finished run as its record names it, for work that never starts the
    /// agent (evaluating that run on a hidden set): a name and a digest, no command.
    pub fn recorded(name: &str, digest: &str) -> Agent {
        Agent {
            name: name.to_string(),
            description: None,
            file: PathBuf::new(),
            digest: digest.to_string(),
            image: AgentImage::Task,
            command: Vec::new(),
            env: BTreeMap::new(),
            env_passthrough: Vec::new(),
            secrets: Vec::new(),
            network: AgentNetwork::None,
            timeout_s: 0,
            max_iterations: 0,
            mounts: Vec::new(),
        }
    }

    pub fn resolve(name_or_path: &str, dirs: &[PathBuf]) -> Result<Agent> {
        let p = Path::new(name_or_path);
        if p.is_file() {
            return Agent::load(p);
        }
        for d in dirs {
            let f = d.join(format!("{name_or_path}.toml"));
            if f.is_file() {
                return Agent::load(&f);
            }
        }
        let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        Err(RunError::invalid(
            name_or_path,
            "agent",
            format!(
                "no such agent file, and no {name_or_path}.toml in {}",
                looked.join(", ")
            ),
        ))
    }

    pub fn load(path: &Path) -> Result<Agent> {
        let bytes = std::fs::read(path).map_err(|e| RunError::io(path, e))?;
        let text = String::from_utf8(bytes.clone())
            .map_err(|_| RunError::invalid(path.display(), "(file)", "not UTF-8"))?;
        Agent::parse(
            path,
            &text,
            arena_image::Digest::of_bytes(&bytes).to_string(),
        )
    }

    fn parse(path: &Path, text: &str, digest: String) -> Result<Agent> {
        let file = path.display();
        let f: AgentFile = toml::from_str(text).map_err(|e| {
            let field = e
                .span()
                .map(|s| format!("line {}", text[..s.start].lines().count().max(1)))
                .unwrap_or_else(|| "(toml)".into());
            RunError::invalid(&file, &field, e.message())
        })?;
        let image = match f.image.as_str() {
            "task" => AgentImage::Task,
            other => match other.strip_prefix("lock:") {
                Some(name) if !name.is_empty() => AgentImage::Locked(name.to_string()),
                _ => {
                    return Err(RunError::invalid(
                        &file,
                        "image",
                        format!("`{other}`: expected `task` or `lock:<image name>`"),
                    ))
                }
            },
        };
        let network = match f.network.as_str() {
            "none" => AgentNetwork::None,
            "egress" => AgentNetwork::Egress {
                allow: f.allow_hosts.clone(),
            },
            "host" => AgentNetwork::Host,
            other => {
                return Err(RunError::invalid(
                    &file,
                    "network",
                    format!("`{other}`: expected `none`, `egress` or `host`"),
                ))
            }
        };
        if !f.allow_hosts.is_empty() && f.network != "egress" {
            return Err(RunError::invalid(
                &file,
                "allow_hosts",
                "only an agent with network = \"egress\" has hosts to allow",
            ));
        }
        if f.command.is_empty() {
            return Err(RunError::invalid(&file, "command", "must not be empty"));
        }
        for arg in &f.command {
            let mut rest = arg.as_str();
            while let Some(i) = rest.find('{') {
                let tail = &rest[i..];
                let known = PLACEHOLDERS.iter().find(|p| tail.starts_with(**p));
                match known {
                    Some(p) => rest = &tail[p.len()..],
                    // `${VAR}` is the shell's business, and braces around anything but a
                    // bare name (`{"a": 1}`, `{ x; }`) are not placeholders either.
                    None if (i > 0 && rest.as_bytes()[i - 1] == b'$')
                        || !looks_like_placeholder(tail) =>
                    {
                        rest = &tail[1..]
                    }
                    None => {
                        let end = tail.find('}').map(|e| &tail[..=e]).unwrap_or(tail);
                        return Err(RunError::invalid(
                            &file,
                            "command",
                            format!(
                                "unknown placeholder `{end}` (known: {})",
                                PLACEHOLDERS.join(", ")
                            ),
                        ));
                    }
                }
            }
        }
        if f.timeout_s == 0 {
            return Err(RunError::invalid(&file, "timeout_s", "must be at least 1"));
        }
        for (i, name) in f.secrets.iter().enumerate() {
            let field = format!("secrets[{i}]");
            crate::secrets::check_name(name)
                .map_err(|why| RunError::invalid(&file, &field, why))?;
            if f.env.contains_key(name) || f.env_passthrough.contains(name) {
                return Err(RunError::invalid(
                    &file,
                    &field,
                    format!("{name} is in `env` or `env_passthrough` too: a secret comes from the run's submitter only"),
                ));
            }
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let mut mounts = Vec::new();
        for (i, m) in f.mounts.iter().enumerate() {
            if let Err(why) = check_destination(&m.container) {
                return Err(RunError::invalid(
                    &file,
                    &format!("mount[{i}].container"),
                    format!("`{}`: {why}", m.container),
                ));
            }
            let host = base.join(&m.host);
            let host = host.canonicalize().map_err(|e| {
                RunError::invalid(
                    &file,
                    &format!("mount[{i}].host"),
                    format!("{}: {e}", host.display()),
                )
            })?;
            mounts.push(AgentMount {
                host,
                container: m.container.clone(),
            });
        }
        Ok(Agent {
            name: f.name,
            description: f.description,
            file: path.to_path_buf(),
            digest,
            image,
            command: f.command,
            env: f.env,
            env_passthrough: f.env_passthrough,
            secrets: f.secrets,
            network,
            timeout_s: f.timeout_s,
            max_iterations: f.max_iterations,
            mounts,
        })
    }

    /// The command line with its placeholders filled in.
    pub fn render_command(&self, task_id: &str, prompt: &str) -> Vec<String> {
        self.command
            .iter()
            .map(|a| {
                a.replace("{prompt_file}", PROMPT_FILE)
                    .replace("{task_id}", task_id)
                    .replace("{max_iterations}", &self.max_iterations.to_string())
                    .replace("{workspace}", WORKSPACE)
                    .replace("{prompt}", prompt)
            })
            .collect()
    }

    /// `NAME=value` for the container: fixed entries, then those passed through from the
    /// environment the runner was started in (absent ones are left out).
    pub fn environment(&self, lookup: impl Fn(&str) -> Option<String>) -> Vec<String> {
        let mut out: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        for name in &self.env_passthrough {
            if let Some(v) = lookup(name) {
                out.push(format!("{name}={v}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Agent> {
        Agent::parse(Path::new("/tmp/agent.toml"), text, "sha256:x".into())
    }

    #[test]
    fn renders_placeholders_and_keeps_shell_variables() {
        let a = parse(
            r#"name = "t"
command = ["sh", "-c", "run --prompt {prompt_file} --task {task_id} -n {max_iterations} ${HOME}"]
timeout_s = 60
max_iterations = 7
env_passthrough = ["API_KEY", "ABSENT"]
env = { MODE = "x" }
"#,
        )
        .unwrap();
        assert_eq!(a.image, AgentImage::Task);
        assert_eq!(a.network, AgentNetwork::None);
        let cmd = a.render_command("tt/a/b", "hi");
        assert_eq!(
            cmd[2],
            "run --prompt /arena/prompt.md --task tt/a/b -n 7 ${HOME}"
        );
        let env = a.environment(|k| (k == "API_KEY").then(|| "s3cret".to_string()));
        assert_eq!(env, vec!["MODE=x", "API_KEY=s3cret"]);
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse("name = \"t\"\ncommand = [\"{nope}\"]\ntimeout_s = 1\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("command: unknown placeholder `{nope}`"),
            "{e}"
        );
        // Braces that are not a bare name are left to the command.
        parse("name = \"t\"\ncommand = [\"{ echo; }\", \"{\\\"a\\\": 1}\"]\ntimeout_s = 1\n")
            .unwrap();
        let e = parse("name = \"t\"\ncommand = [\"x\"]\ntimeout_s = 1\nnetwork = \"bridge\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("network: `bridge`"), "{e}");
        let e = parse("name = \"t\"\ncommand = [\"x\"]\ntimeout_s = 1\nimage = \"ubuntu\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("image: `ubuntu`"), "{e}");
        let e = parse("name = \"t\"\ncommand = [\"x\"]\n").unwrap_err();
        assert!(e.to_string().contains("timeout_s"), "{e}");
        let e = parse(
            "name = \"t\"\ncommand = [\"x\"]\ntimeout_s = 1\n[[mount]]\nhost = \"/\"\ncontainer = \"/workspace/x\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("mount[0].container"), "{e}");
        let e = parse("name = \"t\"\ncommand = [\"x\"]\ntimeout_s = 1\nallow_hosts = [\"a\"]\n")
            .unwrap_err();
        assert!(e.to_string().contains("allow_hosts"), "{e}");
    }

    #[test]
    fn mount_destinations_are_checked_lexically() {
        for ok in ["/opt/agent", "/solutions", "/home/u/.config"] {
            assert_eq!(check_destination(ok), Ok(()), "{ok}");
        }
        for bad in [
            "relative",
            "/",
            "/x/../workspace",
            "/workspace",
            "/workspace/x",
            "/arena",
            "/proc/self",
            "/opt/./x",
            "/opt//x",
            "/opt/",
        ] {
            assert!(check_destination(bad).is_err(), "{bad}");
        }
        // A mount above a reserved path would hide it.
        assert!(check_destination("/de").is_ok());
        assert!(check_destination("/sys").is_err());
    }

    #[test]
    fn networks() {
        let a = parse("name = \"t\"\ncommand = [\"x\"]\ntimeout_s = 1\nnetwork = \"egress\"\nallow_hosts = [\"api.example.com\"]\n").unwrap();
        assert_eq!(
            a.network,
            AgentNetwork::Egress {
                allow: vec!["api.example.com".into()]
            }
        );
    }

    #[test]
    fn bundled_agent_files_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../agents");
        let mut names = Vec::new();
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                names.push(Agent::load(&p).unwrap().name);
            }
        }
        names.sort();
        assert_eq!(
            names,
            [
                "claude-code",
                "claude-code-cuda",
                "claude-code-host",
                "codex",
                "codex-cuda",
                "codex-host",
                "cursor-agent",
                "scripted"
            ]
        );
    }
}
