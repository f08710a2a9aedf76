//! A timed GPU batch's calls one after another (order.py, order_check.py), without a device:
//! the graph arena builds from each call's captured graph (a stand-in for the driver's graph
//! calls), and the evaluator's checks of the stamps between calls.

use super::tests::assert_prints_ok;

const FAKE_DRIVER: &str = include_str!("order_tests/fake_driver.py");

/// Each call's nodes after every last node of the call before, joined or not; a stamp after
/// the calls drawn; graphs that cannot be copied node by node go in as child nodes.
#[test]
fn each_calls_work_comes_after_all_of_the_previous_calls() {
    assert_prints_ok(&format!(
        "{FAKE_DRIVER}\n{}",
        include_str!("order_tests/chain.py")
    ));
}

/// A call's output unwritten after its turn, a later call's written before, stamps left out:
/// each fails the batch; an honest batch passes, graph-timed or eager.
#[test]
fn a_batch_whose_calls_overlap_or_merge_fails() {
    assert_prints_ok(&format!(
        "{FAKE_DRIVER}\n{}",
        include_str!("order_tests/stamps.py")
    ));
}
