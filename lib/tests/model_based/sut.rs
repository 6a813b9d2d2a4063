//! The system under test: the real clients on a table layout, each operation run and its answer
//! checked against the model, and the stored items read back.

use super::*;

// ---------------------------------------------------------------------------------------------
// The system under test

/// The table the state machine runs on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Layout {
    /// The shared test table, default schema (`PK`/`SK`, `LOCK#`, `TTL`).
    Default,
    /// A table keyed by `id` alone: `lock:<resource>`, `fence:<resource>`, TTL on `ttl`.
    IdOnly,
    /// The shared test table, with releases that keep the item (`delete_on_release(false)`).
    Kept,
}

impl Layout {
    pub(crate) fn table(self) -> &'static str {
        match self {
            Layout::Default | Layout::Kept => ddb_lock_test_kit::TABLE,
            Layout::IdOnly => "ddb-lock-model-id-only",
        }
    }

    pub(crate) fn schema(self) -> TableSchema {
        match self {
            Layout::Default | Layout::Kept => TableSchema::new(),
            Layout::IdOnly => ddb_lock_test_kit::schemas::id_only(),
        }
    }

    pub(crate) fn keeps_items(self) -> bool {
        matches!(self, Layout::Kept)
    }

    /// A builder for this layout's table over `dynamodb`.
    pub(crate) fn builder(self, dynamodb: aws_sdk_dynamodb::Client) -> LockClientBuilder {
        builder(dynamodb)
            .table_name(self.table())
            .schema(self.schema())
            .delete_on_release(!self.keeps_items())
    }

    /// Creates the table once per test process.
    pub(crate) fn ready(self) {
        static DEFAULT: Once = Once::new();
        static ID_ONLY: Once = Once::new();
        let once = match self {
            Layout::Default | Layout::Kept => &DEFAULT,
            Layout::IdOnly => &ID_ONLY,
        };
        once.call_once(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                lock_client().await;
                let client = self.builder(dynamodb()).build().expect("valid schema");
                client.create_table().await.expect("the layout's table");
            });
        });
    }
}

pub(crate) struct Sut {
    pub(crate) layout: Layout,
    pub(crate) runtime: tokio::runtime::Runtime,
    pub(crate) resource: String,
    pub(crate) clock: Arc<SteppedClock>,
    pub(crate) client_a: LockClient,
    pub(crate) client_b: LockClient,
    pub(crate) lossy: LockClient,
    pub(crate) proxy: Proxy,
    /// Every lock returned, by acquisition number, as last returned (acquired or extended).
    pub(crate) locks: Vec<Lock>,
    /// The highest fencing token returned so far.
    pub(crate) fence: Option<FencingToken>,
    pub(crate) step: usize,
    pub(crate) last_op: String,
}

/// A returned lock as the model can predict it: which acquisition (by its `LockID`), owner,
/// times and token.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LockView {
    pub(crate) acquisition: Option<usize>,
    pub(crate) owner: String,
    pub(crate) acquired_at: DateTime<Utc>,
    pub(crate) expires_at: DateTime<Utc>,
    pub(crate) fencing_token: Option<FencingToken>,
}

/// An acquisition attempt's answer: the lock, or refused (with the holder, if the call names it).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Attempted {
    Acquired(LockView),
    Held(Option<Holder>),
}

/// An extension's answer, with the lock as a [`LockView`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ExtendView {
    Extended(LockView),
    Expired { expired_at: DateTime<Utc> },
    NotFound,
    NotOwner { holder: Holder },
}

/// Fails the test naming the step, the operation, what it answered and what the model allows.
#[track_caller]
pub(crate) fn not_allowed(step: usize, op: &Op, answered: &dyn Debug, allowed: &dyn Debug) -> ! {
    panic!(
        "step {step}: {op:?}\n  answered: {answered:?}\n  but the model allows only: {allowed:?}"
    )
}

impl Sut {
    pub(crate) fn new(layout: Layout) -> Sut {
        layout.ready();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let clock = Arc::new(SteppedClock::default());
        let with_clock = |b: LockClientBuilder| {
            b.clock(clock.clone() as Arc<dyn Clock>)
                .build()
                .expect("valid settings")
        };
        let proxy = runtime.block_on(Proxy::start(&endpoint()));
        // As `quickly_retrying_client`, with the shared clock.
        let lossy = with_clock(layout.builder(quickly_retrying_dynamodb(&proxy.endpoint())));
        Sut {
            layout,
            resource: unique("model"),
            client_a: with_clock(layout.builder(dynamodb())),
            client_b: with_clock(layout.builder(dynamodb())),
            lossy,
            proxy,
            clock,
            runtime,
            locks: Vec::new(),
            fence: None,
            step: 0,
            last_op: "nothing yet".into(),
        }
    }

    /// The request that ends a hold: a DeleteItem, or an UpdateItem when releases keep the item.
    pub(crate) fn release_operation(&self) -> &'static str {
        if self.layout.keeps_items() {
            "UpdateItem"
        } else {
            "DeleteItem"
        }
    }

    /// The client for `via`; for [`Via::LostAnswer`], the next answer of `operation` is dropped.
    /// Returns the proxy's count of dropped `operation` answers before the call, to check after it.
    pub(crate) fn client(&self, via: Via, operation: &'static str) -> (&LockClient, Option<usize>) {
        match via {
            Via::ClientA => (&self.client_a, None),
            Via::ClientB => (&self.client_b, None),
            Via::LostAnswer => {
                let before = self.proxy.counts(operation).dropped;
                self.proxy.drop_next_answer(operation);
                (&self.lossy, Some(before))
            }
        }
    }

    /// The answer really was lost and the request really sent again.
    pub(crate) fn check_dropped(&self, operation: &'static str, before: Option<usize>) {
        if let Some(before) = before {
            let counts = self.proxy.counts(operation);
            assert_eq!(
                counts.dropped,
                before + 1,
                "step {}: the proxy did not drop the {operation} answer: {counts:?}",
                self.step
            );
        }
    }

    /// An operation's answer, or the test fails naming the operation and the error.
    pub(crate) fn answer<T>(&self, op: &Op, result: Result<T, Error>) -> T {
        result.unwrap_or_else(|err| {
            panic!(
                "step {}: {op:?}\n  failed: {err:?}\n  the model allows no error here",
                self.step
            )
        })
    }

    pub(crate) fn token(&self, lock: usize) -> Option<FencingToken> {
        self.locks.get(lock).and_then(Lock::fencing_token)
    }

    pub(crate) fn holder(&self, s: &Stored) -> Holder {
        Holder {
            owner: s.owner.to_owned(),
            acquired_at: at(s.acquired_at),
            expires_at: at(s.expires_at),
            fencing_token: self.token(s.lock),
            data: s.data.map(|d| d.as_bytes().to_vec()),
        }
    }

    pub(crate) fn acquisition_of(&self, id: LockId) -> Option<usize> {
        self.locks.iter().position(|l| l.lock_id() == id)
    }

    pub(crate) fn view(&self, lock: &Lock) -> LockView {
        LockView {
            acquisition: self.acquisition_of(lock.lock_id()),
            owner: lock.owner().to_owned(),
            acquired_at: lock.acquired_at(),
            expires_at: lock.expires_at(),
            fencing_token: lock.fencing_token(),
        }
    }

    pub(crate) fn expected_view(&self, s: &Stored) -> LockView {
        LockView {
            acquisition: Some(s.lock),
            owner: s.owner.to_owned(),
            acquired_at: at(s.acquired_at),
            expires_at: at(s.expires_at),
            fencing_token: self.token(s.lock),
        }
    }

    pub(crate) fn extend_view(&self, answer: &ExtendOutcome) -> ExtendView {
        match answer {
            ExtendOutcome::Extended(lock) => ExtendView::Extended(self.view(lock)),
            ExtendOutcome::Expired { expired_at } => ExtendView::Expired {
                expired_at: *expired_at,
            },
            ExtendOutcome::NotFound => ExtendView::NotFound,
            ExtendOutcome::NotOwner { holder } => ExtendView::NotOwner {
                holder: holder.clone(),
            },
        }
    }

    pub(crate) fn expected_extension(&self, expected: &Extension) -> ExtendView {
        match expected {
            Extension::Extended(s) => ExtendView::Extended(self.expected_view(s)),
            Extension::Expired { expired_at } => ExtendView::Expired {
                expired_at: at(*expired_at),
            },
            Extension::NotFound => ExtendView::NotFound,
            Extension::NotOwner(s) => ExtendView::NotOwner {
                holder: self.holder(s),
            },
        }
    }

    pub(crate) fn run(&mut self, model: &Model, op: &Op) {
        let step = self.step;
        let resource = self.resource.clone();
        // The clients' background work first (a clean-up's looks after a refusal that followed a
        // resend, say): the operations are the model's sequence, and a look of the last step's,
        // sent during this one, took the answer this step's lost answer was to drop.
        for client in [&self.client_a, &self.client_b, &self.lossy] {
            self.runtime.block_on(client.flush());
        }
        match op {
            Op::TryAcquire(a) | Op::AcquireNoWait(a) => {
                let operation = match (a.fencing, self.layout.keeps_items()) {
                    (true, _) => "TransactWriteItems",
                    (false, false) => "PutItem",
                    (false, true) => "UpdateItem",
                };
                let mut opts = AcquireOptions::new()
                    .owner(a.owner)
                    .lease(Duration::from_millis(a.lease_ms.unsigned_abs()))
                    .idempotent(a.idempotent)
                    .fencing(a.fencing);
                if let Some(data) = a.data {
                    opts = opts.data(data.as_bytes().to_vec());
                }
                let (client, dropped) = self.client(a.via, operation);
                // Ok(lock), or Err(the holder if the call names it).
                let answer: Result<Lock, Option<Holder>> = if let Op::TryAcquire(_) = op {
                    let result = self.runtime.block_on(client.try_acquire(&resource, &opts));
                    self.answer(op, result).ok_or(None)
                } else {
                    let opts = opts.timeout(Duration::ZERO);
                    match self.runtime.block_on(client.acquire(&resource, &opts)) {
                        Err(Error::Timeout { holder, .. }) => Err(Some(*holder)),
                        result => Ok(self.answer(op, result)),
                    }
                };
                self.check_dropped(operation, dropped);
                self.check_acquisition(model, op, answer);
            }
            Op::Release { via, back } => {
                let (client, dropped) = self.client(*via, self.release_operation());
                let lock = &self.locks[model.lock_back(*back)];
                let result = self.runtime.block_on(client.release(lock));
                let answer = self.answer(op, result);
                self.check_dropped(self.release_operation(), dropped);
                self.check_release(model, op, answer);
            }
            Op::ReleaseOwned { via, owner } => {
                let (client, dropped) = self.client(*via, self.release_operation());
                let result = self
                    .runtime
                    .block_on(client.release_owned(&resource, owner));
                let answer = self.answer(op, result);
                self.check_dropped(self.release_operation(), dropped);
                self.check_release(model, op, answer);
            }
            Op::Extend {
                via,
                back,
                lease_ms,
                payload,
            } => {
                let lock = model.lock_back(*back);
                let (client, dropped) = self.client(*via, "UpdateItem");
                let handle = &self.locks[lock];
                let lease = Duration::from_millis(lease_ms.unsigned_abs());
                let data = |d: &str| Some(d.as_bytes().to_vec());
                let result = self.runtime.block_on(async {
                    match payload {
                        Payload::Keep => client.extend(handle, lease).await,
                        Payload::Replace(d) => {
                            client.extend_and_replace_data(handle, lease, data(d)).await
                        }
                        Payload::Remove => {
                            client.extend_and_replace_data(handle, lease, None).await
                        }
                    }
                });
                let answer = self.answer(op, result);
                self.check_dropped("UpdateItem", dropped);
                let Expect::Extend(expected) = &model.expect else {
                    unreachable!("an extension is expected to answer as one")
                };
                let (got, want) = (self.extend_view(&answer), self.expected_extension(expected));
                if got != want {
                    not_allowed(step, op, &got, &want);
                }
                if let ExtendOutcome::Extended(got) = answer {
                    self.locks[lock] = got;
                }
            }
            Op::ForceRelease { via } => {
                // A force release reads the item, then removes the item it read: with no item
                // there is nothing to remove, and the answer lost is the read's.
                let operation = if self.stored_items().0.contains_key(LOCK_ID) {
                    self.release_operation()
                } else {
                    "GetItem"
                };
                let (client, dropped) = self.client(*via, operation);
                let result = self.runtime.block_on(client.force_release(&resource));
                let answer = self.answer(op, result);
                self.check_dropped(operation, dropped);
                let Expect::ForceRelease(allowed) = &model.expect else {
                    unreachable!("a force release is expected to answer as one")
                };
                let allowed: Vec<Option<Holder>> = allowed
                    .iter()
                    .map(|s| s.as_ref().map(|s| self.holder(s)))
                    .collect();
                if !allowed.contains(&answer) {
                    not_allowed(step, op, &answer, &allowed);
                }
            }
            Op::Status { via } => {
                let (client, dropped) = self.client(*via, "GetItem");
                let result = self.runtime.block_on(client.status(&resource));
                let answer = self.answer(op, result);
                self.check_dropped("GetItem", dropped);
                let Expect::Status(expected) = &model.expect else {
                    unreachable!("a status is expected to answer as one")
                };
                let expected = match expected {
                    None => LockStatus::Free,
                    Some(s) => LockStatus::Held {
                        holder: self.holder(s),
                        remaining: Duration::from_millis((s.expires_at - model.now).unsigned_abs()),
                        queue: Vec::new(),
                    },
                };
                if answer != expected {
                    not_allowed(step, op, &answer, &expected);
                }
            }
            Op::Advance { .. } => self.clock.set(model.now),
            Op::TtlDelete => {
                if let Expect::TtlDelete { delete: true } = model.expect {
                    self.runtime.block_on(async {
                        dynamodb()
                            .delete_item()
                            .table_name(self.layout.table())
                            .set_key(Some(self.layout.schema().lock_key(&self.resource)))
                            .send()
                            .await
                            .expect("DeleteItem of the lock item")
                    });
                }
            }
        }
    }

    pub(crate) fn check_acquisition(
        &mut self,
        model: &Model,
        op: &Op,
        answer: Result<Lock, Option<Holder>>,
    ) {
        let step = self.step;
        if let (Expect::Acquired { lock: s, new: true }, Ok(lock)) = (&model.expect, &answer) {
            // A new acquisition: fenced iff asked, with a token above every earlier one.
            let token = lock.fencing_token();
            let token_ok = match (s.fenced, token) {
                (true, Some(t)) => self.fence.is_none_or(|high| t > high),
                (false, None) => true,
                _ => false,
            };
            if !token_ok {
                let rule = format!(
                    "a new lock with fencing_token {} above every earlier one ({:?})",
                    if s.fenced { "Some" } else { "None, not" },
                    self.fence
                );
                not_allowed(step, op, &self.view(lock), &rule);
            }
            if self.acquisition_of(lock.lock_id()).is_none() {
                self.locks.push(lock.clone());
                if token.is_some() {
                    self.fence = token;
                }
            }
        }
        let got = match &answer {
            Ok(lock) => Attempted::Acquired(self.view(lock)),
            Err(holder) => Attempted::Held(holder.clone()),
        };
        let want = match &model.expect {
            Expect::Acquired { lock, .. } => Attempted::Acquired(self.expected_view(lock)),
            Expect::Refused { holder } => Attempted::Held(Some(self.holder(holder))),
            other => unreachable!("an acquisition is expected to answer as one, not {other:?}"),
        };
        // `try_acquire` does not name the holder that refused it.
        let unnamed = matches!((&got, &want), (Attempted::Held(None), Attempted::Held(_)));
        if got != want && !unnamed {
            not_allowed(step, op, &got, &want);
        }
    }

    pub(crate) fn check_release(&self, model: &Model, op: &Op, answer: ReleaseOutcome) {
        let Expect::Release(allowed) = &model.expect else {
            unreachable!("a release is expected to answer as one")
        };
        let allowed: Vec<ReleaseOutcome> = allowed
            .iter()
            .map(|r| match r {
                ReleaseAnswer::Released => ReleaseOutcome::Released,
                ReleaseAnswer::NotFound => ReleaseOutcome::NotFound,
                ReleaseAnswer::Unconfirmed => ReleaseOutcome::Unconfirmed,
                ReleaseAnswer::NotOwner(s) => ReleaseOutcome::NotOwner {
                    holder: self.holder(s),
                },
                ReleaseAnswer::AlreadyReleased { released_at } => ReleaseOutcome::AlreadyReleased {
                    released_at: at(*released_at),
                },
            })
            .collect();
        if !allowed.contains(&answer) {
            not_allowed(self.step, op, &answer, &allowed);
        }
    }

    /// The stored lock and fence items, attribute by attribute as the model can predict them.
    pub(crate) fn stored_items(&self) -> (BTreeMap<&'static str, String>, Option<String>) {
        let schema = self.layout.schema();
        let read = |key: HashMap<String, AttributeValue>| {
            self.runtime.block_on(async {
                dynamodb()
                    .get_item()
                    .table_name(self.layout.table())
                    .set_key(Some(key))
                    .consistent_read(true)
                    .send()
                    .await
                    .expect("GetItem of the resource's item")
                    .item
            })
        };
        let show = |item: &HashMap<String, AttributeValue>, name: &str| {
            item.get(name).map(|value| match value {
                AttributeValue::S(v) | AttributeValue::N(v) => v.clone(),
                AttributeValue::B(b) => String::from_utf8_lossy(b.as_ref()).into_owned(),
                other => format!("{other:?}"),
            })
        };
        let mut lock = BTreeMap::new();
        if let Some(item) = read(schema.lock_key(&self.resource)) {
            let ttl = schema.ttl_attribute_name().expect("a TTL attribute");
            for (name, stored_as) in [
                (ACQUIRED_AT, ACQUIRED_AT),
                (DATA, DATA),
                (EXPIRES_AT, EXPIRES_AT),
                (FENCING_TOKEN, FENCING_TOKEN),
                (LOCK_ID, LOCK_ID),
                (OWNER, OWNER),
                (TTL, ttl),
            ] {
                if let Some(value) = show(&item, stored_as) {
                    lock.insert(name, value);
                }
            }
        }
        let fence =
            read(schema.fence_key(&self.resource)).and_then(|item| show(&item, FENCING_TOKEN));
        (lock, fence)
    }

    /// The same, as the model says they must be.
    pub(crate) fn model_items(
        &self,
        model: &Model,
    ) -> (BTreeMap<&'static str, String>, Option<String>) {
        let mut lock = BTreeMap::new();
        if let Some(s) = &model.item {
            let expires_at = at(s.expires_at);
            lock.insert(ACQUIRED_AT, stored(at(s.acquired_at)));
            lock.insert(EXPIRES_AT, stored(expires_at));
            // Whole epoch seconds, rounded up: never before the lease has ended.
            let deletable = expires_at + TTL_GRACE;
            let ttl = deletable.timestamp() + i64::from(deletable.timestamp_subsec_millis() > 0);
            lock.insert(TTL, ttl.to_string());
            lock.insert(OWNER, s.owner.to_owned());
            let lock_id = self.locks.get(s.lock).map(|l| l.lock_id().to_string());
            lock.insert(
                LOCK_ID,
                lock_id.unwrap_or_else(|| "(never returned)".into()),
            );
            if let Some(token) = self.token(s.lock) {
                lock.insert(FENCING_TOKEN, token.value().to_string());
            }
            if let Some(data) = s.data {
                lock.insert(DATA, data.to_owned());
            }
        }
        if let Some(kept) = &model.kept {
            let lock_id = self.locks.get(kept.lock).map(|l| l.lock_id().to_string());
            lock.insert(
                LOCK_ID,
                lock_id.unwrap_or_else(|| "(never returned)".into()),
            );
            if let Some(data) = kept.data {
                lock.insert(DATA, data.to_owned());
            }
        }
        (lock, self.fence.map(|t| t.value().to_string()))
    }
}
