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
        let subscriber = tracing_subscriber::registry().with(self.clone());
        let guard = tracing::subscriber::set_default(subscriber);
        // Tests of this binary run on many threads, most with no
        // subscriber. A callsite first reached by one of them while this
        // subscriber was being registered can keep the interest it computed
        // without it ("never"), and its spans would then be missed here;
        // recomputing every callsite's interest now includes this one.
        tracing::callsite::rebuild_interest_cache();
        guard
    }

    pub fn spans(&self, name: &str) -> Vec<Captured> {
        let spans = self.0.lock().unwrap();
        spans.iter().filter(|s| s.name == name).cloned().collect()
    }
}
