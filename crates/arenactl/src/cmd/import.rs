//! `arenactl task import kernelbench DIR --out OUT`: KernelBench problems as arena tasks, each
//! read back as a task (so an import that is not runnable says why).

use std::path::{Path, PathBuf};

use super::{print_json, Outcome};

#[derive(serde::Serialize)]
struct ImportedTask {
    id: String,
    dir: PathBuf,
    /// The task digest (None when the task does not load).
    digest: Option<String>,
    /// The visible configuration: the module constants that size the inputs.
    configuration: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<String>,
}

#[derive(serde::Serialize)]
struct Report {
    out: PathBuf,
    tasks: Vec<ImportedTask>,
    skipped: Vec<arena_kernelbench::Skipped>,
}

pub fn kernelbench(dir: &Path, out: &Path, json: bool) -> anyhow::Result<Outcome> {
    let imported = arena_kernelbench::import(dir, out)?;
    let mut tasks = Vec::new();
    for p in &imported.tasks {
        let id = &p.id;
        let task_dir = out.join(id);
        let (digest, errors) = super::materialize::digest_or_errors(&task_dir, id)?;
        let configuration = p
            .configuration
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::from(*v)))
            .collect();
        tasks.push(ImportedTask {
            id: id.clone(),
            dir: task_dir,
            digest,
            configuration,
            errors,
        });
    }
    let invalid = tasks.iter().filter(|t| t.digest.is_none()).count();
    let report = Report {
        out: out.to_path_buf(),
        tasks,
        skipped: imported.skipped,
    };
    if json {
        print_json(&report)?;
    } else {
        for t in &report.tasks {
            match &t.digest {
                Some(d) => println!(
                    "{d}  {}  ({})",
                    t.id,
                    serde_json::Value::Object(t.configuration.clone())
                ),
                None => {
                    println!("INVALID  {}", t.id);
                    for e in &t.errors {
                        println!("  error: {e}");
                    }
                }
            }
        }
        for s in &report.skipped {
            println!("skipped {}: {}", s.file, s.reason);
        }
        println!(
            "{} KernelBench problems imported to {}; {} files skipped; {invalid} not valid tasks",
            report.tasks.len(),
            out.display(),
            report.skipped.len()
        );
    }
    Ok(if invalid > 0 {
        Outcome::Invalid
    } else if !report.skipped.is_empty() {
        Outcome::Partial
    } else {
        Outcome::Ok
    })
}
