//! The dashboard's buttons: `POST /rollouts/NAMESPACE/NAME/ACTION` for promote, abort, retry and pause, made
//! through `k8s::rollout_actions` (the requests `canaryd promote`, `abort`, `retry` and `pause` make) with the
//! dashboard's identity. Refused unless actions are on, and refused unless the request comes from the
//! dashboard's own page: the page's script sends [`ACTION_HEADER`], which a form or a plain cross-site request
//! cannot, and a browser's `Origin` must be the dashboard's.

use hyper::{Request, StatusCode};

use super::Settings;
use crate::engine::rollout::actions::Toggle;
use crate::k8s::rollout_actions::{ActionError, Target};

/// The header the page's buttons send with each action.
pub const ACTION_HEADER: &str = "x-canaryd-action";

/// The actions the page offers, by the name in their path.
pub const ACTIONS: [&str; 4] = ["promote", "abort", "retry", "pause"];

/// Makes `action` on the Rollout `namespace/name` if `req` may; the status to answer and what to say.
pub async fn act<B>(
    client: &kube::Client,
    settings: Settings,
    req: &Request<B>,
    (namespace, name): (&str, &str),
    action: &str,
) -> (StatusCode, String) {
    if !settings.actions {
        return (
            StatusCode::FORBIDDEN,
            "actions are off: start the dashboard with --actions (the daemon with --dashboard-actions)\n"
                .to_string(),
        );
    }
    if let Err(why) = from_the_page(req) {
        return (StatusCode::FORBIDDEN, format!("{why}\n"));
    }
    let target = Target::new(client.clone(), namespace, name);
    let done = match action {
        "promote" => target.promote(false).await,
        "abort" => target.toggle(Toggle::Abort).await,
        "retry" => target.toggle(Toggle::Retry).await,
        "pause" => target.toggle(Toggle::Pause).await,
        _ => return (StatusCode::NOT_FOUND, format!("no action {action:?}\n")),
    };
    match done {
        Ok(()) => (StatusCode::OK, format!("{action}: done\n")),
        Err(e) => (status_of(&e), format!("{action}: {e}\n")),
    }
}

/// Whether `req` was sent by the dashboard's own page: it carries [`ACTION_HEADER`], and a browser's `Origin`
/// (sent with every cross-site POST) names the host the request was sent to.
fn from_the_page<B>(req: &Request<B>) -> Result<(), String> {
    let headers = req.headers();
    if headers.get(ACTION_HEADER).is_none() {
        return Err(format!(
            "refused: an action must come from the dashboard's page (no {ACTION_HEADER} header)"
        ));
    }
    let host = headers
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok());
    let origin = headers
        .get(hyper::header::ORIGIN)
        .and_then(|o| o.to_str().ok());
    match (origin, host) {
        (None, _) => Ok(()),
        (Some(origin), Some(host))
            if origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                == Some(host) =>
        {
            Ok(())
        }
        (Some(origin), _) => Err(format!(
            "refused: an action from {origin:?}, not from the dashboard's page"
        )),
    }
}

/// The HTTP status that says what went wrong with an action.
fn status_of(error: &ActionError) -> StatusCode {
    match error {
        ActionError::NotFound { .. } => StatusCode::NOT_FOUND,
        ActionError::Api(_, kube::Error::Api(status)) if status.code == 403 => {
            StatusCode::FORBIDDEN
        }
        ActionError::Api(..) | ActionError::Unreadable(..) => StatusCode::BAD_GATEWAY,
        _ => StatusCode::CONFLICT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::post("/rollouts/shop/checkout/abort");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("a request")
    }

    #[test]
    fn an_action_without_the_pages_header_is_refused() {
        assert!(from_the_page(&request(&[("host", "127.0.0.1:3100")])).is_err());
    }

    #[test]
    fn an_action_from_another_origin_is_refused() {
        let forged = request(&[
            ("host", "127.0.0.1:3100"),
            ("origin", "http://evil.example"),
            (ACTION_HEADER, "1"),
        ]);
        assert!(from_the_page(&forged).is_err());
    }

    #[test]
    fn an_action_from_the_page_is_accepted() {
        let own = request(&[
            ("host", "127.0.0.1:3100"),
            ("origin", "http://127.0.0.1:3100"),
            (ACTION_HEADER, "1"),
        ]);
        assert_eq!(from_the_page(&own), Ok(()));
        let no_origin = request(&[("host", "127.0.0.1:3100"), (ACTION_HEADER, "1")]);
        assert_eq!(from_the_page(&no_origin), Ok(()));
    }
}
