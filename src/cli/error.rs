//! What can go wrong in `jobsd jobs …`, and the exit code each failure gives. The codes are a
//! contract with shell scripts (README "Command line"): add new ones, never renumber.

/// The exit codes of `jobsd jobs …`.
pub mod exit {
    /// Done.
    pub const OK: u8 = 0;
    /// The server answered with an error not covered below (its `errorCode` and message are
    /// printed), or something else failed.
    pub const ERROR: u8 = 1;
    /// Partly done: a delete of many jobs where some deletes failed, or an import where some
    /// lines failed (each failure printed).
    pub const PARTIAL: u8 = 2;
    /// The job does not exist.
    pub const NOT_FOUND: u8 = 3;
    /// No server answered: connection refused, unknown host, or the timeout passed.
    pub const UNREACHABLE: u8 = 4;
    /// The server refused the API token (`DAPR_API_TOKEN` missing or wrong).
    pub const UNAUTHORIZED: u8 = 5;
    /// Not confirmed: the delete was declined at the prompt, or a delete of many jobs had
    /// neither a terminal to ask on nor `--yes`.
    pub const NOT_CONFIRMED: u8 = 6;
    /// Bad flags, arguments or `--file` (BSD `EX_USAGE`, as for jobsd's other roles).
    pub const USAGE: u8 = 64;
}

/// A failed `jobsd jobs …` command; its message goes to stderr.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flags or arguments.
    #[error("{0}")]
    Usage(String),
    /// The job (or selection) named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// No server answered.
    #[error("cannot reach {address}: {reason}")]
    Unreachable {
        /// Where we tried.
        address: String,
        /// Why it failed.
        reason: String,
    },
    /// The token was refused.
    #[error(
        "{address} refused the API token ({reason}); set DAPR_API_TOKEN to the sidecar's token"
    )]
    Unauthorized {
        /// Who refused it.
        address: String,
        /// What it said.
        reason: String,
    },
    /// The server answered with an error.
    #[error("{code}: {message}")]
    Server {
        /// Its `errorCode` (or the HTTP status / gRPC code when it gave none).
        code: String,
        /// Its message.
        message: String,
    },
    /// A delete that was not confirmed.
    #[error("{0}")]
    NotConfirmed(String),
    /// Some of many deletes failed (each was printed as it failed).
    #[error("{failed} of {total} deletes failed")]
    Partial {
        /// How many failed.
        failed: usize,
        /// How many were tried.
        total: usize,
    },
    /// Partly done, as the message says (an import where some lines failed; each was
    /// printed).
    #[error("{0}")]
    PartlyDone(String),
    /// Whoever read our output stopped reading (`jobsd jobs list | head`): not a failure.
    #[error("output closed")]
    OutputClosed,
    /// Anything else (writing the output, an answer that is not what jobsd sends).
    #[error("{0}")]
    Other(String),
}

impl CliError {
    /// The process exit code of this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => exit::USAGE,
            CliError::NotFound(_) => exit::NOT_FOUND,
            CliError::Unreachable { .. } => exit::UNREACHABLE,
            CliError::Unauthorized { .. } => exit::UNAUTHORIZED,
            CliError::Server { .. } | CliError::Other(_) => exit::ERROR,
            CliError::NotConfirmed(_) => exit::NOT_CONFIRMED,
            CliError::Partial { .. } | CliError::PartlyDone(_) => exit::PARTIAL,
            CliError::OutputClosed => exit::OK,
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return CliError::OutputClosed;
        }
        CliError::Other(format!("cannot write the output: {e}"))
    }
}
