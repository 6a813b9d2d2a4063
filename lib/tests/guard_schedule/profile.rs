//! How often each kind of step comes: the mixed profile's weights, and the extensions profile's.

use rand::rngs::StdRng;
use rand::Rng;

/// The roll of a step the mixed profile never draws: the clock steps forward by less than a
/// lease.
pub(super) const STEP_FORWARD: u32 = 100;

/// How often each kind of step comes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Profile {
    /// Every kind of step, acquisitions and endings as often as the rest.
    Mixed,
    /// Few guards, long-lived: mostly data replacements, extensions held back or copied, their
    /// late delivery, and the clock stepping back. A late or repeated extension needs several
    /// such steps on one guard before it ends, which the mixed profile rarely makes.
    Extensions,
}

impl Profile {
    /// How often an acquisition is shared (shared guards take no data replacements).
    pub(super) fn shared_odds(self) -> f64 {
        match self {
            Profile::Mixed => 0.3,
            Profile::Extensions => 0.1,
        }
    }

    /// A step's roll: the mixed profile's range of each kind of step (see [`World::step`]),
    /// chosen with this profile's weights.
    pub(super) fn roll(self, rng: &mut StdRng, open: usize) -> u32 {
        /// The start of a kind's range in the mixed profile, and its weight here (of 100).
        const EXTENSIONS: [(u32, u32); 16] = [
            (0, 10),           // acquire
            (22, 2),           // release
            (28, 2),           // release, its request held in the network
            (32, 2),           // drop
            (40, 3),           // cancel a release
            (46, 20),          // replace data
            (54, 6),           // end the lock, or extend it, through the client
            (62, 5),           // drop an answer
            (68, 2),           // delay answers
            (73, 11),          // hold an extension back
            (78, 10),          // copy an extension or a release
            (84, 14),          // deliver a held request
            (90, 3),           // jump past every lease
            (93, 5),           // step back
            (STEP_FORWARD, 3), // step forward
            (95, 2),           // wait
        ];
        match self {
            Profile::Mixed => rng.random_range(0..100),
            // With no guard open, a step on one would do nothing: take one.
            Profile::Extensions if open == 0 => 0,
            Profile::Extensions => {
                let roll = rng.random_range(0..100);
                let mut left: u32 = roll;
                for (start, weight) in EXTENSIONS {
                    if left < weight {
                        return start;
                    }
                    left -= weight;
                }
                unreachable!("the weights add up to 100")
            }
        }
    }
}
