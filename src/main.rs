//! The `jobsd` binary: flags in, one role out. Everything else lives in the library.

use std::process::ExitCode;

use jobsd::app::{self, Replica, Sidecar};
use jobsd::config::{self, Command, Env, IgnoredFlags};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

// jemalloc: server CPU per durable create 54 -> 36-41 µs, trigger bursts 38k -> 43-48k
// deliveries/s against the mimalloc crate (e2e/bench/RESULTS.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Exit code for bad flags (BSD `EX_USAGE`).
const EX_USAGE: u8 = 64;

fn main() -> ExitCode {
    let (cli, ignored) = match config::parse(std::env::args_os()) {
        Ok(parsed) => parsed,
        Err(e) => {
            // clap's own exit code is 2 for every usage error; `--help` and `--version` are
            // the only "errors" that succeed.
            let _ = e.print();
            return match e.exit_code() {
                0 => ExitCode::SUCCESS,
                _ => ExitCode::from(EX_USAGE),
            };
        }
    };
    match cli.command {
        Some(Command::Version) => {
            println!("jobsd {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Some(Command::Jobs(args)) => return ExitCode::from(jobsd::cli::run(args)),
        Some(Command::Scheduler(args)) => {
            let cfg = match args.validate() {
                Ok(cfg) => cfg,
                Err(e) => {
                    eprintln!("jobsd: {e}");
                    return ExitCode::from(EX_USAGE);
                }
            };
            init_tracing(&args.log_level, args.log_as_json);
            warn_ignored(&ignored);
            return run(async move {
                let signal = app::shutdown_signal();
                let replica = Replica::start(cfg).await?;
                stop_on_signal(signal, replica.shutdown_token());
                replica.wait().await?;
                Ok(())
            });
        }
        None => {}
    }
    let cfg = match cli.sidecar.validate(Env::from_process()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("jobsd: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    init_tracing(&cli.sidecar.log_level, cli.sidecar.log_as_json);
    warn_ignored(&ignored);
    jobsd::serve::raise_open_files_limit();
    run(async move {
        let signal = app::shutdown_signal();
        let sidecar = Sidecar::start(cfg).await?;
        stop_on_signal(signal, sidecar.shutdown_token());
        sidecar.wait().await?;
        Ok(())
    })
}

/// Names, once, the Dapr flags given that jobsd accepted without acting on them, so that a
/// command line written for daprd does not silently lose a setting.
fn warn_ignored(ignored: &IgnoredFlags) {
    if !ignored.is_empty() {
        tracing::warn!(flags = %ignored, "Dapr flags accepted but not acted on");
    }
}

/// Cancels `stop` once `signal` (SIGINT or SIGTERM, caught since before the role started)
/// resolves.
fn stop_on_signal(signal: impl Future<Output = ()> + Send + 'static, stop: CancellationToken) {
    tokio::spawn(async move {
        signal.await;
        tracing::info!("shutting down");
        stop.cancel();
    });
}

/// Runs one role on a multi-threaded runtime and turns its outcome into the exit code.
fn run(role: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("jobsd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(role) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "jobsd failed");
            // Our error types already carry their causes in their messages.
            eprintln!("jobsd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(level: &str, json: bool) {
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    if json {
        // One flat object per line: the message and the event's fields at the top, beside
        // `timestamp`, `level` and `target`, where log shippers look for them.
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
}
