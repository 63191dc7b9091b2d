//! The AnalysisRun controller: one reconcile of one run drives the same engine functions the CLI uses one
//! step at a time: restore from `status`, measure what is due at `now`, record, assess, write the new status,
//! requeue at the next wake-up; a completed run is deleted when its `ttlStrategy` runs out. A run the watch
//! cannot decode ends Error with the field and the reason, where its author looks.
//!
//! Watching, queueing, the echo cache and the guarded status write are the [`driver`]'s.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::Api;
use tracing::{info, warn};

use super::Context;
use super::driver::{
    self, Ahead, KindState, Next, ReconcileError, Reconciled, Wrote, requeue_at, requeue_before,
    shown,
};
use super::watch::Undecodable;
use crate::api::{AnalysisPhase, AnalysisRun, AnalysisRunStatus};
use crate::engine::analysis;
use crate::engine::compose::RunSpec;
use crate::k8s::runs::{self, WriteError};
use crate::providers::provider::RunRef;
use crate::runner::{self, PreparedRun};

impl Reconciled for AnalysisRun {
    type Status = AnalysisRunStatus;
    const COUNTED_AS: crate::observe::Kind = crate::observe::Kind::AnalysisRun;

    fn status(&self) -> Option<&AnalysisRunStatus> {
        self.status.as_ref()
    }

    fn is_completed(status: &AnalysisRunStatus) -> bool {
        status.phase.is_some_and(|p| p.is_completed())
    }

    fn state(ctx: &Context) -> &KindState<AnalysisRun> {
        &ctx.runs
    }

    fn reconcile(
        obj: Arc<Self>,
        ctx: Arc<Context>,
    ) -> impl Future<Output = Result<Next, ReconcileError>> + Send {
        reconcile(obj, ctx)
    }

    fn report_undecodable(
        obj: Box<Undecodable>,
        ctx: Arc<Context>,
    ) -> impl Future<Output = Result<Next, ReconcileError>> + Send {
        report_undecodable(obj, ctx)
    }
}

fn provider_name(run: &PreparedRun, index: usize) -> &'static str {
    run.metrics
        .get(index)
        .and_then(|m| m.metric.provider.configured().first().copied())
        .unwrap_or("unknown")
}

/// The run one reconcile works on: its names and the resourceVersion the cache showed.
struct This<'a> {
    obj: &'a AnalysisRun,
    namespace: String,
    name: String,
    /// `namespace/name`, as logs show it.
    shown: String,
    rv: String,
}

impl This<'_> {
    fn key(&self) -> (String, String) {
        (self.namespace.clone(), self.name.clone())
    }
}

/// What one step of a run left to write.
struct Stepped {
    status: AnalysisRunStatus,
    wakeup: Option<jiff::Timestamp>,
    /// Values its status must never show.
    secrets: Vec<String>,
    /// Measurements (phase, provider) to count once the status is written.
    uncounted: Vec<(&'static str, &'static str)>,
}

/// One step of one run: resume from what the server (or this process's own write, ahead of the cache)
/// holds, step it through the measuring loop ([`runner::step`]), write the new status with its Event, and
/// expire a completed run. Public so tests and benches can drive it; the daemon calls it from its
/// controllers.
pub async fn reconcile(obj: Arc<AnalysisRun>, ctx: Arc<Context>) -> Result<Next, ReconcileError> {
    let state = &ctx.runs;
    let namespace = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let this = This {
        obj: &obj,
        shown: shown(&namespace, &name),
        rv: obj.resource_version().unwrap_or_default(),
        namespace,
        name,
    };
    let api: Api<AnalysisRun> = Api::namespaced(ctx.client.clone(), &this.namespace);
    // Usually the drive loop has already recognised the echo of our own write; this catches the echo that
    // arrived while the writing reconcile was still running. A run that write completed goes on below, to
    // its TTL.
    if let Some(Some(wakeup)) = state
        .echo
        .of_own_write(&this.key(), &this.rv, ctx.clock.now())
    {
        return Ok(requeue_before(Some(wakeup), ctx.clock.now()));
    }
    let ahead = state.echo.ahead_of(&this.key(), &this.rv);
    // The status our write put on the server when the cache lags behind it; what is still to be written;
    // the resourceVersion to write against.
    let (written, pending, mut write_rv, uncounted) = match ahead {
        Some(a) => match a.written_rv {
            Some(w) => (Some(a.status), None, w, a.uncounted),
            None => (None, Some(a.status), this.rv.clone(), a.uncounted),
        },
        None => (None, None, this.rv.clone(), Vec::new()),
    };
    // What the server holds.
    let server = written.as_ref().or(obj.status.as_ref());

    if let Some(done) = server.and_then(|s| s.phase).filter(|p| p.is_completed()) {
        return match &written {
            None => Box::pin(expire(&api, &obj, &this.shown, done, ctx.clock.now())).await,
            Some(status) => {
                let judged = AnalysisRun {
                    status: Some(status.clone()),
                    ..(*obj).clone()
                };
                Box::pin(expire(&api, &judged, &this.shown, done, ctx.clock.now())).await
            }
        };
    }
    // What to build on.
    let working = pending.or_else(|| server.cloned());
    // Each stage is boxed, so the task holds only the one it is in: a reconcile waiting for a write slot
    // does not carry the space of measuring (tens of thousands of runs may wait at once).
    let Some(stepped) = Box::pin(step(&this, &ctx, working, &write_rv, uncounted)).await? else {
        return Ok(Next::Change);
    };
    if server == Some(&stepped.status) {
        return Ok(requeue_before(stepped.wakeup, ctx.clock.now()));
    }
    Box::pin(write(&this, &ctx, &api, server, &mut write_rv, stepped)).await
}

/// Prepares the run (its Secrets read), waits until its next measurement is due, and steps it; `None` when
/// the object changed while it waited (the reconcile its watch event queued starts from the new version).
async fn step(
    this: &This<'_>,
    ctx: &Context,
    working: Option<AnalysisRunStatus>,
    write_rv: &str,
    mut uncounted: Vec<(&'static str, &'static str)>,
) -> Result<Option<Stepped>, ReconcileError> {
    let spec = RunSpec::from_run(&this.obj.spec);
    let secrets = Box::pin(runs::read_secrets(&ctx.client, &this.namespace, &spec.args))
        .await
        .map_err(ReconcileError::Secrets)?;
    let prepared = PreparedRun::prepare(
        &spec,
        &BTreeMap::new(),
        &|r| runs::lookup(&secrets, r),
        None,
        &ctx.providers,
    );
    if let Ok(run) = &prepared
        && let Some(at) = working
            .as_ref()
            .and_then(|st| analysis::next_wakeup(&run.plan, st, ctx.clock.now()))
        && !ctx
            .runs
            .wait_until_due(this.obj, write_rv, at, &ctx.clock)
            .await
    {
        return Ok(None);
    }
    let who = RunRef {
        namespace: this.namespace.clone(),
        name: this.name.clone(),
        uid: this.obj.uid().unwrap_or_default(),
        owned: true,
    };
    // Stamped as the API server will store it, so the next due time is the same before and after the patch.
    let terminate = this.obj.spec.terminate == Some(true);
    let ticked = Box::pin(runner::step(
        prepared.as_ref(),
        &who,
        &ctx.providers,
        working,
        &ctx.clock,
        terminate,
    ))
    .await;
    let secrets = match &prepared {
        Ok(run) => {
            log_measured(run, &ticked, &this.shown, &mut uncounted);
            run.secrets.clone()
        }
        Err(e) => {
            warn!(run = %this.shown, phase = "Error", reason = %e, "AnalysisRun cannot run");
            secrets.values().filter_map(|v| v.clone().ok()).collect()
        }
    };
    Ok(Some(Stepped {
        wakeup: ticked.assessment.next_wakeup,
        status: ticked.status,
        secrets,
        uncounted,
    }))
}

/// Logs each measurement the step recorded (secret values hidden) and keeps it to be counted.
fn log_measured(
    run: &PreparedRun,
    ticked: &runner::Ticked,
    shown_run: &str,
    uncounted: &mut Vec<(&'static str, &'static str)>,
) {
    for (index, metric, _, m) in ticked.measured(run) {
        uncounted.push((m.phase.as_str(), provider_name(run, index)));
        let mut shown = serde_json::json!([m.value, m.message]);
        crate::scrub::json(&mut shown, &run.secrets);
        info!(
            run = %shown_run,
            metric = %metric,
            value = %shown[0].as_str().unwrap_or("-"),
            phase = %m.phase,
            reason = %shown[1].as_str().unwrap_or(""),
            "Measured"
        );
    }
}

/// Writes the stepped status over `server`'s, remembers it ahead of the cache, publishes the Events of the
/// step (the metrics and the run it completed) and expires a run it completed. A write that ends the run waits
/// only for a verdict's slot; one that records a measurement of a run that goes on waits for a routine one.
async fn write(
    this: &This<'_>,
    ctx: &Context,
    api: &Api<AnalysisRun>,
    server: Option<&AnalysisRunStatus>,
    write_rv: &mut String,
    stepped: Stepped,
) -> Result<Next, ReconcileError> {
    let state = &ctx.runs;
    let Stepped {
        status: new_status,
        wakeup,
        secrets,
        mut uncounted,
    } = stepped;
    let completed = new_status.phase.filter(|p| p.is_completed());
    // The semaphores are never closed, so `acquire` cannot fail.
    let slot = match completed {
        Some(_) => ctx.verdict_writes.acquire().await.ok(),
        None => ctx.routine_writes.acquire().await.ok(),
    };
    let patched = Box::pin(driver::write_status(
        ctx,
        this.obj,
        server,
        write_rv,
        |rv| {
            let (writer, status, secrets) = (&ctx.statuses, &new_status, &secrets);
            let (namespace, name) = (&this.namespace, &this.name);
            async move { runs::patch_status(writer, namespace, name, &rv, status, secrets).await }
        },
    ))
    .await;
    let written = match patched {
        Ok(Wrote::Written(metadata)) => AnalysisRun {
            metadata: *metadata,
            spec: this.obj.spec.clone(),
            status: None,
        },
        Ok(Wrote::Gone) => {
            state.echo.remember(this.key(), None);
            return Ok(Next::Change);
        }
        Ok(Wrote::Overtaken) => {
            // Build on theirs; drop our answers.
            state.echo.remember(this.key(), None);
            return Ok(Next::After(Duration::from_millis(100)));
        }
        Err(e) => {
            // Keep the measurements to write again instead of querying again.
            if matches!(e, ReconcileError::Write(WriteError::Api(_))) && *write_rv == this.rv {
                state.echo.remember(
                    this.key(),
                    Some(Ahead {
                        base_rv: this.rv.clone(),
                        status: new_status,
                        written_rv: None,
                        uncounted,
                        wakeup: None,
                        superseded: Vec::new(),
                    }),
                );
            }
            return Err(e);
        }
    };
    drop(slot);
    for (phase, provider) in uncounted.drain(..) {
        ctx.metrics.measured(phase, provider);
    }
    let announced = analysis::announcements(server, &new_status);
    // The run's message, for the log, when this write completed it.
    let ended = completed
        .filter(|p| server.and_then(|s| s.phase) != Some(*p))
        .map(|p| (p, new_status.message.clone()));
    // A completed run's status is still needed to expire it; any other moves into `Ahead` uncopied.
    let judged = completed.map(|_| new_status.clone());
    // Written on top of a version the cache did not show (this process's own last write): that version's
    // late echo is stale, even if the driver has already told it and forgotten the write meanwhile.
    let superseded = Some(write_rv.clone()).filter(|rv| *rv != this.rv);
    state.echo.remember(
        this.key(),
        Some(Ahead {
            base_rv: this.rv.clone(),
            status: new_status,
            written_rv: written.resource_version(),
            uncounted: Vec::new(),
            wakeup,
            superseded: superseded.into_iter().collect(),
        }),
    );
    if let Some((phase, message)) = ended {
        info!(run = %this.shown, phase = %phase, reason = message.as_deref().unwrap_or(""), "AnalysisRun completed");
    }
    for announced in &announced {
        let event = runs::step_event(
            &ctx.reporter,
            &written,
            announced,
            &secrets,
            ctx.clock.now(),
        );
        ctx.events.push([event]);
    }
    if let (Some(phase), Some(status)) = (completed, judged) {
        let judged = AnalysisRun {
            status: Some(status),
            ..written
        };
        return Box::pin(expire(api, &judged, &this.shown, phase, ctx.clock.now())).await;
    }
    Ok(requeue_before(wakeup, ctx.clock.now()))
}

/// A run that does not decode can never be measured: it ends Error, its message naming the field, once (a
/// run already completed is left as it is). The status it had is kept where it decodes.
async fn report_undecodable(
    obj: Box<Undecodable>,
    ctx: Arc<Context>,
) -> Result<Next, ReconcileError> {
    let completed = obj
        .status
        .as_ref()
        .and_then(|s| s.get("phase"))
        .and_then(|p| serde_json::from_value::<AnalysisPhase>(p.clone()).ok())
        .is_some_and(|p| p.is_completed());
    if completed {
        return Ok(Next::Change);
    }
    let message = format!("cannot decode the AnalysisRun: {}", obj.error);
    let status = analysis::cannot_run(
        obj.status
            .as_ref()
            .and_then(|s| serde_json::from_value(s.clone()).ok()),
        message.clone(),
        ctx.clock.stamp(),
    );
    let run = AnalysisRun {
        metadata: obj.metadata,
        spec: Default::default(),
        status: None,
    };
    let (namespace, name) = (run.namespace().unwrap_or_default(), run.name_any());
    let mut write_rv = run.resource_version().unwrap_or_default();
    let written = driver::write_status(&ctx, &run, None, &mut write_rv, |rv| {
        let (writer, status, namespace, name) = (&ctx.statuses, &status, &namespace, &name);
        async move { runs::patch_status(writer, namespace, name, &rv, status, &[]).await }
    })
    .await?;
    let Wrote::Written(metadata) = written else {
        return Ok(Next::Change);
    };
    warn!(run = %shown(&namespace, &name), phase = "Error", reason = %message, "AnalysisRun cannot run");
    let written = AnalysisRun {
        metadata: *metadata,
        ..run
    };
    for announced in analysis::announcements(None, &status) {
        let event = runs::step_event(&ctx.reporter, &written, &announced, &[], ctx.clock.now());
        ctx.events.push([event]);
    }
    Ok(Next::Change)
}

/// A completed run: delete it when its TTL has run out, else look again then.
async fn expire(
    api: &Api<AnalysisRun>,
    run: &AnalysisRun,
    run_key: &str,
    phase: AnalysisPhase,
    now: jiff::Timestamp,
) -> Result<Next, ReconcileError> {
    let Some(at) = runs::ttl_expiry(run) else {
        return Ok(Next::Change);
    };
    if at <= now {
        runs::delete_run(api, run)
            .await
            .map_err(ReconcileError::Delete)?;
        info!(run = %run_key, phase = %phase, "Deleted the AnalysisRun: its ttlStrategy expired");
        return Ok(Next::Change);
    }
    Ok(requeue_at(Some(at), now))
}
