//! A kernel's words never leave the evaluator for a hidden configuration, only a kind
//! (trusted/arena_trusted/outcomes.py): through a capture it refuses (its reason and kind, a
//! GPU's channel, which the CPU end-to-end test cannot reach), an error it raises, a check it
//! fails, an evaluation it breaks. A visible configuration keeps them. The kernel's side is
//! stood in for by tests/fixtures/hidden_words.py.

mod common;

use arena_eval::trusted::HIDDEN_KINDS;
use common::evaluator_python;

#[test]
fn a_hidden_configuration_is_told_by_kind_and_a_visible_one_by_the_kernels_words() {
    let out = evaluator_python(include_str!("fixtures/hidden_words.py"));
    let hidden = out["hidden"].as_object().unwrap();
    assert_eq!(hidden.len(), 4, "{out}");
    for (channel, said) in hidden {
        let said = said.as_str().unwrap();
        assert!(
            !said.contains("UNSEENLEAK") && !said.contains("12345"),
            "{channel}: {said}"
        );
        let kind = said.rsplit(": ").next().unwrap();
        assert!(HIDDEN_KINDS.contains(&kind), "{channel}: {said}");
    }
    assert_eq!(hidden["graph_error"], "not_capturable");
    assert_eq!(
        hidden["case_error"],
        "unseen configuration 0 (scale_up): kernel_failed"
    );
    assert_eq!(
        hidden["check"],
        "unseen configuration 0 (scale_up): wrong_output"
    );
    for (channel, said) in out["visible"].as_object().unwrap() {
        assert!(
            said.as_str().unwrap().contains("UNSEENLEAK"),
            "{channel}: {said}"
        );
    }
}
