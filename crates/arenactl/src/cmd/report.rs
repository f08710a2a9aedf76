//! `arenactl report RUN_DIR` and `arenactl compare RUN_A RUN_B`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use arena_report::compare::compare;
use arena_report::html::{self, PageInfo};
use arena_report::Report;
use arena_run::result::{load_result_file, LoadedResults};

use super::{print_json, Outcome};
use crate::cli::{CompareArgs, CompareFormat, ReportArgs, ReportFormat};

/// A run directory's results.json, or the file itself.
fn results_file(run: &Path) -> PathBuf {
    if run.is_dir() {
        run.join("results.json")
    } else {
        run.to_path_buf()
    }
}

/// The results, the run's id and its task runs without a result (where the file names them).
fn load(run: &Path) -> anyhow::Result<LoadedResults> {
    Ok(load_result_file(&results_file(run))?)
}

fn write_out(path: &Path, text: &str) -> anyhow::Result<()> {
    arena_run::rundir::write_atomic(path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// Prefix that turns a path relative to the run directory into a link from `page`.
fn link_base(run_dir: &Path, page: &Path) -> String {
    let dir = |p: &Path| std::fs::canonicalize(p).ok();
    let page_dir = page.parent().map(|p| {
        if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        }
    });
    match (dir(run_dir), page_dir.and_then(dir)) {
        (Some(run), Some(at)) if run == at => String::new(),
        (Some(run), _) => format!("{}/", run.display()),
        _ => format!("{}/", run_dir.display()),
    }
}

/// A warning on stderr, and exit code 1, where `files` hold no task result: an empty table
/// (every rate 0) reads as a run that scored nothing, not as a run that has no results yet.
pub(super) fn warn_if_empty(files: &[PathBuf], results: usize, unscored: usize) -> Outcome {
    if results > 0 {
        return Outcome::Ok;
    }
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let why = if unscored > 0 {
        format!("{unscored} task run(s) failed for reasons outside the agent's kernel (listed as unscored)")
    } else {
        "a run writes its results as its task runs finish: is it still running, or was it \
         started at all?"
            .to_string()
    };
    eprintln!(
        "warning: {}: no task results to score; {why}",
        names.join(", ")
    );
    Outcome::Invalid
}

pub fn report(args: ReportArgs) -> anyhow::Result<Outcome> {
    let LoadedResults {
        tasks: results,
        run_id,
        infra_errors,
    } = load(&args.run)?;
    let outcome = warn_if_empty(
        &[results_file(&args.run)],
        results.len(),
        infra_errors.len(),
    );
    let report = if args.trusted_only {
        Report::build_trusted_only(&results)?
    } else {
        Report::build(&results)?
    }
    .with_unscored(infra_errors);
    let format = if args.json {
        ReportFormat::Json
    } else {
        args.format
    };
    let text = match format {
        ReportFormat::Json => {
            if args.out.is_none() {
                print_json(&report)?;
                return Ok(outcome);
            }
            serde_json::to_string_pretty(&report)? + "\n"
        }
        ReportFormat::Csv => arena_report::table::aggregates_csv(&report.aggregates),
        ReportFormat::Md => report.markdown(),
        ReportFormat::Html => {
            let run_dir = if args.run.is_dir() {
                args.run.clone()
            } else {
                args.run.parent().unwrap_or(Path::new(".")).to_path_buf()
            };
            let out = args
                .out
                .clone()
                .unwrap_or_else(|| run_dir.join("report.html"));
            let info = PageInfo {
                title: format!("arena report: {}", run_dir.display()),
                run_id,
                link_base: link_base(&run_dir, &out),
            };
            write_out(&out, &html::render(&report, &results, &info))?;
            println!("{}", out.display());
            return Ok(outcome);
        }
    };
    match &args.out {
        Some(p) => write_out(p, &text)?,
        None => print!("{text}"),
    }
    Ok(outcome)
}

pub fn compare_runs(args: CompareArgs) -> anyhow::Result<Outcome> {
    let a = load(&args.a)?.tasks;
    let b = load(&args.b)?.tasks;
    for (run, tasks) in [(&args.a, &a), (&args.b, &b)] {
        anyhow::ensure!(
            !tasks.is_empty(),
            "{}: no task results to compare (a run writes them as its task runs finish)",
            results_file(run).display()
        );
    }
    let c = compare(
        &args.a.display().to_string(),
        &a,
        &args.b.display().to_string(),
        &b,
    );
    let format = if args.json {
        CompareFormat::Json
    } else {
        args.format
    };
    let text = match format {
        CompareFormat::Json => serde_json::to_string_pretty(&c)? + "\n",
        CompareFormat::Md => c.markdown(),
        CompareFormat::Html => html::compare::render(&c),
    };
    match &args.out {
        Some(p) => {
            write_out(p, &text)?;
            println!("{}", p.display());
        }
        None => print!("{text}"),
    }
    Ok(Outcome::Ok)
}
