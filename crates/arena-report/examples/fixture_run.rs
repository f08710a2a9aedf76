//! Writes a synthetic run's results.json (arena_report::fixture) for benchmarks and demos.
//! usage: cargo run --release -p arena-report --example fixture_run -- OUT_DIR TASKS [REPEATS] [FACTOR] [SEED]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: fixture_run OUT_DIR TASKS [REPEATS] [FACTOR] [SEED]");
        std::process::exit(2);
    }
    let num = |i: usize, d: f64| args.get(i).map_or(d, |s| s.parse().expect("a number"));
    let set = arena_report::fixture::run(
        args[1].parse().expect("TASKS: a number"),
        num(2, 1.0) as u32,
        num(3, 1.0),
        num(4, 1.0) as u64,
    );
    let out = std::path::Path::new(&args[0]);
    std::fs::create_dir_all(out).expect("creating OUT_DIR");
    let text = serde_json::to_string_pretty(&set).expect("serializable");
    std::fs::write(out.join("results.json"), text).expect("writing results.json");
}
