//! `canaryd eval`: try a condition (or a success/failure pair) against a value typed on the command line, so a
//! condition can be debugged before a rollout depends on it. Owns reading `--result` (JSON plus the bare
//! tokens `NaN`, `Infinity`, `-Infinity`) and mapping outcomes onto exit codes; the meaning of a condition is
//! the engine's.

use serde_json::Value as JsonValue;

use super::{Exit, OutputFormat};
use crate::api::AnalysisPhase;
use crate::engine::condition::{Condition, measurement_phase};
use crate::engine::value::MetricValue;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
canaryd eval --condition 'result[0] >= 0.95' --result '[0.97]'\n  \
canaryd eval --success 'result[0] >= 0.95' --failure 'result[0] < 0.5' --result '[NaN]'\n  \
canaryd eval --condition 'result.status == \"ok\"' --result '{\"status\": \"ok\"}'\n\n\
With --success/--failure the phase is always printed, `Error: REASON` included (a condition that does not \
compile is an Error, as in Argo, which compiles it for every measurement).\n\n\
Exit codes: 0 true (or a phase was printed), 1 false, 2 bad input (--condition does not compile, --result is \
not JSON), 4 --condition could not be evaluated against this value.")]
pub struct Args {
    /// A condition to evaluate: prints `true` (exit 0) or `false` (exit 1).
    // Values may start with `-`: `-result < 0`, `--result -Infinity`.
    #[arg(long, allow_hyphen_values = true, conflicts_with_all = ["success", "failure"])]
    pub condition: Option<String>,
    /// A successCondition: with --failure (or alone) prints the measurement phase Argo would record.
    #[arg(long, allow_hyphen_values = true)]
    pub success: Option<String>,
    /// A failureCondition: with --success (or alone) prints the measurement phase Argo would record.
    #[arg(long, allow_hyphen_values = true)]
    pub failure: Option<String>,
    /// The measured value as JSON: a number is a Prometheus scalar, an array of numbers a vector, `null` no
    /// value, anything else a web/JSON value. `NaN`, `Infinity` and `-Infinity` may be written bare.
    #[arg(long, allow_hyphen_values = true)]
    pub result: String,
    /// `text` prints true/false or the phase; `json` prints only one JSON object on stdout.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

pub fn run(args: Args) -> Exit {
    let output = args.output;
    let value = match parse_result(&args.result) {
        Ok(v) => v,
        Err(e) => return fail(output, &format!("--result: {e}"), Exit::Usage),
    };
    let compile = |flag: &str, text: &Option<String>| match text {
        Some(t) => Condition::compile(t)
            .map(Some)
            .map_err(|e| format!("--{flag}: {e}")),
        None => Ok(None),
    };
    if args.condition.is_some() {
        let condition = match compile("condition", &args.condition) {
            Ok(Some(c)) => c,
            Ok(None) => return fail(output, "--condition is empty", Exit::Usage),
            Err(e) => return fail(output, &e, Exit::Usage),
        };
        return match condition.evaluate(&value) {
            Ok(outcome) => {
                print(
                    output,
                    &outcome.to_string(),
                    serde_json::json!({ "result": outcome }),
                );
                if outcome { Exit::Ok } else { Exit::Negative }
            }
            Err(e) => fail(output, &e.to_string(), Exit::Error),
        };
    }
    // Argo compiles the conditions for every measurement, so one that does not compile is an Error phase
    // like any evaluation error; the phase is printed whatever it is.
    let phase = compile("success", &args.success).and_then(|success| {
        let failure = compile("failure", &args.failure)?;
        measurement_phase(success.as_ref(), failure.as_ref(), &value).map_err(|e| e.to_string())
    });
    match phase {
        Ok(phase) => print(
            output,
            phase.as_str(),
            serde_json::json!({ "phase": phase.as_str() }),
        ),
        Err(reason) => {
            let error = AnalysisPhase::Error.as_str();
            print(
                output,
                &format!("{error}: {reason}"),
                serde_json::json!({ "phase": error, "message": reason }),
            );
        }
    }
    Exit::Ok
}

fn print(output: OutputFormat, text: &str, json: JsonValue) {
    match output {
        OutputFormat::Text => say!("{text}"),
        OutputFormat::Json => say!("{json}"),
    }
}

fn fail(output: OutputFormat, message: &str, exit: Exit) -> Exit {
    match output {
        OutputFormat::Text => eprintln!("error: {message}"),
        OutputFormat::Json => say!("{}", serde_json::json!({ "error": message })),
    }
    exit
}

/// Reads `--result`: JSON, plus bare `NaN`, `Infinity`, `-Infinity` (and Go's `+Inf`/`-Inf`) as a number or
/// inside an array of numbers, where Prometheus puts them.
pub fn parse_result(text: &str) -> Result<MetricValue, String> {
    // The special numbers become marker strings that cannot occur in the input, then plain JSON parsing runs.
    let mut marker = String::from("canaryd-special-number:");
    while text.contains(&marker) {
        marker.push('#');
    }
    let rewritten = mark_special_numbers(text, &marker);
    let json: JsonValue =
        serde_json::from_str(&rewritten).map_err(|e| format!("not valid JSON: {e}"))?;
    let special = |v: &JsonValue| -> Option<f64> {
        let word = v.as_str()?.strip_prefix(marker.as_str())?;
        Some(match word.trim_start_matches(['+', '-']) {
            "NaN" => f64::NAN,
            _ if word.starts_with('-') => f64::NEG_INFINITY,
            _ => f64::INFINITY,
        })
    };
    let number = |v: &JsonValue| v.as_f64().or_else(|| special(v));
    match &json {
        JsonValue::Null => Ok(MetricValue::Nil),
        JsonValue::Array(items) if items.iter().all(|i| number(i).is_some()) => Ok(
            MetricValue::Numbers(items.iter().filter_map(number).collect()),
        ),
        v => match number(v) {
            Some(n) => Ok(MetricValue::Number(n)),
            None if contains_marker(v, &marker) => Err(
                "NaN and Infinity are allowed only as a number or inside an array of numbers"
                    .to_string(),
            ),
            None => Ok(MetricValue::Json(json)),
        },
    }
}

fn contains_marker(v: &JsonValue, marker: &str) -> bool {
    match v {
        JsonValue::String(s) => s.starts_with(marker),
        JsonValue::Array(items) => items.iter().any(|i| contains_marker(i, marker)),
        JsonValue::Object(m) => m.values().any(|i| contains_marker(i, marker)),
        _ => false,
    }
}

fn mark_special_numbers(text: &str, marker: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    let mut in_string = false;
    while let Some((i, c)) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        out.push(escaped);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        let signed =
            matches!(c, '+' | '-') && chars.peek().is_some_and(|(_, n)| n.is_ascii_alphabetic());
        if c.is_ascii_alphabetic() || signed {
            let mut end = i + c.len_utf8();
            while let Some((j, n)) = chars.peek().copied() {
                if !n.is_ascii_alphabetic() {
                    break;
                }
                end = j + n.len_utf8();
                chars.next();
            }
            let word = text.get(i..end).unwrap_or("");
            if matches!(
                word.trim_start_matches(['+', '-']),
                "NaN" | "Infinity" | "Inf"
            ) && word != "+NaN"
                && word != "-NaN"
            {
                out.push('"');
                out.push_str(marker);
                out.push_str(word);
                out.push('"');
            } else {
                out.push_str(word);
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_reader_accepts_bare_special_numbers() {
        assert_eq!(parse_result("0.5"), Ok(MetricValue::Number(0.5)));
        assert_eq!(
            parse_result("-Infinity"),
            Ok(MetricValue::Number(f64::NEG_INFINITY))
        );
        assert_eq!(parse_result("+Inf"), Ok(MetricValue::Number(f64::INFINITY)));
        let Ok(MetricValue::Numbers(ns)) = parse_result("[1, NaN, Infinity, -Infinity]") else {
            panic!("not a vector");
        };
        assert_eq!(ns.len(), 4);
        assert!(ns[1].is_nan());
        assert_eq!(ns[2], f64::INFINITY);
        assert_eq!(ns[3], f64::NEG_INFINITY);
    }

    #[test]
    fn result_reader_sorts_values_into_argos_kinds() {
        assert_eq!(parse_result("null"), Ok(MetricValue::Nil));
        assert_eq!(parse_result("[]"), Ok(MetricValue::Numbers(vec![])));
        assert_eq!(
            parse_result(r#"{"a": "NaN"}"#),
            Ok(MetricValue::Json(serde_json::json!({"a": "NaN"})))
        );
        assert_eq!(
            parse_result("true"),
            Ok(MetricValue::Json(serde_json::json!(true)))
        );
        assert_eq!(
            parse_result(r#""NaN""#),
            Ok(MetricValue::Json(serde_json::json!("NaN")))
        );
        assert_eq!(
            parse_result("[1, \"a\"]"),
            Ok(MetricValue::Json(serde_json::json!([1, "a"])))
        );
    }

    #[test]
    fn result_reader_rejects_special_numbers_inside_objects_and_bad_json() {
        assert!(parse_result(r#"{"a": NaN}"#).is_err());
        assert!(parse_result("[NaN, \"x\"]").is_err());
        assert!(parse_result("nan").is_err());
        assert!(parse_result("{").is_err());
        assert!(parse_result("").is_err());
    }
}
