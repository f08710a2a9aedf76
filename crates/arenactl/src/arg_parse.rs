//! Parsers of command-line values that clap's own do not cover: sizes and `--secret`.

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
}
