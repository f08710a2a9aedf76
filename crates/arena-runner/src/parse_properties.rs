//! Property tests of what the runner parses from outside: a token file, a `--gpus`
//! spec, and a line of `nvidia-smi` output. Any text is read or refused with an error that
//! names where it came from; nothing panics.

use arena_mutate::{apply_bytes, byte_edits, noise};
use proptest::prelude::*;

const TOKENS: &str = "# runner tokens\nalice 0123456789abcdef0123456789abcdef\nci-bot@lab 00000000000000000000000000000000000000\n";
const SPECS: &[&str] = &[
    "auto",
    "none",
    "cpu:2",
    "fake:3",
    "nvidia:0,1",
    "amd:renderD128,renderD129",
    "cdi:nvidia.com/gpu:0,1",
];
const SMI: &str = "1980, 2619, 1980, 41, 71.52, 0, P0, 0x0000000000000000\n";

fn edited(base: &'static str) -> impl Strategy<Value = String> {
    byte_edits()
        .prop_map(move |e| String::from_utf8_lossy(&apply_bytes(base.as_bytes(), &e)).into_owned())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_token_file_is_read_or_refused_naming_the_file(text in prop_oneof![noise(), edited(TOKENS)]) {
        if let Err(e) = crate::auth::Tokens::parse(&text, "/etc/arena/tokens") {
            prop_assert!(e.to_string().contains("/etc/arena/tokens"), "{e}");
        }
    }

    #[test]
    fn a_gpus_spec_is_read_or_refused_naming_the_option(
        spec in prop_oneof![noise(), proptest::sample::select(SPECS).prop_flat_map(edited)]
    ) {
        // An empty device directory: what a spec names must exist, and nothing does.
        let dev = tempfile::tempdir().unwrap();
        if let Err(e) = crate::gpus::parse_gpus_at(&spec, dev.path()) {
            prop_assert!(e.to_string().contains("--gpus"), "{e}");
        }
    }

    #[test]
    fn an_nvidia_smi_line_is_read_or_refused(text in prop_oneof![noise(), edited(SMI)]) {
        let _ = crate::device_state::nvidia::parse_line(&text);
    }
}
