//! `canaryd promote|abort|retry|pause|resume|restart|undo|set image`: kubectl-argo-rollouts' actions on a
//! Rollout, through the kubeconfig as kubectl reads it. Parses the flags, names the Rollout, says what was done
//! and maps what went wrong onto the exit codes (docs/architecture.md, "Exit codes"): 1 when the Rollout as it
//! stands refuses the action, 2 when the arguments do not fit the cluster's objects, 4 when the cluster fails.
//! The requests are `k8s::rollout_actions`'s, what they write `engine::rollout::actions`'s.

use clap::{Args, Subcommand};

use super::Exit;
use crate::engine::rollout::actions::Toggle;
use crate::k8s::rollout_actions::{ActionError, Target, Undone};

/// The Rollout an action addresses.
#[derive(Debug, Args)]
pub struct RolloutName {
    /// The Rollout's name.
    pub name: String,
    /// Its namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

/// The actions, each a subcommand of its own as in `kubectl argo rollouts`.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Promote a Rollout: past the pause (or Inconclusive analysis) it waits at, or to its next step; --full
    /// skips the remaining steps, analyses and pauses (exit 1 when already fully promoted).
    Promote {
        #[command(flatten)]
        rollout: RolloutName,
        /// Promote fully: the new revision becomes stable at once.
        #[arg(long)]
        full: bool,
    },
    /// Abort a Rollout's update: traffic and replicas back to the stable revision (`status.abort`).
    Abort(RolloutName),
    /// Retry an aborted Rollout: its steps again from the first.
    Retry(RolloutName),
    /// Pause a Rollout (`spec.paused`).
    Pause(RolloutName),
    /// Undo `pause` (clears `spec.paused`; a pause step is left to `promote`).
    Resume(RolloutName),
    /// Restart a Rollout's pods (`spec.restartAt`), now or --in a while.
    Restart {
        #[command(flatten)]
        rollout: RolloutName,
        /// How long from now, a Go duration (e.g. 30s, 5m, 1h).
        #[arg(short = 'i', long = "in", value_parser = parse_delay)]
        delay: Option<Delay>,
    },
    /// Roll a Rollout's template back to the previous revision, or to --to-revision.
    Undo {
        #[command(flatten)]
        rollout: RolloutName,
        /// The revision to go back to (0: the one before the latest).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
        to_revision: i64,
    },
    /// Change a Rollout: `set image NAME CONTAINER=IMAGE`.
    #[command(subcommand)]
    Set(SetCommand),
}

#[derive(Debug, Subcommand)]
pub enum SetCommand {
    /// Set the image of the container named CONTAINER (`*` for every container) in a Rollout's template.
    Image {
        #[command(flatten)]
        rollout: RolloutName,
        /// CONTAINER=IMAGE
        #[arg(value_parser = parse_container_image)]
        image: ContainerImage,
    },
}

/// `restart --in`: the duration as written (for the reply) and as read.
#[derive(Debug, Clone)]
pub struct Delay {
    text: String,
    duration: std::time::Duration,
}

/// A Go duration, as restart.go reads `--in` (`time.ParseDuration`).
fn parse_delay(text: &str) -> Result<Delay, String> {
    let duration = crate::api::duration::parse_duration(text).map_err(|e| e.to_string())?;
    Ok(Delay {
        text: text.into(),
        duration,
    })
}

/// `set image`'s `CONTAINER=IMAGE`.
#[derive(Debug, Clone)]
pub struct ContainerImage {
    container: String,
    image: String,
}

/// `CONTAINER=IMAGE` with exactly one `=`, as set_image.go splits it.
fn parse_container_image(text: &str) -> Result<ContainerImage, String> {
    match text.split_once('=') {
        Some((container, image)) if !image.contains('=') => Ok(ContainerImage {
            container: container.into(),
            image: image.into(),
        }),
        _ => Err("expected CONTAINER=IMAGE".into()),
    }
}

impl Action {
    fn rollout(&self) -> &RolloutName {
        match self {
            Action::Promote { rollout, .. }
            | Action::Restart { rollout, .. }
            | Action::Undo { rollout, .. }
            | Action::Set(SetCommand::Image { rollout, .. }) => rollout,
            Action::Abort(rollout)
            | Action::Retry(rollout)
            | Action::Pause(rollout)
            | Action::Resume(rollout) => rollout,
        }
    }
}

/// Runs one action and returns its exit code.
pub fn run(action: Action) -> Exit {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("canaryd: cannot start the runtime: {e}");
            return Exit::Error;
        }
    };
    runtime.block_on(act(action))
}

async fn act(action: Action) -> Exit {
    let client = match super::cluster::connect().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("canaryd: {e}");
            return Exit::Error;
        }
    };
    let named = action.rollout();
    let namespace = named
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let target = Target::new(client, &namespace, &named.name);
    let name = &named.name;
    let done = match &action {
        Action::Promote { full, .. } => target.promote(*full).await.map(|()| match full {
            true => format!("rollout '{name}' fully promoted"),
            false => format!("rollout '{name}' promoted"),
        }),
        Action::Abort(_) => toggled(&target, Toggle::Abort, "aborted").await,
        Action::Retry(_) => toggled(&target, Toggle::Retry, "retried").await,
        Action::Pause(_) => toggled(&target, Toggle::Pause, "paused").await,
        Action::Resume(_) => toggled(&target, Toggle::Resume, "resumed").await,
        Action::Restart { delay, .. } => restart(&target, delay.as_ref()).await,
        Action::Undo { to_revision, .. } => {
            target.undo(*to_revision).await.map(|undone| match undone {
                Undone::Restored => format!("rollout '{name}' undo"),
                Undone::AlreadyThere => format!(
                    "skipped rollback (current template already matches revision {to_revision})"
                ),
            })
        }
        Action::Set(SetCommand::Image { image, .. }) => target
            .set_image(&image.container, &image.image)
            .await
            .map(|()| format!("rollout \"{name}\" image updated")),
    };
    match done {
        Ok(line) => {
            say!("{line}");
            Exit::Ok
        }
        Err(e) => {
            eprintln!("canaryd: {e}");
            exit_code(&e)
        }
    }
}

async fn toggled(target: &Target, toggle: Toggle, done: &str) -> Result<String, ActionError> {
    target.toggle(toggle).await?;
    Ok(format!("rollout '{}' {done}", target.name()))
}

/// `restart`: `spec.restartAt` now, or `delay` from now (restart.go).
async fn restart(target: &Target, delay: Option<&Delay>) -> Result<String, ActionError> {
    let now = crate::time::Clock::Wall.now();
    let (at, said) = match delay {
        None => (now, "0s"),
        Some(delay) => {
            let at = jiff::SignedDuration::try_from(delay.duration)
                .ok()
                .and_then(|d| now.checked_add(d).ok())
                .ok_or_else(|| ActionError::TooFarAhead(delay.text.clone()))?;
            (at, delay.text.as_str())
        }
    };
    target.restart(at).await?;
    Ok(format!("rollout '{}' restarts in {said}", target.name()))
}

/// The exit code for what went wrong (docs/architecture.md, "Exit codes").
fn exit_code(error: &ActionError) -> Exit {
    match error {
        ActionError::AlreadyPromoted(_) | ActionError::NoPreviousRevision(_) => Exit::Negative,
        ActionError::NotFound { .. }
        | ActionError::NotCanary(_)
        | ActionError::WorkloadRef(_)
        | ActionError::NoSuchRevision(..)
        | ActionError::UnknownContainer(..)
        | ActionError::TooFarAhead(_) => Exit::Usage,
        ActionError::Api(..) | ActionError::Unreadable(..) => Exit::Error,
    }
}
