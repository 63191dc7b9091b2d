//! `canaryd rehearse` with router objects among the files: the rehearsal shows what the daemon's routers would
//! write and when, including Argo's hold-back of a DestinationRule in subset-only mode.

use serde_json::Value;

use super::CANARYD;

const SUBSET_ONLY: &str = "tests/fixtures/rehearse/subset-only.yaml";

/// The JSON lines of `canaryd rehearse -o json` of the subset-only Rollout with pods ready `ready_after` later.
fn rehearse_subset_only(ready_after: &str) -> Vec<Value> {
    let ran = CANARYD.run(&[
        "rehearse",
        "-f",
        SUBSET_ONLY,
        "--from",
        "2026-01-01T00:00:00Z",
        "--ready-after",
        ready_after,
        "-o",
        "json",
    ]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    ran.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

/// Argo's shouldDelayDestinationRuleUpdate: in subset-only mode the DestinationRule moves only once the
/// ReplicaSets to receive traffic are fully available, and the weight waits with it; the rehearsal says so
/// and the step's weight lands when the pods are ready, as in the daemon.
#[test]
fn a_destination_rule_held_back_until_the_canary_is_available_is_shown_and_waited_out() {
    let lines = rehearse_subset_only("1m");
    let held = of_type(&lines, "held");
    assert_eq!(
        held.first().map(|h| (&h["time"], &h["message"])),
        Some((
            &Value::from("2026-01-01T00:00:00Z"),
            &Value::from(
                "DestinationRule shop/web-dr: delaying destination rule switch: ReplicaSet \
                 web-64c99bfb9d not fully available"
            )
        )),
        "{lines:#?}"
    );
    let weighted = of_type(&lines, "step")
        .into_iter()
        .find(|s| s["weight"] == 25)
        .expect("the canary reaches weight 25");
    assert_eq!(weighted["time"], "2026-01-01T00:01:00Z", "{weighted}");
    // The routers' own Events, as the daemon publishes them once it wrote the objects among the files.
    let events: Vec<(&str, &str)> = of_type(&lines, "event")
        .iter()
        .filter_map(|e| Some((e["time"].as_str()?, e["message"].as_str()?)))
        .collect();
    assert!(
        events.contains(&(
            "2026-01-01T00:01:00Z",
            "VirtualService `web-vsvc` set to desiredWeight '25'"
        )),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|(_, m)| m.starts_with("DestinationRule web-dr subset updated")),
        "{events:#?}"
    );
    assert_eq!(
        lines.last().map(|l| &l["outcome"]),
        Some(&Value::from("promoted"))
    );
}

#[test]
fn pods_ready_at_once_never_hold_the_destination_rule() {
    let lines = rehearse_subset_only("0s");
    assert!(of_type(&lines, "held").is_empty(), "{lines:#?}");
    assert_eq!(
        lines.last().map(|l| &l["outcome"]),
        Some(&Value::from("promoted"))
    );
}
