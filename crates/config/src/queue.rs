//! The task queue between a config store and its event handlers.
//!
//! ```text
//!  store change (key, before, after) ──► one entry per (handler, key) ──► FIFO ──► worker ──► handler
//!                                          before: state the handler saw      │        │ Err / panic
//!                                          latest: newest state               │        ▼
//!                                                                             └── retry after backoff
//! ```
//!
//! Istio's `pkg/queue` runs closures in FIFO order on one goroutine and re-queues a failed task after a
//! fixed 1 s, forever, with no deduplication. This queue keeps the single worker and the FIFO, and adds
//! two things:
//!
//! - **Coalescing.** Changes are kept per (handler, [`ConfigKey`]) as a pair *(state before the first
//!   pending change, latest state)*. When the entry is processed the event is derived from the pair:
//!   `(None, Some)` → Add, `(Some, Some)` → Update (nothing if spec, labels and annotations are equal,
//!   see [`model::store::needs_push`]), `(Some, None)` → Delete, `(None, None)` → nothing (an Add
//!   followed by a Delete while pending cancels out). A flapping object therefore holds at most one
//!   entry per handler: the queue never grows beyond *handlers × keys*.
//! - **Bounded backoff.** A handler that returns `Err` (or panics) gets the entry again after
//!   `initial_backoff · 2^(failures−1)`, capped at `max_backoff`, merged with whatever changed
//!   meanwhile. Every retry is logged (`tracing` warn) and counted (metric
//!   `meshpilot_config_handler_retries{kind}`). Retries never stop: a handler that cannot take an
//!   object keeps being asked, at most once per `max_backoff`.
//!
//! # Ordering guarantees
//!
//! 1. One worker calls every handler of a queue; handlers are never called concurrently with each
//!    other.
//! 2. Per handler and object, events form a chain: the first is an Add, the last (if any) a Delete;
//!    the `old` of an Update and the object of a Delete are the state that handler last received (up
//!    to changes that did not need a push, such as status-only updates, which raise no event).
//!    Intermediate states may be skipped (coalesced), never reordered.
//! 3. Across objects, entries run in the order of their *first* pending change. A later change of
//!    an object already queued keeps the queued position (it does not move to the back).
//! 4. A failed entry moves out of line into a delay; other entries go on meanwhile (no head-of-line
//!    blocking), so after a failure, order across objects is not kept.
//! 5. Different handlers are independent: each gets its own entry, so one handler's failure never
//!    makes another handler see an event twice.
//!
//! # Sync and shutdown
//!
//! [`Queue::has_synced`] turns true (and stays true) once the worker runs and every entry queued
//! before [`Queue::run`] was started has been delivered once; a delivery that failed and waits for
//! a retry counts as delivered (as in Istio, so one bad object cannot hold readiness forever).
//! [`Queue::run`] returns when the shutdown signal fires: a handler call in progress finishes, pending
//! entries are dropped. [`SyncBarrier`] is the sync check of a store that first waits for something
//! else (its initial state, its sources) and then for the queue to deliver what came before.

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap, VecDeque},
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{
        Arc, Mutex, MutexGuard, OnceLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use api::Kind;
use model::{Config, ConfigKey, Event, EventHandler, Shutdown, store::needs_push};
use tokio::{sync::Notify, time::Instant};

/// Retry settings of a [`Queue`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// Delay before the first retry of a failed delivery (Istio's queue: a fixed 1 s).
    pub initial_backoff: Duration,
    /// Upper bound of the delay; it doubles on each failure of the same entry until it gets here.
    pub max_backoff: Duration,
}

impl Default for QueueOptions {
    /// 1 s doubling up to 30 s.
    fn default() -> Self {
        QueueOptions { initial_backoff: Duration::from_secs(1), max_backoff: Duration::from_secs(30) }
    }
}

impl QueueOptions {
    /// The delay before retry number `failures` (1 for the first retry).
    pub fn backoff(&self, failures: u32) -> Duration {
        let factor = 1u32 << failures.saturating_sub(1).min(20);
        self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// Identifies a registered handler within its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HandlerId(u64);

type EntryId = (HandlerId, ConfigKey);

/// Entries the queue keeps room for once drained (a full load can reserve hundreds of thousands).
const IDLE_CAPACITY: usize = 64;

/// A coalescing, retrying event queue with one worker. Cheap to clone (a handle).
#[derive(Clone)]
pub struct Queue {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("name", &self.inner.name).field("len", &self.len()).finish()
    }
}

struct Inner {
    name: String,
    options: QueueOptions,
    state: Mutex<State>,
    wake: Notify,
}

#[derive(Default)]
struct State {
    handlers: HashMap<Kind, Vec<(HandlerId, EventHandler)>>,
    next_handler: u64,
    entries: HashMap<EntryId, Entry>,
    /// Entries ready to run, in order; an item is stale unless its ticket matches the entry's.
    ready: VecDeque<(EntryId, u64)>,
    /// Entries waiting for a retry, by due time.
    delayed: BinaryHeap<Reverse<(Instant, u64, EntryId)>>,
    /// The entry being delivered (taken out of `entries`): (id, first_seq, attempted).
    in_flight: Option<(EntryId, u64, bool)>,
    next_seq: u64,
    running: bool,
    /// Everything queued before this sequence number must be attempted before the queue is synced.
    run_mark: Option<u64>,
    synced: bool,
    retries: u64,
    delivered: u64,
}

struct Entry {
    before: Option<Arc<Config>>,
    latest: Option<Arc<Config>>,
    /// Sequence number of the first pending change (decides order and sync).
    first_seq: u64,
    /// Matches the `ready` / `delayed` item that currently stands for this entry.
    ticket: u64,
    failures: u32,
    attempted: bool,
    waiting_retry: bool,
}

/// One delivery taken out of the queue by the worker.
struct Task {
    id: EntryId,
    entry: Entry,
    handler: Option<EventHandler>,
}

enum Next {
    Task(Task),
    Wait(Option<Instant>),
}

/// `true` when going from `before` to `after` is no event at all.
fn is_noop(before: Option<&Arc<Config>>, after: Option<&Arc<Config>>) -> bool {
    match (before, after) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || !needs_push(a, b),
        _ => false,
    }
}

impl Queue {
    /// A new, empty queue; `name` appears in its log lines.
    pub fn new(name: impl Into<String>, options: QueueOptions) -> Queue {
        Queue {
            inner: Arc::new(Inner {
                name: name.into(),
                options,
                state: Mutex::new(State::default()),
                wake: Notify::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-updated in a way that matters
        // more than stopping every later event; keep going.
        self.inner.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers `handler` for `kind` and queues an Add for each of `existing` (the objects present
    /// now) for this handler only. Call it while holding the store's write lock, so that no change
    /// slips between the snapshot and the registration.
    pub fn register(
        &self,
        kind: Kind,
        handler: EventHandler,
        existing: impl IntoIterator<Item = Arc<Config>>,
    ) -> HandlerId {
        let mut state = self.lock();
        let id = HandlerId(state.next_handler);
        state.next_handler += 1;
        state.handlers.entry(kind).or_default().push((id, handler));
        for config in existing {
            state.push(id, config.key(), None, Some(config));
        }
        drop(state);
        self.inner.wake.notify_one();
        id
    }

    /// Queues the change of `key` from `before` to `after` for every handler of its kind. Call it in
    /// the order the store applied the changes (under the store's write lock).
    pub fn enqueue(&self, key: &ConfigKey, before: Option<Arc<Config>>, after: Option<Arc<Config>>) {
        let mut state = self.lock();
        let Some(handlers) = state.handlers.get(&key.kind) else {
            return;
        };
        let ids: Vec<HandlerId> = handlers.iter().map(|(id, _)| *id).collect();
        for id in ids {
            state.push(id, key.clone(), before.clone(), after.clone());
        }
        drop(state);
        self.inner.wake.notify_one();
    }

    /// Entries waiting (ready or for a retry) plus the one being delivered. Bounded by handlers × keys.
    pub fn len(&self) -> usize {
        let state = self.lock();
        state.entries.len() + usize::from(state.in_flight.is_some())
    }

    /// `true` when nothing is waiting or being delivered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of failed deliveries so far (each one scheduled a retry).
    pub fn retries(&self) -> u64 {
        self.lock().retries
    }

    /// Number of events handed to handlers (successfully or not).
    pub fn delivered(&self) -> u64 {
        self.lock().delivered
    }

    /// The sequence number the next queued change will get. With [`Queue::passed`], lets a caller
    /// wait for everything queued up to now.
    pub fn mark(&self) -> u64 {
        self.lock().next_seq
    }

    /// `true` when the worker runs and every entry whose first change was queued before `mark` has
    /// been delivered once.
    pub fn passed(&self, mark: u64) -> bool {
        self.lock().passed(mark)
    }

    /// See the module documentation.
    pub fn has_synced(&self) -> bool {
        let mut state = self.lock();
        if state.synced {
            return true;
        }
        let Some(mark) = state.run_mark else {
            return false;
        };
        if state.passed(mark) {
            state.synced = true;
        }
        state.synced
    }

    /// Runs the worker until `shutdown` fires. Only one worker runs per queue: a second call returns
    /// at once.
    pub async fn run(&self, mut shutdown: Shutdown) {
        {
            let mut state = self.lock();
            if state.running {
                tracing::warn!(queue = %self.inner.name, "queue worker already running");
                return;
            }
            state.running = true;
            if state.run_mark.is_none() {
                state.run_mark = Some(state.next_seq);
            }
        }
        loop {
            if shutdown.is_shutdown() {
                break;
            }
            let next = self.lock().next(Instant::now());
            match next {
                Next::Task(task) => {
                    self.deliver(task);
                    // Let other tasks (the store's writers, the runtime) in between deliveries.
                    tokio::task::yield_now().await;
                }
                Next::Wait(due) => {
                    let sleep = async {
                        match due {
                            Some(due) => tokio::time::sleep_until(due).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        () = shutdown.wait() => break,
                        () = self.inner.wake.notified() => {}
                        () = sleep => {}
                    }
                }
            }
        }
        self.lock().running = false;
    }

    /// Calls the handler for one entry and records the outcome.
    fn deliver(&self, task: Task) {
        let Task { id, entry, handler } = task;
        let outcome = match (handler, derive_event(&entry)) {
            (Some(handler), Some((old, new, event))) => {
                let result = catch_unwind(AssertUnwindSafe(|| handler(old, new, event)))
                    .unwrap_or_else(|panic| Err(panic_message(&panic).into()));
                Some((event, result))
            }
            _ => None,
        };
        let mut state = self.lock();
        state.in_flight = None;
        let Some((event, result)) = outcome else {
            return;
        };
        state.delivered += 1;
        let Err(err) = result else {
            return;
        };
        // Failed: merge with any change queued meanwhile and retry later.
        state.retries += 1;
        let failures = entry.failures + 1;
        let delay = self.inner.options.backoff(failures);
        let key = &id.1;
        tracing::warn!(
            queue = %self.inner.name,
            %key,
            %event,
            attempt = failures,
            retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            error = %err,
            "config event handler failed; will retry",
        );
        metrics::counter!("meshpilot_config_handler_retries", "kind" => key.kind.as_str()).increment(1);
        let latest = match state.entries.remove(&id) {
            Some(fresh) => fresh.latest,
            None => entry.latest,
        };
        if is_noop(entry.before.as_ref(), latest.as_ref()) {
            // E.g. a failed Add whose object was deleted meanwhile: nothing left to tell.
            return;
        }
        let ticket = state.next_seq;
        state.next_seq += 1;
        let due = Instant::now() + delay;
        state.delayed.push(Reverse((due, ticket, id.clone())));
        state.entries.insert(
            id,
            Entry {
                before: entry.before,
                latest,
                first_seq: entry.first_seq,
                ticket,
                failures,
                attempted: true,
                waiting_retry: true,
            },
        );
        drop(state);
        self.inner.wake.notify_one();
    }
}

/// A latched "synced" check over a [`Queue`]: once a condition holds (a source's initial state is
/// loaded, every source of an aggregate has synced), a mark is taken ([`Queue::mark`]); the check
/// passes once everything queued before the mark has been delivered once ([`Queue::passed`]), and
/// stays passed.
#[derive(Debug, Default)]
pub struct SyncBarrier {
    mark: OnceLock<u64>,
    passed: AtomicBool,
}

impl SyncBarrier {
    /// Takes the mark now unless it is taken already; returns it.
    pub(crate) fn set(&self, queue: &Queue) -> u64 {
        *self.mark.get_or_init(|| queue.mark())
    }

    /// `true` once `ready` held (the mark is taken the first time it does, unless the owning store
    /// took it before) and `queue` has delivered everything queued before the mark. Once true,
    /// neither `ready` nor the queue is asked again.
    pub fn passed(&self, queue: &Queue, ready: impl FnOnce() -> bool) -> bool {
        if self.passed.load(Ordering::Acquire) {
            return true;
        }
        if !ready() {
            return false;
        }
        let passed = queue.passed(self.set(queue));
        if passed {
            self.passed.store(true, Ordering::Release);
        }
        passed
    }
}

/// What a handler is called with: `(old, new, event)`.
type Delivery<'a> = (Option<&'a Arc<Config>>, &'a Arc<Config>, Event);

fn derive_event(entry: &Entry) -> Option<Delivery<'_>> {
    match (entry.before.as_ref(), entry.latest.as_ref()) {
        (None, Some(new)) => Some((None, new, Event::Add)),
        (Some(old), Some(new)) => (!is_noop(entry.before.as_ref(), entry.latest.as_ref())).then_some((
            Some(old),
            new,
            Event::Update,
        )),
        (Some(old), None) => Some((None, old, Event::Delete)),
        (None, None) => None,
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string());
    format!("handler panicked: {text}")
}

impl State {
    fn push(
        &mut self,
        id: HandlerId,
        key: ConfigKey,
        before: Option<Arc<Config>>,
        after: Option<Arc<Config>>,
    ) {
        let entry_id = (id, key);
        if let Some(entry) = self.entries.get_mut(&entry_id) {
            // Coalesce: keep the state before the first pending change, take the newest state.
            entry.latest = after;
            return;
        }
        let in_flight = self.in_flight.as_ref().is_some_and(|(f, _, _)| *f == entry_id);
        if !in_flight && is_noop(before.as_ref(), after.as_ref()) {
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.ready.push_back((entry_id.clone(), seq));
        self.entries.insert(
            entry_id,
            Entry {
                before,
                latest: after,
                first_seq: seq,
                ticket: seq,
                failures: 0,
                attempted: false,
                waiting_retry: false,
            },
        );
    }

    fn next(&mut self, now: Instant) -> Next {
        // Retries that are due go to the back of the line.
        while let Some(Reverse((due, ticket, _))) = self.delayed.peek() {
            if *due > now {
                break;
            }
            let ticket = *ticket;
            let Some(Reverse((_, _, id))) = self.delayed.pop() else { break };
            if let Some(entry) = self.entries.get_mut(&id)
                && entry.ticket == ticket
                && entry.waiting_retry
            {
                entry.waiting_retry = false;
                self.ready.push_back((id, ticket));
            }
        }
        while let Some((id, ticket)) = self.ready.pop_front() {
            let current = self.entries.get(&id).is_some_and(|e| e.ticket == ticket && !e.waiting_retry);
            if !current {
                continue;
            }
            let Some(entry) = self.entries.remove(&id) else { continue };
            self.in_flight = Some((id.clone(), entry.first_seq, entry.attempted));
            let handler = self
                .handlers
                .get(&id.1.kind)
                .and_then(|hs| hs.iter().find(|(h, _)| *h == id.0))
                .map(|(_, f)| f.clone());
            return Next::Task(Task { id, entry, handler });
        }
        // Drained: give back what a burst (a full load queues an entry per object and handler)
        // made the queue reserve, instead of holding its peak for the life of the process.
        self.ready.shrink_to(IDLE_CAPACITY);
        self.entries.shrink_to(IDLE_CAPACITY);
        Next::Wait(self.delayed.peek().map(|Reverse((due, _, _))| *due))
    }

    fn passed(&self, mark: u64) -> bool {
        if !self.running && self.run_mark.is_none() {
            return false;
        }
        let blocks = |first_seq: u64, attempted: bool| !attempted && first_seq < mark;
        if let Some((_, first_seq, attempted)) = &self.in_flight
            && blocks(*first_seq, *attempted)
        {
            return false;
        }
        !self.entries.values().any(|e| blocks(e.first_seq, e.attempted))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use api::{Spec, networking};
    use model::{ConfigMeta, shutdown_channel};

    use super::*;

    fn gateway(name: &str, selector: &str) -> Arc<Config> {
        let mut spec = networking::Gateway::default();
        spec.selector.insert("app".into(), selector.into());
        Arc::new(Config {
            meta: ConfigMeta { name: name.into(), namespace: "default".into(), ..ConfigMeta::default() },
            spec: Spec::Gateway(Box::new(spec)),
            status: None,
        })
    }

    type Log = Arc<Mutex<Vec<(Event, String, String)>>>;

    fn recorder(log: &Log) -> EventHandler {
        let log = log.clone();
        Arc::new(move |_old: Option<&Arc<Config>>, new: &Arc<Config>, event| {
            let Spec::Gateway(g) = &new.spec else { unreachable!() };
            log.lock().unwrap().push((event, new.meta.name.clone(), g.selector["app"].clone()));
            Ok(())
        })
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let o =
            QueueOptions { initial_backoff: Duration::from_millis(100), max_backoff: Duration::from_secs(1) };
        let got: Vec<u128> = (1..=6).map(|n| o.backoff(n).as_millis()).collect();
        assert_eq!(got, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(o.backoff(u32::MAX), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn failed_handler_is_retried_with_backoff_and_merged_with_later_changes() {
        let options = QueueOptions {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
        };
        let queue = Queue::new("test", options);
        let calls: Arc<Mutex<Vec<(Instant, Event, String)>>> = Arc::default();
        let fail_first = Arc::new(AtomicU32::new(4));
        {
            let calls = calls.clone();
            let fail_first = fail_first.clone();
            queue.register(
                Kind::Gateway,
                Arc::new(move |_, new: &Arc<Config>, event| {
                    let Spec::Gateway(g) = &new.spec else { unreachable!() };
                    calls.lock().unwrap().push((Instant::now(), event, g.selector["app"].clone()));
                    if fail_first.load(Ordering::SeqCst) > 0 {
                        fail_first.fetch_sub(1, Ordering::SeqCst);
                        return Err("not ready".into());
                    }
                    Ok(())
                }),
                [],
            );
        }
        let a = gateway("gw", "a");
        queue.enqueue(&a.key(), None, Some(a.clone()));
        let (trigger, shutdown) = shutdown_channel();
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.run(shutdown).await }
        });
        let start = Instant::now();
        // First failure happens at once; change the object while the retry waits.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let b = gateway("gw", "b");
        queue.enqueue(&b.key(), Some(a.clone()), Some(b.clone()));
        assert_eq!(queue.len(), 1, "the change merges into the waiting entry");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let calls = calls.lock().unwrap().clone();
        let offsets: Vec<u128> = calls.iter().map(|(t, _, _)| (*t - start).as_millis()).collect();
        // Attempts at 0, then +100, +200, +400, +400 (capped).
        assert_eq!(offsets, [0, 100, 300, 700, 1100], "{calls:?}");
        // Every attempt is still an Add (the handler never took the object), now with the newest state.
        assert!(calls.iter().all(|(_, e, _)| *e == Event::Add));
        assert_eq!(calls[0].2, "a");
        assert!(calls[1..].iter().all(|(_, _, s)| s == "b"));
        assert_eq!(queue.retries(), 4);
        assert!(queue.is_empty());
        trigger.trigger();
        worker.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_flapping_key_is_coalesced() {
        let queue = Queue::new("test", QueueOptions::default());
        let log: Log = Arc::default();
        queue.register(Kind::Gateway, recorder(&log), []);
        let mut prev: Option<Arc<Config>> = None;
        for i in 0..10_000 {
            let next = (i % 3 != 2).then(|| gateway("flap", &format!("v{i}")));
            let key = gateway("flap", "").key();
            queue.enqueue(&key, prev.clone(), next.clone());
            prev = next;
            assert!(queue.len() <= 1, "queue grew to {}", queue.len());
        }
        let other = gateway("other", "x");
        queue.enqueue(&other.key(), None, Some(other.clone()));
        assert_eq!(queue.len(), 2);
        let (trigger, shutdown) = shutdown_channel();
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.run(shutdown).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        // The last change (i = 9999, 9999 % 3 == 0) left the object present with selector v9999.
        assert_eq!(
            *log.lock().unwrap(),
            [(Event::Add, "flap".into(), "v9999".into()), (Event::Add, "other".into(), "x".into())]
        );
        trigger.trigger();
        worker.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn add_then_delete_cancels_and_noop_updates_raise_nothing() {
        let queue = Queue::new("test", QueueOptions::default());
        let log: Log = Arc::default();
        queue.register(Kind::Gateway, recorder(&log), []);
        let a = gateway("a", "1");
        queue.enqueue(&a.key(), None, Some(a.clone()));
        queue.enqueue(&a.key(), Some(a.clone()), None);
        let b = gateway("b", "1");
        let mut b_status = (*b).clone();
        b_status.status = Some(serde_json::json!({"observedGeneration": 3}));
        b_status.meta.resource_version = "7".into();
        queue.enqueue(&b.key(), Some(b.clone()), Some(Arc::new(b_status)));
        assert_eq!(queue.len(), 1, "the status-only change of b was dropped");
        let (trigger, shutdown) = shutdown_channel();
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.run(shutdown).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(log.lock().unwrap().is_empty());
        assert!(queue.is_empty() && queue.has_synced());
        trigger.trigger();
        worker.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn synced_after_everything_queued_before_run_was_delivered_once() {
        let queue = Queue::new("test", QueueOptions::default());
        let log: Log = Arc::default();
        queue.register(Kind::Gateway, recorder(&log), []);
        queue.register(Kind::Gateway, Arc::new(|_, _, _| Err("always".into())), []);
        for i in 0..5 {
            let c = gateway(&format!("g{i}"), "x");
            queue.enqueue(&c.key(), None, Some(c));
        }
        assert!(!queue.has_synced(), "not running yet");
        let (trigger, shutdown) = shutdown_channel();
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.run(shutdown).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(log.lock().unwrap().len(), 5);
        // The failing handler's entries wait for retries, but they were attempted once.
        assert!(queue.has_synced());
        assert_eq!(queue.len(), 5);
        trigger.trigger();
        worker.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_handler_is_retried_not_fatal() {
        let queue = Queue::new("test", QueueOptions::default());
        let n = Arc::new(AtomicU32::new(0));
        {
            let n = n.clone();
            queue.register(
                Kind::Gateway,
                Arc::new(move |_, _, _| {
                    assert!(n.fetch_add(1, Ordering::SeqCst) > 0, "first call panics");
                    Ok(())
                }),
                [gateway("p", "x")],
            );
        }
        let (trigger, shutdown) = shutdown_channel();
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.run(shutdown).await }
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(n.load(Ordering::SeqCst), 2);
        assert_eq!(queue.retries(), 1);
        trigger.trigger();
        worker.await.unwrap();
    }
}
