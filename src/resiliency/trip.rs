//! A circuit breaker's `trip` condition: a CEL expression over the breaker's [`Counts`], as
//! Dapr evaluates it (`pkg/resiliency/breaker`), compiled once with bounds that keep hostile
//! or pathological expressions from exhausting the stack.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::counts::Counts;

/// Longest `trip` expression accepted; real ones are a few dozen characters.
const MAX_TRIP_LEN: usize = 1024;
/// Deepest bracket nesting accepted in `trip`: cel's parser needs 100–200 KiB of stack per
/// level in debug builds, so this bounds what the compile thread must hold.
const MAX_TRIP_BRACKETS: usize = 32;
/// Deepest expression tree accepted: evaluation recurses once per level on the caller's
/// (tokio worker's, 2 MiB) stack, which measured fine to 40 levels in debug builds.
const MAX_TRIP_DEPTH: usize = 16;
/// Stack of the thread that compiles `trip` (virtual memory; used only as deep as needed).
const COMPILE_STACK: usize = 64 << 20;
/// The variables Dapr binds when it evaluates `trip`.
const COUNTER_NAMES: [&str; 5] = [
    "requests",
    "totalSuccesses",
    "totalFailures",
    "consecutiveSuccesses",
    "consecutiveFailures",
];

/// A compiled `trip` expression: CEL over the five [`Counts`] fields, in Dapr's camelCase.
pub struct Trip {
    /// The expression as written, for messages.
    source: String,
    /// The environment the program was compiled for and runs in.
    env: Arc<cel::Env>,
    /// The compiled expression.
    program: cel::Program,
}

impl fmt::Debug for Trip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Trip").field(&self.source).finish()
    }
}

impl Trip {
    /// Compiles `source` and checks it: it may only name the five counters, and with all of
    /// them 0 it must evaluate to a bool (or fail only on arithmetic, e.g. a division by a
    /// counter). Dapr accepts any expression and treats errors as "don't trip"; rejecting
    /// typos here is ours.
    pub fn compile(source: &str) -> Result<Trip, String> {
        if source.len() > MAX_TRIP_LEN {
            return Err(format!("is longer than {MAX_TRIP_LEN} bytes"));
        }
        if bracket_depth(source) > MAX_TRIP_BRACKETS {
            return Err(format!(
                "nests brackets deeper than {MAX_TRIP_BRACKETS} levels"
            ));
        }
        // cel's parser is recursive and stack-hungry: give it a thread with room to spare,
        // which also turns a panic in that third-party code into a config error.
        let source = source.to_string();
        std::thread::Builder::new()
            .name("cel-compile".to_string())
            .stack_size(COMPILE_STACK)
            .spawn(move || Trip::compile_here(source))
            .map_err(|e| format!("cannot be compiled: no thread for the CEL compiler: {e}"))?
            .join()
            .unwrap_or_else(|_| Err("made the CEL parser fail".to_string()))
    }

    fn compile_here(source: String) -> Result<Trip, String> {
        let env = Arc::new(cel::Env::stdlib());
        let program = env
            .compile(&source)
            .map_err(|e| format!("is not valid CEL: {e}"))?;
        let mut walk = Walk::default();
        walk.expr(program.expression(), 1);
        if walk.max_depth > MAX_TRIP_DEPTH {
            return Err(format!(
                "nests operators deeper than {MAX_TRIP_DEPTH} levels"
            ));
        }
        let mut unknown = walk.free;
        unknown.retain(|name| !COUNTER_NAMES.contains(&name.as_str()));
        unknown.sort();
        unknown.dedup();
        if !unknown.is_empty() {
            return Err(format!(
                "names unknown variable(s) {}; the known ones are {}",
                unknown.join(", "),
                COUNTER_NAMES.join(", ")
            ));
        }
        let trip = Trip {
            source,
            env,
            program,
        };
        match trip.eval(&Counts::default()) {
            Ok(cel::Value::Bool(_)) => Ok(trip),
            Ok(other) => Err(format!("must evaluate to a bool, got {other:?}")),
            Err(cel::ExecutionError::DivisionByZero(_))
            | Err(cel::ExecutionError::RemainderByZero(_))
            | Err(cel::ExecutionError::Overflow(..)) => Ok(trip),
            Err(e) => Err(format!("fails with all counters 0: {e}")),
        }
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the breaker should open with these counts. Errors and non-bool results are
    /// `false`, as in Dapr: it "cannot assume it is safe to trip".
    pub fn ready_to_trip(&self, counts: &Counts) -> bool {
        matches!(self.eval(counts), Ok(cel::Value::Bool(true)))
    }

    fn eval(&self, counts: &Counts) -> Result<cel::Value, cel::ExecutionError> {
        let values = [
            counts.requests,
            counts.total_successes,
            counts.total_failures,
            counts.consecutive_successes,
            counts.consecutive_failures,
        ];
        let run = || {
            let mut context = cel::Context::with_env(self.env.clone());
            for (name, value) in COUNTER_NAMES.into_iter().zip(values) {
                // Dapr binds int64 values.
                context.add_variable_from_value(name, i64::from(value));
            }
            self.program.execute(&context)
        };
        catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|_| {
            Err(cel::ExecutionError::InternalError(
                "the CEL interpreter panicked".to_string(),
            ))
        })
    }
}

/// Deepest nesting of `(`, `[` and `{` outside string literals (roughly: quotes are honoured,
/// escapes are not, which can only over-count).
fn bracket_depth(source: &str) -> usize {
    let (mut depth, mut max, mut quote) = (0usize, 0usize, None);
    for c in source.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[' | '{') => {
                depth += 1;
                max = max.max(depth);
            }
            (None, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// What a walk over a compiled expression found.
#[derive(Default)]
struct Walk {
    /// Identifiers read that no comprehension binds.
    free: Vec<String>,
    /// Variables bound by the comprehensions around the current node.
    bound: Vec<String>,
    /// Depth of the tree.
    max_depth: usize,
}

impl Walk {
    fn expr(&mut self, expr: &cel::IdedExpr, depth: usize) {
        use cel::common::ast::Expr;
        self.max_depth = self.max_depth.max(depth);
        if depth > MAX_TRIP_DEPTH {
            // Too deep to be accepted anyway; don't recurse further.
            return;
        }
        let next = depth + 1;
        match &expr.expr {
            Expr::Ident(name) => {
                if !name.starts_with('@') && !self.bound.iter().any(|b| b == name) {
                    self.free.push(name.clone());
                }
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.expr(target, next);
                }
                for arg in &call.args {
                    self.expr(arg, next);
                }
            }
            Expr::Comprehension(comp) => {
                self.expr(&comp.iter_range, next);
                self.expr(&comp.accu_init, next);
                let before = self.bound.len();
                self.bound.push(comp.iter_var.clone());
                self.bound.extend(comp.iter_var2.iter().cloned());
                self.bound.push(comp.accu_var.clone());
                self.expr(&comp.loop_cond, next);
                self.expr(&comp.loop_step, next);
                self.expr(&comp.result, next);
                self.bound.truncate(before);
            }
            Expr::List(list) => {
                for e in &list.elements {
                    self.expr(e, next);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    self.entry(&entry.expr, next);
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    self.entry(&entry.expr, next);
                }
            }
            Expr::Select(select) => self.expr(&select.operand, next),
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn entry(&mut self, entry: &cel::common::ast::EntryExpr, depth: usize) {
        use cel::common::ast::EntryExpr;
        match entry {
            EntryExpr::StructField(field) => self.expr(&field.value, depth),
            EntryExpr::MapEntry(e) => {
                self.expr(&e.key, depth);
                self.expr(&e.value, depth);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trip(source: &str) -> Option<Arc<Trip>> {
        match Trip::compile(source) {
            Ok(t) => Some(Arc::new(t)),
            Err(e) => panic!("{source:?}: {e}"),
        }
    }

    #[test]
    fn trip_errors_and_non_bools_do_not_trip() {
        // A division by a counter is accepted at load but fails at 0: no trip then.
        let t = trip("requests / totalSuccesses > 1").unwrap_or_else(|| unreachable!());
        assert!(!t.ready_to_trip(&Counts::default()));
        assert!(t.ready_to_trip(&Counts {
            requests: 4,
            total_successes: 2,
            ..Default::default()
        }));
        // Mixed int/uint/double comparisons work like cel-go.
        let t = trip("consecutiveFailures > 5u").unwrap_or_else(|| unreachable!());
        assert!(t.ready_to_trip(&Counts {
            consecutive_failures: 6,
            ..Default::default()
        }));
    }

    #[test]
    fn trip_compile_rejects_typos_and_non_bools() {
        for (source, why) in [
            ("consecutiveFailure > 5", "unknown variable"),
            (
                "requests > 10 && consecutiveFailurez > 3",
                "unknown variable",
            ),
            ("counts.requests > 1", "unknown variable"),
            ("requests", "bool"),
            ("consecutiveFailures >", "not valid CEL"),
            ("", "not valid CEL"),
            ("size(requests) > 1", "fails with all counters 0"),
        ] {
            match Trip::compile(source) {
                Ok(_) => panic!("{source:?} was accepted"),
                Err(e) => assert!(e.contains(why), "{source:?}: {e}"),
            }
        }
    }

    #[test]
    fn trip_compile_accepts_comprehension_variables() {
        assert!(Trip::compile("[requests, totalFailures].exists(x, x > 100)").is_ok());
    }

    #[test]
    fn trip_compile_bounds_pathological_input() {
        // Each of these overflowed a 2 MiB stack before the bounds (parse or evaluation).
        let brackets = format!("{}true{}", "(".repeat(200), ")".repeat(200));
        assert!(Trip::compile(&brackets).is_err_and(|e| e.contains("brackets deeper")));
        let lists = format!("{}{} == []", "[".repeat(30), "]".repeat(30));
        assert!(Trip::compile(&lists).is_err_and(|e| e.contains("operators deeper")));
        let chain = "1".to_string() + &"+1".repeat(200) + " > 0";
        assert!(Trip::compile(&chain).is_err_and(|e| e.contains("operators deeper")));
        let long = "requests > 1 || ".repeat(100) + "true";
        assert!(Trip::compile(&long).is_err_and(|e| e.contains("longer")));
        // Deep but within bounds: fine.
        let ok = "1".to_string() + &" + 1".repeat(12) + " > 0";
        assert!(Trip::compile(&ok).is_ok());
    }
}
