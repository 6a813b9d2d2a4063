//! The seeds of a randomized test: `default`, unless the environment variable `var` names others,
//! as a range `a..b` or one seed `a` (to replay the seed a failure named).

use std::ops::Range;

/// The seeds to run: `var` if set (`a..b`, or `a` alone), else `default`. Panics on a malformed
/// value, naming it.
///
/// # Examples
///
/// ```
/// assert_eq!(ddb_lock_test_kit::seeds::from_env("NO_SUCH_SEEDS_VAR", 0..3), 0..3);
/// ```
pub fn from_env(var: &str, default: Range<u64>) -> Range<u64> {
    let Ok(spec) = std::env::var(var) else {
        return default;
    };
    let seed = |s: &str| -> u64 {
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{var}={spec}: not a seed or a range a..b"))
    };
    match spec.split_once("..") {
        Some((a, b)) => seed(a)..seed(b),
        None => {
            let one = seed(&spec);
            one..one + 1
        }
    }
}
