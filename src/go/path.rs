//! Go's `path.Clean`, which daprd's HTTP router applies to request paths.

/// Go's `path.Clean` for a rooted URL path: repeated slashes collapse, `.` and `..` elements
/// resolve, a trailing slash goes.
pub fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for element in p.split('/') {
        match element {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            e => parts.push(e),
        }
    }
    let mut out = String::with_capacity(p.len());
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_path_is_gos() {
        assert_eq!(clean_path("/v1.0/jobs/a/"), "/v1.0/jobs/a");
        assert_eq!(clean_path("//v1.0///jobs/./a"), "/v1.0/jobs/a");
        assert_eq!(clean_path("/v1.0/jobs/x/../a"), "/v1.0/jobs/a");
        assert_eq!(clean_path("/../.."), "/");
        assert_eq!(clean_path("/"), "/");
    }
}
