//! The cluster a command talks to, found as kubectl finds it: the kubeconfig (`KUBECONFIG` or
//! `~/.kube/config`, its current context and namespace) or, inside a Pod, the service account. One place for
//! every subcommand that reads or writes objects, so each says the same thing when there is no cluster.

/// How long a command waits for the API server to answer before it gives up on the cluster.
const PROBE: std::time::Duration = std::time::Duration::from_secs(10);

/// A client for the cluster the kubeconfig (or the Pod's service account) names, once it answered. Its
/// `default_namespace()` is the kubeconfig context's namespace (`default` when it names none).
pub async fn connect() -> Result<kube::Client, String> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("no cluster configured (kubeconfig or in-cluster): {e}"))?;
    match crate::time::real_timeout(PROBE, client.apiserver_version()).await {
        Some(Ok(_)) => Ok(client),
        Some(Err(e)) => Err(format!("the API server did not answer: {e}")),
        None => Err(format!(
            "the API server did not answer within {} s",
            PROBE.as_secs()
        )),
    }
}
