//! Arguments of `arenactl report` and `arenactl compare`.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// One self-contained page: tables, plots, every task run (default).
    Html,
    /// The aggregate and generalization tables as Markdown.
    Md,
    /// The aggregate table as CSV.
    Csv,
    /// Everything as JSON.
    Json,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run directory (its results.json is read) or a results.json file.
    #[arg(value_name = "RUN_DIR")]
    pub run: PathBuf,
    /// What to write.
    #[arg(long, value_enum, default_value = "html", conflicts_with = "json")]
    pub format: ReportFormat,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
    /// Where to write it; default: RUN_DIR/report.html for HTML, stdout otherwise.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Tables of the task runs arena's trusted evaluator measured only (the self-reported
    /// ones are counted above them, in no row).
    #[arg(long)]
    pub trusted_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    /// A per-task table and the verdict (default).
    Md,
    /// One self-contained page.
    Html,
    /// Everything as JSON.
    Json,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The first run (A): a run directory or a results.json file.
    #[arg(value_name = "RUN_A")]
    pub a: PathBuf,
    /// The second run (B), compared against A.
    #[arg(value_name = "RUN_B")]
    pub b: PathBuf,
    /// What to write.
    #[arg(long, value_enum, default_value = "md", conflicts_with = "json")]
    pub format: CompareFormat,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
    /// Write it to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}
