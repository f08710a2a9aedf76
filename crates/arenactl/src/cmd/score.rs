//! `arenactl score RESULTS.json…`: the aggregate table of one or more result files.

use arena_report::{load_result_file, Report};

use super::{print_json, Outcome};
use crate::cli::ScoreArgs;

pub fn run(args: ScoreArgs) -> anyhow::Result<Outcome> {
    let (mut results, mut unscored) = (Vec::new(), Vec::new());
    for f in &args.files {
        let loaded = load_result_file(f)?;
        results.extend(loaded.tasks);
        unscored.extend(loaded.infra_errors);
    }
    let outcome = super::report::warn_if_empty(&args.files, results.len(), unscored.len());
    let report = if args.trusted_only {
        Report::build_trusted_only(&results)?
    } else {
        Report::build(&results)?
    }
    .with_unscored(unscored);
    if args.out.json {
        print_json(&report)?;
    } else if args.csv {
        print!(
            "{}",
            arena_report::table::aggregates_csv(&report.aggregates)
        );
        if args.trusted_only {
            eprint!("{}", report.trusted_only_line());
        }
    } else {
        print!("{}", report.markdown());
    }
    Ok(outcome)
}
