//! The dashboard: Rollouts, one Rollout and one AnalysisRun as server-rendered HTML pages, kept current in the
//! browser through server-sent events fed by the Kubernetes watch ([`live`]), and the Rollout actions behind
//! buttons when they are on ([`actions`]). Served by `canaryd dashboard` (the kubeconfig's identity) and by the
//! daemon behind `--dashboard-addr` (its service account's). It reads through the API server at each request and
//! shows what `view` makes of the objects; it decides nothing and never reads a Secret.

mod actions;
mod live;
mod pages;

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

/// How the dashboard is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Show the promote/abort/retry/pause buttons and accept their requests; off, every POST is refused.
    pub actions: bool,
}

/// A response's body: a page, or the event stream.
type Body = UnsyncBoxBody<Bytes, Infallible>;

/// What every request is answered with.
struct Dashboard {
    client: kube::Client,
    settings: Settings,
}

/// Serves the dashboard on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, client: kube::Client, settings: Settings) {
    let dashboard = Arc::new(Dashboard { client, settings });
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let dashboard = dashboard.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let dashboard = dashboard.clone();
                async move { Ok::<_, Infallible>(dashboard.answer(&req).await) }
            });
            // A browser that goes away mid-request (or closes the event stream) is its own business.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

impl Dashboard {
    async fn answer<B>(&self, req: &Request<B>) -> Response<Body> {
        let path = req.uri().path();
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let query = Query::parse(req.uri().query());
        match (req.method(), segments.as_slice()) {
            (&Method::GET, [""]) => {
                let page = pages::rollouts(&self.client, &query).await;
                html(StatusCode::OK, page)
            }
            (&Method::GET, ["rollouts", namespace, name]) => {
                pages::rollout(&self.client, namespace, name, self.settings.actions)
                    .await
                    .map_or_else(
                        |(status, page)| html(status, page),
                        |page| html(StatusCode::OK, page),
                    )
            }
            (&Method::GET, ["analysisruns", namespace, name]) => {
                pages::analysis_run(&self.client, namespace, name)
                    .await
                    .map_or_else(
                        |(status, page)| html(status, page),
                        |page| html(StatusCode::OK, page),
                    )
            }
            (&Method::GET, ["live"]) => live::stream(&self.client, query.namespace.as_deref()),
            (&Method::POST, ["rollouts", namespace, name, action]) => {
                let (status, said) =
                    actions::act(&self.client, self.settings, req, (namespace, name), action).await;
                text(status, said)
            }
            (&Method::GET, _) => text(StatusCode::NOT_FOUND, "not found\n".to_string()),
            _ => text(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed\n".to_string(),
            ),
        }
    }
}

/// The list page's filter: `?namespace=NS&name=PART`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Query {
    namespace: Option<String>,
    name: Option<String>,
}

impl Query {
    fn parse(query: Option<&str>) -> Query {
        let mut parsed = Query::default();
        let pairs = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes());
        for (key, value) in pairs {
            let value = Some(value.trim().to_string()).filter(|v| !v.is_empty());
            match key.as_ref() {
                "namespace" => parsed.namespace = value,
                "name" => parsed.name = value,
                _ => {}
            }
        }
        parsed
    }
}

/// The headers every answer carries: no framing by another site (the buttons must not be clicked through
/// one), nothing loaded from elsewhere, the event stream and the actions from this origin only.
const SECURITY_HEADERS: [(&str, &str); 3] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
];

fn respond(status: StatusCode, content_type: &str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS.iter().chain(&[
        ("content-type", content_type),
        ("cache-control", "no-store"),
    ]) {
        if let Ok(value) = hyper::header::HeaderValue::from_str(value) {
            headers.insert(*name, value);
        }
    }
    response
}

fn html(status: StatusCode, page: String) -> Response<Body> {
    respond(status, "text/html; charset=utf-8", full(page))
}

fn text(status: StatusCode, said: String) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", full(said))
}

fn full(body: String) -> Body {
    Full::new(Bytes::from(body)).boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_reads_namespace_and_name_and_ignores_empty_fields() {
        assert_eq!(
            Query::parse(Some("namespace=shop&name=check%20out&other=1")),
            Query {
                namespace: Some("shop".to_string()),
                name: Some("check out".to_string()),
            }
        );
        assert_eq!(Query::parse(Some("namespace=&name=")), Query::default());
        assert_eq!(Query::parse(None), Query::default());
    }
}
