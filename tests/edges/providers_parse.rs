//! The pure Prometheus answer parser on recorded answers in `tests/fixtures/prometheus/`: Argo's conversion of
//! every result type, and every malformed or refused answer as an error in the user's terms.

use canaryd::engine::value::MetricValue;
use canaryd::providers::{ParsedResponse, ProviderError, ResultType, parse_query_response};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/prometheus/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn parse(name: &str) -> Result<ParsedResponse, ProviderError> {
    parse_query_response(&fixture(name))
}

fn numbers(name: &str) -> Vec<f64> {
    match parse(name).unwrap().value {
        MetricValue::Numbers(ns) => ns,
        other => panic!("{name}: expected numbers, got {other:?}"),
    }
}

#[test]
fn a_scalar_becomes_a_number() {
    let p = parse("scalar.json").unwrap();
    assert_eq!(p.result_type, ResultType::Scalar);
    assert_eq!(p.value, MetricValue::Number(0.97));
}

#[test]
fn a_vector_becomes_numbers_in_server_order_without_labels() {
    let p = parse("vector.json").unwrap();
    assert_eq!(p.result_type, ResultType::Vector);
    assert_eq!(p.value, MetricValue::Numbers(vec![0.5, 0.001, 2.0]));
}

#[test]
fn an_empty_vector_is_an_empty_list_not_nil() {
    assert_eq!(
        parse("vector_empty.json").unwrap().value,
        MetricValue::Numbers(vec![])
    );
}

#[test]
fn nan_and_infinities_are_numbers() {
    let ns = numbers("vector_special.json");
    assert_eq!(ns.len(), 3);
    assert!(ns[0].is_nan());
    assert_eq!(ns[1], f64::INFINITY);
    assert_eq!(ns[2], f64::NEG_INFINITY);
    assert_eq!(
        parse("vector_special.json").unwrap().value.render(),
        "[NaN,+Inf,-Inf]"
    );
}

#[test]
fn a_matrix_flattens_every_sample_of_every_series_in_order() {
    let p = parse("matrix.json").unwrap();
    assert_eq!(p.result_type, ResultType::Matrix);
    assert_eq!(p.value.render(), "[1,2,3,NaN]");
}

#[test]
fn warnings_and_infos_are_kept() {
    let p = parse("warnings.json").unwrap();
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].contains("might not be a counter"));
    assert_eq!(
        p.infos,
        vec!["PromQL info: ignoring stale series".to_string()]
    );
}

#[test]
fn a_string_result_is_an_error_that_shows_the_string() {
    let err = parse("string.json").unwrap_err();
    assert!(matches!(err, ProviderError::BadResponse(_)));
    let msg = err.to_string();
    assert!(
        msg.contains("string result") && msg.contains("hello"),
        "{msg}"
    );
}

#[test]
fn an_error_status_carries_prometheus_error_type_and_message() {
    let err = parse("error_bad_data.json").unwrap_err();
    assert_eq!(
        err,
        ProviderError::Prometheus {
            http_status: None,
            error_type: "bad_data".into(),
            message: "invalid parameter \"query\": 1:5: parse error: unexpected end of input"
                .into(),
        }
    );
    assert!(!err.is_transient());
    assert!(
        err.to_string()
            .contains("parse error: unexpected end of input")
    );
}

#[test]
fn a_prometheus_timeout_is_transient() {
    let err = parse("error_timeout.json").unwrap_err();
    assert!(err.is_transient(), "{err:?}");
}

#[test]
fn malformed_json_says_so() {
    for name in ["truncated.json", "html.txt"] {
        let err = parse(name).unwrap_err();
        assert!(matches!(err, ProviderError::BadResponse(_)), "{name}");
        assert!(err.to_string().contains("not valid JSON"), "{name}: {err}");
        assert!(!err.is_transient());
    }
    assert!(
        parse("html.txt")
            .unwrap_err()
            .to_string()
            .contains("502 Bad Gateway")
    );
}

#[test]
fn a_sample_that_is_not_a_number_is_a_malformed_answer() {
    let err = parse("not_a_number.json").unwrap_err().to_string();
    assert!(err.contains("\"fast\" is not a number"), "{err}");
}

#[test]
fn a_native_histogram_is_refused_with_a_hint() {
    let err = parse("histogram.json").unwrap_err().to_string();
    assert!(err.contains("native histogram"), "{err}");
    assert!(err.contains("histogram_quantile()"), "{err}");
}

#[test]
fn shapes_that_are_not_the_prometheus_api_are_errors() {
    for body in [
        r#"[]"#,
        r#"{"status":"success"}"#,
        r#"{"status":"pending","data":{}}"#,
        r#"{"status":"success","data":{"resultType":"table","result":[]}}"#,
        r#"{"status":"success","data":{"resultType":"scalar","result":[1]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[[1,"2"]]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,2]}]}}"#,
    ] {
        let err = parse_query_response(body.as_bytes()).unwrap_err();
        assert!(
            matches!(err, ProviderError::BadResponse(_)),
            "{body}: {err:?}"
        );
    }
}
