//! A guard's lock ended through its client rather than the guard.

use super::*;

impl World {
    /// Ends a guard's lock through its client rather than the guard: `release` of its lock,
    /// `release_owned` of its owner, `force_release` of the resource (through the holder's client,
    /// as another client's guards could only learn of it from their next extension), or
    /// `release_all`; or extends it through its client (`LockClient::extend`), which ends it if
    /// the extension finds it lost (expired after a jump of the clock, gone, taken). Every guard
    /// of the client that the call ends must say lost at once.
    pub(super) async fn end_through_the_client(&mut self, rng: &mut StdRng) -> String {
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
        let client = &self.clients[owner];
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
            let extended = client.extend(&lock, LEASE).await;
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
                "client {owner} extended the lock of the guard of step {taken}: {extended:?}"
            );
        }
        let how = match way {
            0 => format!("release: {:?}", client.release(&lock).await),
            1 => format!(
                "release_owned: {:?}",
                client.release_owned(&self.resource, lock.owner()).await
            ),
            2 => format!(
                "force_release: {:?}",
                client.force_release(&self.resource).await
            ),
            _ => format!("release_all: {} locks", client.release_all().await.len()),
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
