//! The Scheduler addresses a sidecar (or `jobsd jobs --scheduler`) is given: daprd's
//! `--scheduler-host-address` syntax, read the same way by the flags and the command line.

/// A Scheduler address that is not `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid scheduler host address {0:?}: expected host:port")]
pub struct BadAddress(pub String);

/// The Scheduler addresses of a `--scheduler-host-address` (or `jobsd jobs --scheduler`) value: comma-separated, each entry
/// trimmed of whitespace and of one pair of surrounding quotes, blank entries dropped (so `""`,
/// `'  '` and whitespace mean "no Scheduler", as in daprd, where a quoted blank survives shell
/// quoting), duplicates dropped. Every entry must be `host:port`.
pub fn parse_addresses(value: &str) -> Result<Vec<String>, BadAddress> {
    let mut hosts: Vec<String> = Vec::new();
    for entry in value.split(',') {
        let trimmed = entry.trim();
        let unquoted = ["\"", "'"]
            .iter()
            .find_map(|q| trimmed.strip_prefix(q)?.strip_suffix(q))
            .unwrap_or(trimmed)
            .trim();
        if unquoted.is_empty() {
            continue;
        }
        let valid = unquoted
            .parse::<http::uri::Authority>()
            .is_ok_and(|a| a.port_u16().is_some() && !a.host().is_empty())
            && !unquoted.contains('@');
        if !valid {
            return Err(BadAddress(entry.trim().to_owned()));
        }
        if !hosts.iter().any(|h| h == unquoted) {
            hosts.push(unquoted.to_owned());
        }
    }
    Ok(hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_and_quoted_blank_scheduler_addresses_mean_embedded() {
        for blank in ["", " ", "''", "'  '", "\"\"", "\"  \"", " , ,'' "] {
            assert_eq!(
                parse_addresses(blank).unwrap(),
                Vec::<String>::new(),
                "{blank:?}"
            );
        }
    }

    #[test]
    fn scheduler_addresses_are_trimmed_unquoted_deduplicated_and_checked() {
        assert_eq!(
            parse_addresses(" 'h1:1' ,\"h2:2\",h1:1,[::1]:50006,localhost:50006").unwrap(),
            ["h1:1", "h2:2", "[::1]:50006", "localhost:50006"]
        );
        for bad in [
            "h1",
            "h1:",
            "h1:port",
            "http://h1:1",
            "u@h1:1",
            "h1:1/path",
            ":50006",
        ] {
            assert!(
                matches!(parse_addresses(bad), Err(BadAddress(_))),
                "{bad:?} should be refused"
            );
        }
    }
}
