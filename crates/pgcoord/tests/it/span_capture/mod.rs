//! A `tracing` layer that keeps every closed span's name and fields, for
//! tests of the spans' names and fields.
#![allow(dead_code)] // each suite uses its part

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// One closed span: its name and its fields as text.
#[derive(Debug, Clone)]
pub struct Captured {
    pub name: String,
    pub fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<Captured>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

impl<S> Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let span = ctx.span(id).expect("span exists");
        span.extensions_mut().insert(Captured {
            name: attrs.metadata().name().into(),
            fields,
        });
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("span exists");
        let mut ext = span.extensions_mut();
        let captured = ext.get_mut::<Captured>().expect("captured at creation");
        values.record(&mut Fields(&mut captured.fields));
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).expect("span exists");
        let captured = span.extensions().get::<Captured>().cloned();
        self.0.lock().unwrap().extend(captured);
    }
}

impl Capture {
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        undecided_everywhere();
        let subscriber = tracing_subscriber::registry().with(self.clone());
        let guard = tracing::subscriber::set_default(subscriber);
        // Interest computed before this subscriber existed is recomputed
        // with it (see `undecided_everywhere` for why none is "never").
        tracing::callsite::rebuild_interest_cache();
        guard
    }

    pub fn spans(&self, name: &str) -> Vec<Captured> {
        let spans = self.0.lock().unwrap();
        spans.iter().filter(|s| s.name == name).cloned().collect()
    }
}

/// Tests of this binary run on many threads, most with no subscriber. A
/// callsite first reached by one of them caches the interest it computed
/// there; computed as "never" at the moment a capture is being installed
/// on another thread, it outlived that capture's recomputation, and the
/// capture missed the callsite's spans (`lock_spans` failed so, now and
/// then, when run with the rest of the suite). A global subscriber that
/// answers "sometimes" for every callsite, and enables nothing itself,
/// means no callsite is ever cached as "never": each span asks the
/// subscriber of its own thread, which is this capture where one is
/// installed and nothing elsewhere, as before.
fn undecided_everywhere() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Fails only if another global subscriber is set, which then
        // decides the interest itself.
        let _ = tracing::subscriber::set_global_default(Undecided);
    });
}

struct Undecided;

impl tracing::Subscriber for Undecided {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1) // never called: it enables nothing
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
