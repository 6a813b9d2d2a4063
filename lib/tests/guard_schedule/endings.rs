//! A guard's lock ended through its client rather than the guard.

use super::*;

impl World {
    /// Ends a guard's lock through its client rather than the guard: `release` of its lock,
    /// `release_owned` of its owner, `force_release` of the resource (through the holder's client,
    /// as another client's guards could only learn of it from their next extension), or
    /// `release_all`; or extends it through its client (`LockClient::extend`), which ends it if
    /// the extension finds it lost (expired after a jump of the clock, gone, taken). Every guard
    /// of the client that the call ends must say lost at once. (`release_all` ends with a flush,
    /// which waits for any release of the client held in the network: it is left on its way if
    /// it does not finish soon.)
    pub(super) async fn end_through_the_client(&mut self, rng: &mut StdRng, step: usize) -> String {
        let (taken, chosen, ref guard) = self.guards[rng.random_range(0..self.guards.len())];
        let Some(lock) = guard.lock() else {
            return format!("the guard of step {taken} is lost already");
        };
        let holders = self.holders();
        let way = match rng.random_range(0..5) {
            // Shared holds of several clients: a force release through one would end the others'
            // too, whose guards learn of it only from their next extension (as documented).
            2 if holders.len() > 1 => 0,
            way => way,
        };
        let owner = match way {
            2 => holders.first().copied().unwrap_or(chosen),
            _ => chosen,
        };
        let client = self.clients[owner].clone();
        // The guards of that client the call ends, chosen before it (their locks, after it, are
        // gone): the acquisition's for a release by id, the exclusive ones for a release by owner
        // (the client's guards are all of its one owner), every one of the client's otherwise.
        let mut ended: Vec<bool> = self
            .guards
            .iter()
            .map(|(_, client_of, g)| {
                *client_of == owner
                    && match way {
                        0 | 4 => g.lock().is_some_and(|l| l.lock_id() == lock.lock_id()),
                        1 => g.lock().is_some_and(|l| l.mode() == Mode::Exclusive),
                        _ => true,
                    }
            })
            .collect();
        if way == 4 {
            // At times through another client (a worker extending a lock taken elsewhere): it
            // ends none of the guards.
            let extender = if rng.random_bool(0.7) {
                owner
            } else {
                rng.random_range(0..CLIENTS)
            };
            if extender != owner {
                ended.iter_mut().for_each(|ended| *ended = false);
            }
            let extended = self.clients[extender].extend(&lock, LEASE).await;
            // Found gone or taken: the acquisition is over for good. (Not found expired: the
            // client releases it only where an extension of its own may land; one of another
            // client's, on its way, may extend it yet, as its holder's would.)
            if matches!(
                extended,
                Ok(ExtendOutcome::NotFound | ExtendOutcome::NotOwner { .. })
            ) {
                self.over.insert(lock.lock_id());
            }
            // Extended, or failed: the guards stand (an extension that failed ends nothing).
            if matches!(extended, Ok(ExtendOutcome::Extended(_)) | Err(_)) {
                ended.iter_mut().for_each(|ended| *ended = false);
            }
            for ((_, _, guard), ended) in self.guards.iter().zip(&ended) {
                if *ended {
                    self.closed.push(guard.watch());
                }
            }
            return format!(
                "client {extender} extended the lock of the guard of step {taken}: {extended:?}"
            );
        }
        // The acquisitions of the guards the call ends, told over if it answers.
        let ending: Vec<LockId> = self
            .guards
            .iter()
            .zip(&ended)
            .filter(|(_, ended)| **ended)
            .filter_map(|((taken, _, _), _)| self.acquisitions.get(taken).copied())
            .collect();
        let steps: Vec<usize> = self
            .guards
            .iter()
            .zip(&ended)
            .filter(|(_, ended)| **ended)
            .map(|((taken, _, _), _)| *taken)
            .collect();
        for taken in steps {
            self.ending(taken, step);
        }
        let how = match way {
            0 => {
                let outcome = client.release(&lock).await;
                self.told_over(lock.lock_id(), &outcome);
                self.answered_release(lock.lock_id(), owner, &outcome, None);
                format!("release: {outcome:?}")
            }
            1 => {
                // It releases whatever lock the owner holds: one whose release is on its way too.
                let why = format!("client {owner}'s release_owned at step {step}");
                self.ended_otherwise(|p| p.client == owner, &why);
                let outcome = client.release_owned(&self.resource, lock.owner()).await;
                if outcome.is_ok() {
                    self.over.extend(&ending);
                }
                format!("release_owned: {outcome:?}")
            }
            2 => {
                let why = format!("client {owner}'s force_release at step {step}");
                self.ended_otherwise(|_| true, &why);
                let outcome = client.force_release(&self.resource).await;
                if outcome.is_ok() {
                    self.over.extend(&ending);
                }
                format!("force_release: {outcome:?}")
            }
            _ => {
                let what = format!("client {owner}'s release_all, started at step {step}");
                let call = async move { releases::Ended::All(client.release_all().await) };
                let outcome = self.leave_on_its_way(what, owner, None, None, call).await;
                format!("release_all: {outcome}")
            }
        };
        // Every guard the call ended is closed: it must say lost from now on.
        for ((_, _, guard), ended) in self.guards.iter().zip(ended) {
            if ended {
                self.closed.push(guard.watch());
            }
        }
        format!("client {owner} ended the lock of the guard of step {taken} by {how}")
    }
}
