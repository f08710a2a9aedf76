//! Parsers of command-line values that clap's own do not cover. Each checks a value's form
//! only, so that a malformed one is a usage error (exit 2, clap's message naming the flag);
//! what depends on the host (a GPU that is not there, a file that is missing) is checked
//! when the command runs.

use std::path::PathBuf;

/// `NAME=FILE` of `--secret`.
pub fn parse_secret(s: &str) -> Result<(String, PathBuf), String> {
    let (name, file) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected NAME=FILE"))?;
    arena_run::secrets::check_name(name)?;
    if file.is_empty() {
        return Err(format!("{name}: no file after `=`"));
    }
    Ok((name.to_string(), PathBuf::from(file)))
}

/// A size such as `16GiB`, `512MiB` or a number of bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let b = s
        .parse::<bytesize::ByteSize>()
        .map_err(|e| format!("`{s}`: {e} (write e.g. 16GiB)"))?
        .as_u64();
    if b == 0 {
        return Err("must be more than 0 bytes".into());
    }
    Ok(b)
}

/// `--gpus`: auto, none, cpu[:N], fake[:N], nvidia:I,…, amd:NODE,…, cdi:SPEC:DEVICE,… or
/// slurm (arena_runner::gpus::parse_gpus reads it; whether the devices exist is its check).
pub fn gpus(s: &str) -> Result<String, String> {
    let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
    let list = |what: &str| -> Result<(), String> {
        if arg.split(',').all(|p| p.trim().is_empty()) {
            return Err(format!(
                "`{s}`: list the {what}, e.g. {kind}:{}",
                example(kind)
            ));
        }
        Ok(())
    };
    match kind {
        "auto" | "slurm" if arg.is_empty() => Ok(s.to_string()),
        "none" | "cpu" | "fake" => match arg {
            "" => Ok(s.to_string()),
            n => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(s.to_string()),
                _ => Err(format!("`{s}`: `{n}` is not a count of at least 1")),
            },
        },
        "nvidia" => {
            list("GPU indices")?;
            if let Some(bad) = arg
                .split(',')
                .find(|p| !p.is_empty() && p.parse::<u32>().is_err())
            {
                return Err(format!("`{s}`: `{bad}` is not an NVIDIA GPU index"));
            }
            Ok(s.to_string())
        }
        "amd" => list("render nodes").map(|_| s.to_string()),
        "cdi" => match arg.rsplit_once(':') {
            Some((spec, devices)) if !spec.is_empty() && !devices.is_empty() => Ok(s.to_string()),
            _ => Err(format!(
                "`{s}`: expected cdi:SPEC:DEVICE,…, e.g. cdi:/etc/cdi/nvidia.yaml:nvidia.com/gpu=0"
            )),
        },
        _ => Err(format!(
            "`{s}`: expected auto, none, cpu:N, fake:N, nvidia:I,…, amd:renderDN,…, \
             cdi:SPEC:DEVICE,… or slurm"
        )),
    }
}

fn example(kind: &str) -> &'static str {
    match kind {
        "nvidia" => "0,1",
        _ => "renderD128",
    }
}

/// A runner's address: `unix:/ABSOLUTE/PATH`, or `http://HOST:PORT` / `https://HOST:PORT`.
pub fn runner_addr(s: &str) -> Result<String, String> {
    if let Some(p) = s.strip_prefix("unix:") {
        if !p.trim_start_matches("//").starts_with('/') {
            return Err(format!(
                "`{s}`: a socket path is absolute (unix:/run/arena/runner.sock)"
            ));
        }
        return Ok(s.to_string());
    }
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
        .ok_or_else(|| format!("`{s}`: expected unix:PATH or http://HOST:PORT"))?;
    let host_port = rest.trim_end_matches('/');
    match host_port.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(s.to_string()),
        _ => Err(format!(
            "`{s}`: expected http://HOST:PORT, e.g. http://gpu1:50551"
        )),
    }
}

/// `--admin`: `uid:N` or `token:NAME`, as the runner names its callers.
pub fn identity(s: &str) -> Result<String, String> {
    let ok = match s.split_once(':') {
        Some(("uid", n)) => n.parse::<u32>().is_ok(),
        Some(("token", name)) => !name.is_empty() && !name.contains(char::is_whitespace),
        _ => false,
    };
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}`: expected uid:N or token:NAME"))
    }
}

/// `--registry-mirror REGISTRY=MIRROR`.
pub fn mirror(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((r, m)) if !r.is_empty() && !m.is_empty() => Ok(s.to_string()),
        _ => Err(format!("`{s}`: expected REGISTRY=MIRROR")),
    }
}

/// `--platform OS/ARCH` (linux/amd64; a variant after a second `/` is kept).
pub fn platform(s: &str) -> Result<String, String> {
    match s.split_once('/') {
        Some((os, arch)) if !os.is_empty() && !arch.is_empty() => Ok(s.to_string()),
        _ => Err(format!("`{s}`: expected OS/ARCH (linux/amd64)")),
    }
}

/// A content digest, `sha256:` and 64 lowercase hex digits.
pub fn digest(s: &str) -> Result<String, String> {
    match s.strip_prefix("sha256:") {
        Some(h) if h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) => {
            Ok(s.to_string())
        }
        _ => Err(format!("`{s}`: expected sha256: and 64 hex digits")),
    }
}

/// A number of seconds, CPUs or a scale: finite and above 0.
pub fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("`{s}`: expected a number above 0")),
    }
}

/// A number of seconds that may be 0.
pub fn non_negative_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("`{s}`: expected a number of at least 0")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_a_variable_name_and_a_file() {
        assert_eq!(
            parse_secret("API_KEY=/run/key").unwrap(),
            ("API_KEY".to_string(), PathBuf::from("/run/key"))
        );
        for bad in ["API_KEY", "API_KEY=", "1X=/k", "A-B=/k", "=/k"] {
            assert!(parse_secret(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_are_bytes_above_zero() {
        assert_eq!(parse_size("16GiB").unwrap(), 16 << 30);
        assert!(parse_size("0").is_err() && parse_size("lots").is_err());
    }

    #[test]
    fn gpu_specs_are_checked_for_form_only() {
        for good in [
            "auto",
            "none",
            "cpu:2",
            "fake:4",
            "nvidia:0,1",
            "amd:renderD128",
            "cdi:/etc/cdi/nvidia.yaml:nvidia.com/gpu=0",
            "slurm",
        ] {
            assert_eq!(gpus(good).as_deref(), Ok(good), "{good}");
        }
        for bad in [
            "bogus", "cpu:0", "fake:x", "nvidia:", "nvidia:a", "amd:", "cdi:x", "auto:1",
        ] {
            assert!(gpus(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn runner_addresses() {
        for good in [
            "unix:/run/arena/runner.sock",
            "unix:///tmp/r.sock",
            "http://gpu1:50551",
            "http://[::1]:1",
        ] {
            assert!(runner_addr(good).is_ok(), "{good}");
        }
        for bad in ["unix:rel.sock", "gpu1:50551", "http://gpu1", "http://:1"] {
            assert!(runner_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn identities_mirrors_digests_and_numbers() {
        assert!(identity("uid:0").is_ok() && identity("token:ci").is_ok());
        assert!(identity("uid:x").is_err() && identity("root").is_err());
        assert!(mirror("docker.io=mirror:5000").is_ok() && mirror("docker.io").is_err());
        assert!(platform("linux/arm64/v8").is_ok() && platform("amd64").is_err());
        assert!(digest(&format!("sha256:{}", "a".repeat(64))).is_ok());
        assert!(digest("sha256:abc").is_err());
        assert!(positive_f64("0").is_err() && positive_f64("nan").is_err());
        assert_eq!(non_negative_f64("0"), Ok(0.0));
    }
}
