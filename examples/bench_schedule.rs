//! Cost of `Schedule::next` per spec: 1M chained calls (each answer is the next input, as the
//! engine uses it), repeated over several rounds; prints the median and best ns per call.
//!
//! Run with `cargo run --release --example bench_schedule`.

use std::hint::black_box;
use std::time::Instant;

use chrono::{DateTime, Utc};
use jobsd::schedule::cron;

const SPECS: &[&str] = &[
    "0 30 * * * *",
    "*/5 * * * * *",
    "0 0 0 1,15 * *",
    "0 * * 1,15 * Sun",
    "@every 1h30m",
    "0 0 9 * * MON-FRI",
    "TZ=America/New_York 0 30 2 * * *",
];
const CALLS: u32 = 1_000_000;
const ROUNDS: usize = 5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let start: DateTime<Utc> = "2026-01-01T00:00:00Z".parse()?;
    println!("{CALLS} chained next() calls per round, {ROUNDS} rounds, from {start}");
    println!();
    println!(
        "| {:<34} | {:>14} | {:>11} | {:<21} |",
        "spec", "median ns/call", "min ns/call", "last answer"
    );
    println!("|{:-<36}|{:->16}|{:->13}|{:-<23}|", "", "", "", "");
    for spec in SPECS {
        let schedule = cron::parse(spec)?;
        let mut per_call = Vec::with_capacity(ROUNDS);
        let mut last = start;
        for _ in 0..ROUNDS {
            let mut t = start;
            let began = Instant::now();
            for _ in 0..CALLS {
                // Restarting on `None` keeps the chain going if a spec runs out of matches.
                t = black_box(&schedule).next(black_box(t)).unwrap_or(start);
            }
            let elapsed = began.elapsed();
            last = black_box(t);
            per_call.push(elapsed.as_secs_f64() * 1e9 / f64::from(CALLS));
        }
        per_call.sort_by(f64::total_cmp);
        let median = per_call[ROUNDS / 2];
        let min = per_call[0];
        println!(
            "| {:<34} | {:>14.1} | {:>11.1} | {:<21} |",
            format!("`{spec}`"),
            median,
            min,
            last.format("%Y-%m-%dT%H:%M:%S")
        );
    }
    Ok(())
}
