//! Kubernetes resource quantities (`4Mi`, `512Ki`, `1G`, `1000`), as daprd reads
//! `--max-body-size`.

/// Bytes of a quantity: a non-negative integer or decimal number with an optional binary
/// (`Ki Mi Gi Ti Pi Ei`) or decimal (`k M G T P E`) suffix; fractions round up.
pub fn parse_quantity(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let multiplier: u128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        other => return Err(format!("unknown suffix {other:?}")),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return Err("missing number".into());
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| "number too large".to_owned())?
    };
    let mut bytes = whole
        .checked_mul(multiplier)
        .ok_or_else(|| "number too large".to_owned())?;
    if !frac.is_empty() {
        let digits = u32::try_from(frac.len()).map_err(|_| "too many digits".to_owned())?;
        let scale = 10u128
            .checked_pow(digits)
            .ok_or_else(|| "too many digits".to_owned())?;
        let frac: u128 = frac.parse().map_err(|_| "bad fraction".to_owned())?;
        let part = frac
            .checked_mul(multiplier)
            .ok_or_else(|| "number too large".to_owned())?;
        bytes += part.div_ceil(scale);
    }
    usize::try_from(bytes).map_err(|_| "number too large".to_owned())
}

#[cfg(test)]
mod tests {
    use super::parse_quantity;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("4Mi"), Ok(4 << 20));
        assert_eq!(parse_quantity("512Ki"), Ok(512 << 10));
        assert_eq!(parse_quantity("1G"), Ok(1_000_000_000));
        assert_eq!(parse_quantity("1000"), Ok(1000));
        assert_eq!(parse_quantity("1.5Ki"), Ok(1536));
        assert_eq!(parse_quantity("0.5"), Ok(1));
        assert!(parse_quantity("").is_err());
        assert!(parse_quantity("Mi").is_err());
        assert!(parse_quantity("4Xi").is_err());
        assert!(parse_quantity("-1").is_err());
        assert!(parse_quantity("99999999999999999999999999999999999999999E").is_err());
    }
}
