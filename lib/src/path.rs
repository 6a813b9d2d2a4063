//! Hierarchical resources: a [`LockPath`] of segments, locked with multi-granularity locking
//! (Gray's intention modes), as Locktopus locks its paths.
//!
//! Locking a path in a mode takes, in one lock set (one `TransactWriteItems`), the path's own
//! item in that mode and each ancestor's item (the root `[]` included) in the matching intention
//! mode: [`Mode::IntentShared`] under a shared lock, [`Mode::IntentExclusive`] under an exclusive
//! one. The compatibility of the modes ([`Mode::compatible_with`]) then makes two path locks
//! conflict exactly when one path is a prefix of the other (or equal) and their modes conflict:
//! `["A","B"]` exclusive conflicts with `["A"]` (held shared or exclusive: its item refuses the
//! intention-exclusive holder) and with `["A","B","C"]` (whose intention holder on `["A","B"]`
//! refuses the exclusive one), and not with `["A","C"]` (their holders on `["A"]` are both
//! intentions). Each check is a condition on one item; nothing is scanned.
//!
//! A path's resource name is `path:` followed by `/` and the segment for each segment, with `%`
//! written `%25` and `/` written `%2F` inside a segment: every path has its own name (an empty
//! segment, a segment holding the separator, the empty path `path:` itself), and
//! [`LockPath::from_resource`] reads it back.

use crate::client::LockClient;
use crate::error::Error;
use crate::guard::{LockGuard, LockWatch};
use crate::lock_set::{LockSet, SetAttempt};
use crate::mode::Mode;
use crate::options::AcquireOptions;
use std::fmt;
use std::future::Future;

/// The prefix of every path's resource name.
const PATH_PREFIX: &str = "path:";

/// A hierarchical resource: a path of string segments, `[]` being the whole namespace.
///
/// # Examples
///
/// ```
/// use ddb_lock::LockPath;
///
/// let user = LockPath::new(["user", "department", "IT", "foo.bar@fizz.buzz"]);
/// let department = LockPath::new(["user", "department", "IT"]);
/// assert!(department.is_ancestor_of(&user));
/// assert_eq!(LockPath::new(["a/b", ""]).resource(), "path:/a%2Fb/");
/// assert_eq!(LockPath::from_resource("path:/a%2Fb/"), Some(LockPath::new(["a/b", ""])));
/// assert_eq!(LockPath::root().resource(), "path:");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockPath {
    segments: Vec<String>,
}

impl LockPath {
    /// The path of `segments`, outermost first.
    pub fn new<I, S>(segments: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        LockPath {
            segments: segments.into_iter().map(Into::into).collect(),
        }
    }

    /// The empty path: the whole namespace, an ancestor of every other path.
    pub fn root() -> Self {
        LockPath {
            segments: Vec::new(),
        }
    }

    /// The segments, outermost first.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The resource name of the path's lock item (see the module documentation).
    pub fn resource(&self) -> String {
        let mut name = String::from(PATH_PREFIX);
        for segment in &self.segments {
            name.push('/');
            for c in segment.chars() {
                match c {
                    '%' => name.push_str("%25"),
                    '/' => name.push_str("%2F"),
                    c => name.push(c),
                }
            }
        }
        name
    }

    /// The path whose [`resource`](Self::resource) name is `resource`, if it is one.
    pub fn from_resource(resource: &str) -> Option<LockPath> {
        let rest = resource.strip_prefix(PATH_PREFIX)?;
        if rest.is_empty() {
            return Some(LockPath::root());
        }
        let rest = rest.strip_prefix('/')?;
        rest.split('/')
            .map(unescape)
            .collect::<Option<Vec<_>>>()
            .map(|segments| LockPath { segments })
    }

    /// Every proper ancestor, the root first.
    pub fn ancestors(&self) -> impl Iterator<Item = LockPath> + '_ {
        (0..self.segments.len()).map(|n| LockPath {
            segments: self.segments[..n].to_vec(),
        })
    }

    /// Whether `self` is a proper ancestor of `other` (a strict prefix of its segments).
    pub fn is_ancestor_of(&self, other: &LockPath) -> bool {
        self.segments.len() < other.segments.len() && other.segments.starts_with(&self.segments)
    }

    /// Whether locks on `self` in `mode` and on `other` in `other_mode` exclude each other: one
    /// path is the other or an ancestor of it, and the modes meeting there are not compatible
    /// ([`Mode::compatible_with`]): on one path, the two modes; on an ancestor, the ancestor's
    /// mode and the intention the other lock takes there. (Asked of intention modes, it said two
    /// intentions on one path conflicted; found by review.)
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::{LockPath, Mode};
    ///
    /// let ab = LockPath::new(["A", "B"]);
    /// assert!(ab.conflicts_with(Mode::Exclusive, &LockPath::new(["A"]), Mode::Shared));
    /// assert!(ab.conflicts_with(Mode::Exclusive, &LockPath::new(["A", "B", "C"]), Mode::Shared));
    /// assert!(!ab.conflicts_with(Mode::Exclusive, &LockPath::new(["A", "C"]), Mode::Exclusive));
    /// assert!(!ab.conflicts_with(Mode::Shared, &LockPath::new(["A"]), Mode::Shared));
    /// assert!(!ab.conflicts_with(Mode::IntentExclusive, &ab, Mode::IntentShared));
    /// ```
    pub fn conflicts_with(&self, mode: Mode, other: &LockPath, other_mode: Mode) -> bool {
        if self == other {
            !mode.compatible_with(other_mode)
        } else if self.is_ancestor_of(other) {
            !mode.compatible_with(other_mode.intention())
        } else if other.is_ancestor_of(self) {
            !mode.intention().compatible_with(other_mode)
        } else {
            false
        }
    }

    /// The lock-set members that lock this path in `mode`: each ancestor in the matching
    /// intention mode, then the path itself (what [`acquire_paths`](LockClient::acquire_paths)
    /// passes to [`acquire_set`](LockClient::acquire_set)).
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::{LockPath, Mode};
    ///
    /// let members = LockPath::new(["A"]).members(Mode::Shared);
    /// assert_eq!(members, [("path:".to_owned(), Mode::IntentShared), ("path:/A".to_owned(), Mode::Shared)]);
    /// ```
    pub fn members(&self, mode: Mode) -> Vec<(String, Mode)> {
        let intention = mode.intention();
        self.ancestors()
            .map(|ancestor| (ancestor.resource(), intention))
            .chain(std::iter::once((self.resource(), mode)))
            .collect()
    }
}

impl fmt::Display for LockPath {
    /// The segments as a JSON-like list: `["A", "B"]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.segments)
    }
}

/// A segment as written inside a resource name, read back: `%25` and `%2F` only.
fn unescape(escaped: &str) -> Option<String> {
    let mut segment = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find('%') {
        segment.push_str(&rest[..at]);
        let code = rest.get(at..at + 3)?;
        segment.push(match code {
            "%25" => '%',
            "%2F" => '/',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    segment.push_str(rest);
    Some(segment)
}

/// The fence that fenced path locks draw their tokens from besides their own, given the fenced
/// members of a set: the root's, if one of them is a path other than the root (the root's own
/// fence is raised as a member's). A path's fence alone ordered only the holders of that very
/// path: an exclusive lock of `["acct"]` and one of `["acct", "42"]` exclude each other, and
/// each drew its tokens from its own fence, so a holder superseded by the other could hold the
/// higher token, and its fenced writes were let through after the newer holder's (found by
/// review). Every path lock writes the root already: raising its fence too adds an item to the
/// transaction, and no contention.
pub(crate) fn common_fence<'a>(fenced: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let root = LockPath::root().resource();
    let mut paths = false;
    for resource in fenced {
        if resource == root {
            return None;
        }
        paths |= LockPath::from_resource(resource).is_some();
    }
    paths.then_some(root)
}

/// The lock-set members of several paths, each in its mode.
fn members_of(paths: &[(LockPath, Mode)]) -> Vec<(String, Mode)> {
    paths
        .iter()
        .flat_map(|(path, mode)| path.members(*mode))
        .collect()
}

/// The members as the lock-set calls take them.
fn borrowed(members: &[(String, Mode)]) -> Vec<(&str, Mode)> {
    members
        .iter()
        .map(|(resource, mode)| (resource.as_str(), *mode))
        .collect()
}

impl LockClient {
    /// Tries once to lock `paths`, each in its mode, all or nothing: one lock set of each path
    /// (in its mode) and of each of its ancestors (in the matching intention mode). A refusal
    /// names the resource in the way ([`LockPath::from_resource`] reads it) and its holder.
    /// Redundant paths are allowed (an ancestor locked in two modes is taken in their
    /// [`join`](Mode::join)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, LockPath, Mode, SetAttempt};
    ///
    /// let it = LockPath::new(["user", "department", "IT"]);
    /// match client.try_acquire_paths(&[(it, Mode::Exclusive)], &AcquireOptions::new()).await? {
    ///     SetAttempt::Acquired(set) => drop(client.release_set(&set).await),
    ///     SetAttempt::Held { resource, holder } => {
    ///         println!("{:?} is {}'s", LockPath::from_resource(&resource), holder.owner)
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire_paths(
        &self,
        paths: &[(LockPath, Mode)],
        opts: &AcquireOptions,
    ) -> Result<SetAttempt, Error> {
        let members = members_of(paths);
        self.try_acquire_set(&borrowed(&members), opts).await
    }

    /// Locks `paths` as [`try_acquire_paths`](Self::try_acquire_paths) does, waiting as
    /// [`acquire_set`](Self::acquire_set) does. Release with
    /// [`release_set`](Self::release_set).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, LockPath, Mode};
    ///
    /// let users = LockPath::new(["user"]);
    /// let one = LockPath::new(["user", "department", "IT", "foo.bar@fizz.buzz"]);
    /// // Read all users, write one (Locktopus's example of a lock that is not redundant).
    /// let set = client
    ///     .acquire_paths(&[(users, Mode::Shared), (one, Mode::Exclusive)], &AcquireOptions::new())
    ///     .await?;
    /// client.release_set(&set).await;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_paths(
        &self,
        paths: &[(LockPath, Mode)],
        opts: &AcquireOptions,
    ) -> Result<LockSet, Error> {
        let members = members_of(paths);
        self.acquire_set(&borrowed(&members), opts).await
    }

    /// [`acquire_paths`](Self::acquire_paths) with a [`LockGuard`] per lock taken (the paths'
    /// and their ancestors').
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, LockPath, Mode};
    ///
    /// let guards = client.lock_paths(&[(LockPath::new(["a", "b"]), Mode::Shared)], &AcquireOptions::new()).await?;
    /// assert_eq!(guards.len(), 3); // [], ["a"], ["a", "b"]
    /// # Ok(()) }
    /// ```
    pub async fn lock_paths(
        &self,
        paths: &[(LockPath, Mode)],
        opts: &AcquireOptions,
    ) -> Result<Vec<LockGuard>, Error> {
        let members = members_of(paths);
        self.lock_set(&borrowed(&members), opts).await
    }

    /// Runs `work` while holding `paths`, and always releases them afterwards, as
    /// [`with_lock_set`](Self::with_lock_set) does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, LockPath, Mode};
    ///
    /// let path = LockPath::new(["tenant", "acme", "invoices"]);
    /// client
    ///     .with_lock_paths(&[(path, Mode::Exclusive)], &AcquireOptions::new(), |_watches| async {
    ///         Ok::<_, ddb_lock::Error>(())
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock_paths<T, E, F, Fut>(
        &self,
        paths: &[(LockPath, Mode)],
        opts: &AcquireOptions,
        work: F,
    ) -> Result<T, E>
    where
        F: FnOnce(Vec<LockWatch>) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        let members = members_of(paths);
        self.with_lock_set(&borrowed(&members), opts, work).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn members_are_the_ancestors_in_the_intention_mode_then_the_path() {
        let members = LockPath::new(["A", "B"]).members(Mode::Exclusive);
        assert_eq!(
            members,
            vec![
                ("path:".to_owned(), Mode::IntentExclusive),
                ("path:/A".to_owned(), Mode::IntentExclusive),
                ("path:/A/B".to_owned(), Mode::Exclusive),
            ]
        );
        let members = LockPath::root().members(Mode::Shared);
        assert_eq!(members, vec![("path:".to_owned(), Mode::Shared)]);
    }

    #[test]
    fn names_that_are_no_path_read_back_as_none() {
        for name in ["orders/42", "path:A", "path:/a%2", "path:/a%41", "path:/%"] {
            assert_eq!(LockPath::from_resource(name), None, "{name}");
        }
    }

    fn segment() -> impl Strategy<Value = String> {
        prop::string::string_regex("[a-c/%]{0,3}").expect("regex")
    }

    fn path() -> impl Strategy<Value = LockPath> {
        prop::collection::vec(segment(), 0..4).prop_map(LockPath::new)
    }

    proptest! {
        #[test]
        fn a_path_reads_back_from_its_name(path in path()) {
            prop_assert_eq!(LockPath::from_resource(&path.resource()), Some(path));
        }

        #[test]
        fn two_paths_have_two_names(a in path(), b in path()) {
            prop_assert_eq!(a.resource() == b.resource(), a == b);
        }

        /// The items' modes decide conflicts as the paths' relation says: two path locks
        /// share an item in incompatible modes exactly when they conflict.
        #[test]
        fn intention_modes_decide_conflicts_as_paths_do(
            a in path(),
            b in path(),
            a_mode in 0..4_usize,
            b_mode in 0..4_usize,
        ) {
            let modes = [Mode::Exclusive, Mode::Shared, Mode::IntentShared, Mode::IntentExclusive];
            let (ma, mb) = (modes[a_mode], modes[b_mode]);
            let clash = a.members(ma).iter().any(|(ra, xa)| {
                b.members(mb).iter().any(|(rb, xb)| ra == rb && !xa.compatible_with(*xb))
            });
            prop_assert_eq!(clash, a.conflicts_with(ma, &b, mb));
        }
    }
}
