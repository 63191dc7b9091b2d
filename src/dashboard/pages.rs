//! The dashboard's pages as HTML: the list of Rollouts, one Rollout (its steps as a timeline, revisions with
//! their ReplicaSets and AnalysisRuns, Events, and the action buttons when actions are on) and one
//! AnalysisRun. Each reads what it shows through the API server and renders what `view` makes of it: the
//! Rollout's spec, the runs' args and every Secret are never shown.

use std::fmt::Write as _;

use hyper::StatusCode;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;

use super::Query;
use super::actions::ACTIONS;
use crate::api::{AnalysisRun, Rollout};
use crate::k8s::rollout_reads;
use crate::view::{self, RolloutView, StepState};
use crate::web;
use crate::web::page::escape;

/// A page that could not be made: the status to answer with, and the page that says why.
pub type Refusal = (StatusCode, String);

/// The list of Rollouts, filtered by `query`: every namespace's when the identity may list them all, else the
/// default namespace's.
pub async fn rollouts(client: &kube::Client, query: &Query) -> String {
    let (listed, namespace) = match &query.namespace {
        Some(namespace) => (
            Api::<Rollout>::namespaced(client.clone(), namespace)
                .list(&ListParams::default())
                .await,
            Some(namespace.clone()),
        ),
        None => match Api::<Rollout>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            Err(e) if crate::k8s::is_status(&e, 403) => {
                let namespace = client.default_namespace().to_string();
                let api = Api::<Rollout>::namespaced(client.clone(), &namespace);
                (api.list(&ListParams::default()).await, Some(namespace))
            }
            listed => (listed, None),
        },
    };
    let mut main = filter_form(query);
    match listed {
        Err(e) => {
            let _ = write!(
                main,
                "<p class=error>cannot list rollouts: {}</p>",
                escape(&e.to_string())
            );
        }
        Ok(listed) => {
            let mut rows: Vec<view::RolloutRow> = listed
                .items
                .iter()
                .map(view::rollout_row)
                .filter(|row| {
                    query
                        .name
                        .as_ref()
                        .is_none_or(|part| row.name.contains(part.as_str()))
                })
                .collect();
            rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            main.push_str(&rollout_table(&rows));
        }
    }
    page("Rollouts", &live_url(namespace.as_deref()), &main)
}

fn filter_form(query: &Query) -> String {
    format!(
        "<form id=filter method=get action=/>\
         <label>namespace <input name=namespace value=\"{}\"></label> \
         <label>name <input name=name value=\"{}\"></label> <button>filter</button></form>",
        escape(query.namespace.as_deref().unwrap_or_default()),
        escape(query.name.as_deref().unwrap_or_default()),
    )
}

fn rollout_table(rows: &[view::RolloutRow]) -> String {
    if rows.is_empty() {
        return "<p id=none>No rollouts found.</p>".to_string();
    }
    let mut table = String::from(
        "<table id=rollouts><thead><tr><th>namespace</th><th>name</th><th>strategy</th><th>phase</th>\
         <th>step</th><th>set weight</th><th>ready</th><th>last decision</th></tr></thead><tbody>",
    );
    for row in rows {
        let _ = write!(
            table,
            "<tr data-rollout=\"{ns}/{name}\"><td>{ns}</td><td><a href=\"/rollouts/{ns}/{name}\">{name}</a></td>\
             <td>{strategy}</td><td><span class=\"phase phase-{phase}\">{phase}</span></td><td>{step}</td><td>{weight}</td>\
             <td>{ready}/{desired}</td><td>{message}</td></tr>",
            ns = escape(&row.namespace),
            name = escape(&row.name),
            strategy = escape(&row.strategy),
            phase = escape(&row.status),
            step = escape(&row.step),
            weight = escape(&row.set_weight),
            ready = row.ready,
            desired = row.desired,
            message = escape(&row.message),
        );
    }
    table.push_str("</tbody></table>");
    table
}

/// One Rollout's page; 404 when there is none.
pub async fn rollout(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    actions: bool,
) -> Result<String, Refusal> {
    let rollout = match Api::<Rollout>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(Some(rollout)) => rollout,
        Ok(None) => return Err(not_found(&format!("rollout {namespace}/{name}"))),
        Err(e) => return Err(unreadable(&format!("rollout {namespace}/{name}"), &e)),
    };
    let owned = rollout_reads::owned(client, &rollout)
        .await
        .map_err(|e| unreadable(&e.what, &e.error))?;
    let view = view::rollout_view(&rollout, &owned.borrowed());
    let mut main = summary(&view);
    if actions {
        main.push_str(&action_buttons(namespace, name));
    }
    main.push_str(&timeline(&view::step_timeline(&rollout)));
    main.push_str(&revisions(&view));
    main.push_str(&newest_analysis(&view, &owned.analysis_runs));
    match rollout_reads::events(client, namespace, name).await {
        Ok(events) => main.push_str(&events_table(&events)),
        Err(e) => {
            let _ = write!(
                main,
                "<section id=events><h2>Events</h2><p class=error>cannot read {}: {}</p></section>",
                escape(&e.what),
                escape(&e.error.to_string())
            );
        }
    }
    Ok(page(
        &format!("Rollout {namespace}/{name}"),
        &live_url(Some(namespace)),
        &main,
    ))
}

fn summary(view: &RolloutView) -> String {
    let mut out = format!(
        "<h1>{name} <small>{ns}</small></h1><dl id=summary>\
         <dt>phase</dt><dd id=phase><span class=\"phase phase-{phase}\">{phase}</span></dd>\
         <dt>message</dt><dd id=message>{message}</dd><dt>strategy</dt><dd>{strategy}</dd>",
        name = escape(&view.name),
        ns = escape(&view.namespace),
        phase = escape(&view.status),
        message = escape(&view.message),
        strategy = escape(&view.strategy),
    );
    if let Some(canary) = &view.canary {
        if let Some(step) = &canary.step {
            let _ = write!(
                out,
                "<dt>step</dt><dd id=step>{}/{}{}</dd>",
                step.index,
                step.count,
                step.text
                    .as_deref()
                    .map(|t| format!(" ({})", escape(t)))
                    .unwrap_or_default()
            );
        }
        let _ = write!(
            out,
            "<dt>weights</dt><dd id=weights>set {}%, actual {}%</dd>",
            canary.set_weight, canary.actual_weight
        );
    }
    let images: Vec<String> = view
        .images
        .iter()
        .map(|i| format!("{} ({})", escape(&i.image), escape(&i.tags.join(", "))))
        .collect();
    let r = view.replicas;
    let _ = write!(
        out,
        "<dt>images</dt><dd>{}</dd><dt>replicas</dt><dd>desired {}, current {}, updated {}, ready {}, available {}</dd></dl>",
        images.join("<br>"),
        r.desired,
        r.current,
        r.updated,
        r.ready,
        r.available
    );
    out
}

fn action_buttons(namespace: &str, name: &str) -> String {
    let mut out = String::from("<section id=actions>");
    for action in ACTIONS {
        let _ = write!(
            out,
            "<button data-action=\"/rollouts/{ns}/{name}/{action}\" data-confirm=\"{action} rollout {ns}/{name}?\">{action}</button> ",
            ns = escape(namespace),
            name = escape(name),
        );
    }
    out.push_str("<output id=action-result></output></section>");
    out
}

fn timeline(steps: &[view::TimelineStep]) -> String {
    let mut out = String::from("<section><h2>Steps</h2><ol id=steps class=timeline>");
    for step in steps {
        let state = match step.state {
            StepState::Done => "done",
            StepState::Current => "current",
            StepState::ToCome => "to-come",
        };
        let _ = write!(
            out,
            "<li data-state={state} class={state}><span class=step>{}</span> <span class=weight>{}%</span></li>",
            escape(&step.text),
            step.weight
        );
    }
    out.push_str("</ol></section>");
    out
}

fn revisions(view: &RolloutView) -> String {
    let mut out = String::from("<section id=revisions><h2>Revisions</h2>");
    for revision in &view.revisions {
        let _ = write!(out, "<h3>revision {}</h3><ul>", revision.revision);
        for rs in &revision.replica_sets {
            let tags: Vec<&str> = [(rs.stable, "stable"), (rs.canary, "canary")]
                .into_iter()
                .filter_map(|(on, tag)| on.then_some(tag))
                .collect();
            let _ = write!(
                out,
                "<li class=replicaset>{} ReplicaSet {} {} {} ({}/{} available) {}</li>",
                rs.icon,
                escape(&rs.name),
                escape(&rs.status),
                tags.join(" "),
                rs.available,
                rs.replicas,
                escape(&rs.images.join(", "))
            );
        }
        for run in &revision.analysis_runs {
            let _ = write!(
                out,
                "<li class=analysisrun>{icon} AnalysisRun <a href=\"/analysisruns/{ns}/{name}\">{name}</a> {status} \
                 (✔ {ok}, ✖ {failed}, ? {inconclusive}, ⚠ {error})</li>",
                icon = run.icon,
                ns = escape(&view.namespace),
                name = escape(&run.name),
                status = escape(&run.status),
                ok = run.successful,
                failed = run.failed,
                inconclusive = run.inconclusive,
                error = run.error,
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>");
    out
}

/// The AnalysisRuns of the newest revision that has any, each drawn as the reports draw it (its metrics over
/// time, the judge's looks and the sentence saying why), so the page says why a canary is being aborted.
fn newest_analysis(view: &RolloutView, runs: &[AnalysisRun]) -> String {
    let Some(revision) = view.revisions.iter().find(|r| !r.analysis_runs.is_empty()) else {
        return String::new();
    };
    let mut out = format!(
        "<section id=analysis><h2>Analysis of revision {}</h2>",
        revision.revision
    );
    for shown in &revision.analysis_runs {
        let run = runs
            .iter()
            .find(|run| run.metadata.name.as_deref() == Some(shown.name.as_str()));
        if let Some(run) = run {
            out.push_str(&web::analysis::section(run));
        }
    }
    out.push_str("</section>");
    out
}

fn events_table(events: &[Event]) -> String {
    let mut out = String::from(
        "<section id=events><h2>Events</h2><table><thead><tr><th>last seen</th><th>type</th><th>reason</th>\
         <th>count</th><th>message</th></tr></thead><tbody>",
    );
    for event in events {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            event
                .last_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            escape(event.type_.as_deref().unwrap_or_default()),
            escape(event.reason.as_deref().unwrap_or_default()),
            event.count.unwrap_or(1),
            escape(event.message.as_deref().unwrap_or_default()),
        );
    }
    out.push_str("</tbody></table></section>");
    out
}

/// One AnalysisRun's page; 404 when there is none.
pub async fn analysis_run(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<String, Refusal> {
    let what = format!("analysisrun {namespace}/{name}");
    let run = match Api::<AnalysisRun>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(Some(run)) => run,
        Ok(None) => return Err(not_found(&what)),
        Err(e) => return Err(unreadable(&what, &e)),
    };
    let main = web::analysis::section(&run);
    Ok(page(&what, &live_url(Some(namespace)), &main))
}

fn not_found(what: &str) -> Refusal {
    let main = format!("<p class=error>{} not found</p>", escape(what));
    (StatusCode::NOT_FOUND, page("not found", "", &main))
}

fn unreadable(what: &str, e: &kube::Error) -> Refusal {
    let main = format!(
        "<p class=error>cannot read {}: {}</p>",
        escape(what),
        escape(&e.to_string())
    );
    (StatusCode::BAD_GATEWAY, page("error", "", &main))
}

/// The event stream a page listens to.
fn live_url(namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!(
            "/live?namespace={}",
            url::form_urlencoded::byte_serialize(namespace.as_bytes()).collect::<String>()
        ),
        None => "/live".to_string(),
    }
}

/// The page's script: on each `change` from the event stream, fetch the page again and swap its `<main>` in
/// when it differs (one fetch at a time, one more if changes came meanwhile); the action buttons ask, then POST with the
/// header the server requires, and say what came back.
const SCRIPT: &str = r##"
(function () {
  const live = document.querySelector("main").dataset.live;
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const page = await (await fetch(location.href, {cache: "no-store"})).text();
      const fresh = new DOMParser().parseFromString(page, "text/html").querySelector("main");
      const shown = document.querySelector("main");
      const said = document.getElementById("action-result");
      const kept = fresh && fresh.querySelector("#action-result");
      if (kept && said) kept.textContent = said.textContent;
      if (fresh && fresh.innerHTML !== shown.innerHTML) shown.replaceWith(fresh);
    } catch (e) {}
    busy = false;
    if (again) { again = false; refresh(); }
  }
  if (live) new EventSource(live).onmessage = refresh;
  document.addEventListener("click", async function (event) {
    const button = event.target.closest("button[data-action]");
    if (!button || !confirm(button.dataset.confirm)) return;
    const answer = await fetch(button.dataset.action, {method: "POST", headers: {"X-Canaryd-Action": "1"}});
    document.getElementById("action-result").textContent = await answer.text();
    refresh();
  });
})();
"##;

/// What the dashboard adds to the shared style sheet: its navigation, filter, timeline states and tables.
const STYLE: &str = "nav{margin-bottom:1rem}#filter{margin:.5rem 0 1rem}#filter input{margin-right:.5rem}\
#rollouts td,#events td,#rollouts th,#events th{text-align:left}dl#summary{display:grid;\
grid-template-columns:max-content auto;gap:.2rem 1rem}dl#summary dt{font-weight:600}dl#summary dd{margin:0}\
ol.timeline li.done{color:var(--muted)}ol.timeline li.current{border-color:var(--canary);font-weight:700}\
ol.timeline li.to-come{color:var(--muted);border-left-style:dashed}#actions{margin:1rem 0}#actions button{margin-right:.4rem}\
.error{color:var(--bad)}.phase-Healthy{color:var(--ok)}.phase-Degraded{color:var(--bad)}\
.phase-Paused,.phase-Progressing{color:var(--warn)}";

/// The page around `main` in the shared document shell (`web::page`), listening to `live` (no stream when
/// empty); `main` is built from escaped parts.
fn page(title: &str, live: &str, main: &str) -> String {
    let body = format!(
        "<style>{STYLE}</style><nav><a href=\"/\">Rollouts</a></nav>\
         <main data-live=\"{live}\">{main}</main><script>{SCRIPT}</script>",
        live = escape(live),
    );
    web::page::document(&format!("{title} · canaryd"), &body)
}
