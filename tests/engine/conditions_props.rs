//! Properties of the condition engine on arbitrary input: compiling never panics on any text, and evaluating
//! never panics on any value a provider could return (arbitrary JSON, vectors with NaN and infinities).

use canaryd::engine::condition::Condition;
use canaryd::engine::value::MetricValue;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// Conditions covering every construct, evaluated against every generated value.
const CONDITIONS: &[&str] = &[
    "result[0] >= 0.95",
    "result[-1] < 1 || result > 2",
    "all(result, # < 1000)",
    "any(result, {.a == 1})",
    "none(result, # matches 'x')",
    "one(result, # in [1, 2])",
    "count(result, isNaN(#)) == 0",
    "len(filter(result, # != nil)) > 0",
    "sum(map(result, # * 2)) > 1",
    "mean(result) > median(result)",
    "min(result) < max(result)",
    "result.a.b == 'x' && result['c'] != nil",
    "result?.a ?? 1 == 1",
    "default(result, 0) < 10 and not isNil(result)",
    "asFloat(result.value) >= 9900",
    "asInt(result) == 1 ? true : false",
    "isInf(result) or isNaN(result)",
    "result contains 'ok' || result startsWith 'a' || result endsWith 'z'",
    "abs(result) + ceil(result) - floor(result) * round(result) / 2 % 3 ** 2 > 0",
    "int(result) == float(result) && string(result) == 'x'",
    "len(result) > 0 && result[len(result) - 1] > 0",
    "result",
    "-result",
];

fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<f64>().prop_map(|f| serde_json::json!(f)),
        any::<i64>().prop_map(|i| serde_json::json!(i)),
        "[a-z0-9.]{0,6}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-c]|value", inner, 0..5)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn special_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        -2.0..2.0f64,
    ]
}

fn metric_value() -> impl Strategy<Value = MetricValue> {
    prop_oneof![
        Just(MetricValue::Nil),
        special_f64().prop_map(MetricValue::Number),
        prop::collection::vec(special_f64(), 0..8).prop_map(MetricValue::Numbers),
        json().prop_map(MetricValue::Json),
    ]
}

/// Text made of the language's own pieces, so the parser gets deep into its rules rather than failing at the
/// first character.
fn condition_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("result"),
        Just("#"),
        Just("."),
        Just("a"),
        Just("["),
        Just("]"),
        Just("("),
        Just(")"),
        Just("{"),
        Just("}"),
        Just(","),
        Just("?"),
        Just(":"),
        Just("??"),
        Just("?."),
        Just("&&"),
        Just("||"),
        Just("!"),
        Just("not"),
        Just("in"),
        Just("matches"),
        Just("-"),
        Just("+"),
        Just("*"),
        Just("**"),
        Just("=="),
        Just("<"),
        Just(">="),
        Just("0"),
        Just("1.5"),
        Just("-1"),
        Just("'x'"),
        Just("\"y\""),
        Just("nil"),
        Just("true"),
        Just("all("),
        Just("len("),
        Just("isNaN("),
        Just("default("),
        Just("filter("),
        Just(" "),
        Just("'"),
        Just("\\"),
        Just("0x"),
        Just("1e"),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|ps| ps.concat())
}

proptest! {
    // Seeds of past failures go beside this file (conditions_props.proptest-regressions), as they did when it
    // was a test crate of its own; proptest's default, for a module of a main.rs, is
    // ../proptest-regressions/conditions_props.txt.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::with_cases(512)
    })]

    #[test]
    fn compiling_arbitrary_text_never_panics(text in any::<String>()) {
        let outcome = Condition::compile(&text);
        // An error always names a position or says the condition is empty or too long.
        if let Err(e) = outcome {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn compiling_condition_like_text_never_panics_and_compiled_ones_evaluate(text in condition_like(), value in metric_value()) {
        if let Ok(c) = Condition::compile(&text) {
            let outcome = c.evaluate(&value);
            if let Err(e) = outcome {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn evaluating_against_arbitrary_values_never_panics(value in metric_value()) {
        for source in CONDITIONS {
            let compiled = Condition::compile(source);
            prop_assert!(compiled.is_ok(), "{source}: {compiled:?}");
            if let Ok(c) = compiled
                && let Err(e) = c.evaluate(&value)
            {
                prop_assert!(!e.to_string().is_empty(), "{source}: empty message");
            }
        }
    }
}

#[test]
fn deeply_nested_conditions_are_refused_not_a_stack_overflow() {
    let deep = format!("{}1{}", "(".repeat(150), ")".repeat(150));
    let e = Condition::compile(&deep)
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert!(
        matches!(&e, Err(m) if m.contains("nested too deeply")),
        "{e:?}"
    );
    let long = vec!["1"; 3000].join(" + ");
    let e = Condition::compile(&format!("{long} > 0"))
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert!(matches!(&e, Err(m) if m.contains("too long")), "{e:?}");
}
