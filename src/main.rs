//! The `jobsd` binary: flags in, one role out. Everything else lives in the library.

use clap::Parser;

/// jobsd: the Dapr Jobs API and scheduler in one binary.
#[derive(Debug, Parser)]
#[command(name = "jobsd", version, about)]
struct Cli {
    /// The id of the app this sidecar serves (daprd's `--app-id`).
    #[arg(long, env = "APP_ID")]
    app_id: String,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The daemon (API, store, engine) is built on top of the `schedule` core in the next
    // steps; until then the binary reports what it would serve.
    println!(
        "jobsd {} (app id {:?}): schedule core only, no daemon yet",
        env!("CARGO_PKG_VERSION"),
        cli.app_id
    );
    Ok(())
}
