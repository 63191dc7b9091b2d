//! The condition table: conditions Argo Rollouts users write (from Argo's docs and examples) and one case per
//! construct and per error class, each against a value written as `canaryd eval --result` reads it.

use canaryd::cli::eval::parse_result;
use canaryd::engine::condition::Condition;

#[derive(Debug, Clone, Copy)]
enum Expect {
    True,
    False,
    /// Evaluation fails; the message contains this text.
    Fails(&'static str),
    /// Compilation fails; the message contains this text.
    Rejected(&'static str),
}

use Expect::{Fails, False, Rejected, True};

const SERVICE_APDEX: &str = r#"{"service_apdex": {"values": {"values": [{"id": "a", "value": "9950"}, {"id": "b", "value": "9901"}]}}}"#;
const SERVICE_APDEX_LOW: &str = r#"{"service_apdex": {"values": {"values": [{"id": "a", "value": "9950"}, {"id": "b", "value": "9800"}]}}}"#;
const CLOUDWATCH: &str = r#"[{"Id": "rate", "Values": [0.001, 0.002, 0.0, 0.005, 0.01]}]"#;
const CLOUDWATCH_SHORT: &str = r#"[{"Id": "rate", "Values": [0.001, 0.002]}]"#;
const CLOUDWATCH_HIGH: &str = r#"[{"Id": "rate", "Values": [0.001, 0.002, 0.0, 0.5, 0.01]}]"#;
const WEB: &str = r#"{"status": "ok", "successRate": 0.97, "code": 200, "ok": true, "tags": ["canary", "v2"], "nested": {"a": {"b": 3}}, "none": null}"#;

#[rustfmt::skip]
const CASES: &[(&str, &str, Expect)] = &[
    // Argo Rollouts' documented conditions.
    ("result[0] >= 0.95", "[0.97]", True),
    ("result[0] >= 0.95", "[0.95]", True),
    ("result[0] >= 0.95", "[0.9]", False),
    ("result[0] >= 0.95", "[0.97, 0.1]", True),
    ("result[0] >= 0.95", "[NaN]", False),
    ("result[0] >= 0.95", "[Infinity]", True),
    ("result[0] >= 0.95", "[-Infinity]", False),
    ("result[0] >= 0.95", "[]", Fails("result is an array of 0 numbers; result[0] is out of range — guard with len(result) > 0")),
    ("result[0] >= 0.95", "null", Fails("result is nil")),
    ("result[0] >= 0.95", "0.97", Fails("cannot index the number 0.97")),
    ("result[0] >= 0.99", "[0.995]", True),
    ("result[0] <= 0.95", "[0.5]", True),
    ("result[0] <= 0.01", "[0.02]", False),
    ("result <= 0.01", "0.005", True),
    ("result <= 0.01", "0.5", False),
    ("result <= 0.01", "[0.005]", Fails("result is an array of 1 number")),
    ("result >= 0.95", "0.95", True),
    ("all(result, # < 1000)", "[1, 2, 999.9]", True),
    ("all(result, # < 1000)", "[1, 2000, 3]", False),
    ("all(result, # < 1000)", "[]", True),
    ("all(result, # < 1000)", "[NaN]", False),
    ("all(result, # < 1000)", "5", Fails("all() needs an array, but result is the number 5")),
    ("all(result, # < 1000)", "null", Fails("all() needs an array, but result is nil")),
    ("default(result, 0) < 10", "null", True),
    ("default(result, 0) < 10", "3", True),
    ("default(result, 0) < 10", "30", False),
    ("default(result, 0) > 2", "null", False),
    ("default(result, 0) > 2", "5", True),
    ("result.successRate >= 0.95", WEB, True),
    ("result.successRate >= 0.98", WEB, False),
    ("result == true", "true", True),
    ("result == true", "false", False),
    ("result == 'true'", r#""true""#, True),
    ("result == 'true'", r#""false""#, False),
    ("result == 'It worked!'", r#""It worked!""#, True),
    ("result == \"It worked!\"", r#""It failed""#, False),
    ("len(result[0].Values) >= 5 and all(result[0].Values, {# <= 0.01})", CLOUDWATCH, True),
    ("len(result[0].Values) >= 5 and all(result[0].Values, {# <= 0.01})", CLOUDWATCH_SHORT, False),
    ("len(result[0].Values) >= 5 and all(result[0].Values, {# <= 0.01})", CLOUDWATCH_HIGH, False),
    ("all(result.service_apdex.values.values, {asFloat(.value) >= 9900})", SERVICE_APDEX, True),
    ("all(result.service_apdex.values.values, {asFloat(.value) >= 9900})", SERVICE_APDEX_LOW, False),
    ("results[0] >= 90.000000", "[95]", Rejected("column 1: unknown name `results` (the value is called `result`)")),
    ("len(result) == 0 || result[0] < 0.05", "[]", True),
    ("len(result) == 0 || result[0] < 0.05", "[0.01]", True),
    ("len(result) == 0 || result[0] < 0.05", "[0.5]", False),
    ("isNaN(result[0]) || result[0] >= 0.95", "[NaN]", True),
    ("isNaN(result[0]) || result[0] >= 0.95", "[0.5]", False),
    ("!isNaN(result[0]) && result[0] >= 0.95", "[NaN]", False),
    // Literals.
    ("true", "null", True),
    ("false", "null", False),
    ("1 == 1.0", "null", True),
    ("0x10 == 16", "null", True),
    ("1_000 == 1000", "null", True),
    ("1e3 == 1000", "null", True),
    ("2.5e-1 == 0.25", "null", True),
    ("'it''s' == 'x'", "null", Rejected("column")),
    ("'a\\'b' == \"a'b\"", "null", True),
    ("\"tab\\there\" contains '\\t'", "null", True),
    ("'\\u00e9' == 'é'", "null", True),
    ("nil == nil", "null", True),
    ("result == nil", "null", True),
    ("result == nil", "0", False),
    ("result != nil", "[1]", True),
    ("result != nil", r#"{"a": 1}"#, True),
    // Numbers: ints and floats mix, NaN compares like Go, infinities order normally.
    ("result == 1", "1.0", True),
    ("result == 1.0", "1", True),
    ("result != 1", "1", False),
    ("result == result", "NaN", False),
    ("result != result", "NaN", True),
    ("result < 1", "NaN", False),
    ("result > 1", "NaN", False),
    ("result <= 1 || result >= 1", "NaN", False),
    ("result > 1e308", "Infinity", True),
    ("result < -1e308", "-Infinity", True),
    ("result == result", "Infinity", True),
    ("result[-1] == 3", "[1, 2, 3]", True),
    ("result[-3] == 1", "[1, 2, 3]", True),
    ("result[-4] == 1", "[1, 2, 3]", Fails("result[-4] is out of range — guard with len(result) >= 4")),
    ("result[1] > 0", "[1]", Fails("result is an array of 1 number; result[1] is out of range — guard with len(result) > 1")),
    ("result[0.5] > 0", "[1]", Fails("an array index must be a whole number")),
    ("result['a'] > 0", "[1]", Fails("an array index must be a whole number")),
    // Arithmetic.
    ("1 + 2 * 3 == 7", "null", True),
    ("(1 + 2) * 3 == 9", "null", True),
    ("7 / 2 == 3.5", "null", True),
    ("7 % 3 == 1", "null", True),
    ("2 ** 10 == 1024", "null", True),
    ("2 ^ 3 == 8", "null", True),
    ("2 ** 3 ** 2 == 512", "null", True),
    ("-2 ** 2 == -4", "null", True),
    ("-result == -5", "5", True),
    ("+result == 5", "5", True),
    ("result * 100 >= 95", "0.97", True),
    ("result[0] / result[1] < 0.01", "[1, 200]", True),
    ("result[0] - result[1] > 0", "[3, 5]", False),
    ("1 / 0 > 1e308", "null", True),
    ("result % 2 == 0", "4", True),
    ("result % 2 == 0", "4.5", Fails("`%` needs whole numbers")),
    ("result % 0 == 0", "4", Fails("divides by zero")),
    ("'a' + 'b' == 'ab'", "null", True),
    ("result + 1 > 0", r#""x""#, Fails("cannot compute `result + 1`")),
    ("result + 1 > 0", "[1]", Fails("compute one element (result[0] + 1)")),
    ("result * 2 > 0", "null", Fails("there is no value")),
    ("-result > 0", r#""x""#, Fails("unary `-` needs a number")),
    // Comparisons and their errors.
    ("result > 1", "[2, 3]", Fails("result is an array of 2 numbers and 1 is the number 1 — compare one element (result[0] > 1) or check every element (all(result, # > 1))")),
    ("1 < result", "[2]", Fails("check every element (all(result, 1 < #))")),
    ("result > 'a'", "1", Fails("cannot compare `result > 'a'`: result is the number 1 and 'a' is the string \"a\"")),
    ("result == 'a'", "1", Fails("cannot compare the number 1 with the string \"a\"")),
    ("result == 1", r#""1""#, Fails("cannot compare the string \"1\" with the number 1")),
    ("result == true", "1", Fails("cannot compare the number 1 with the boolean true")),
    ("result == 1", "[1]", Fails("compare elements")),
    ("result == 'true'", "true", Fails("cannot compare the boolean true with the string \"true\"")),
    // More `==` across kinds: an error only where expr-lang fixes both kinds when it compiles (from result's type);
    // where a side is interface{} (a JSON member, default(...), ??) the values are simply not equal.
    ("len(result) == 'a'", "[1]", Fails("cannot compare")),
    ("default(result, 0) == 'x'", "5", False),
    ("result.a == 10", r#"{"a": "10"}"#, False),
    ("result.a != 10", r#"{"a": "10"}"#, True),
    ("result.code == true", WEB, False),
    ("result.tags[0] == 1", WEB, False),
    ("any(result.tags, # == 1)", WEB, False),
    ("(result.code ?? 'x') == 'x'", WEB, False),
    ("(result.code ?? 'x') == 200", WEB, True),
    ("result.code < 'a'", WEB, Fails("cannot compare `result.code < 'a'`")),
    ("default(result, 0) >= 0", "[]", Fails("cannot compare")),
    ("'abc' < 'abd'", "null", True),
    ("result >= 'm'", r#""zebra""#, True),
    ("result > 0", "null", Fails("nil (no value)")),
    ("result.code == 200", WEB, True),
    ("result.status != 'ok'", WEB, False),
    // `==` across kinds, as expr-lang decides it: an error only where both sides' types are fixed by
    // `result`'s Go type when the condition is checked; a side known only when it runs (default(...), a JSON
    // member, `??`, an element of a JSON array) is simply not equal to a value of another kind.
    ("default(result, 0) == 0", "[]", False),
    ("default(result, 0) != 0", "[]", True),
    ("default(result, 0) == 0", "null", True),
    ("default(result, 0) == 'a'", "1", False),
    ("result.status == 1", WEB, False),
    ("result.status != 1", WEB, True),
    ("result.code == '200'", WEB, False),
    ("result.ok == 'true'", WEB, False),
    ("result.tags == 'canary'", WEB, False),
    ("result.nested == 3", WEB, False),
    ("(result.missing ?? 0) == 'x'", WEB, False),
    ("(result ?? 0) == 'x'", "1", False),
    ("result[0] == 'a'", r#"[1, "a"]"#, False),
    ("result[1] == 'a'", r#"[1, "a"]"#, True),
    ("any(result.items, .n == 'a')", r#"{"items": [{"n": 1}, {"n": "a"}]}"#, True),
    ("any(result, # == 'a')", r#"[1, "a"]"#, True),
    ("any(result, # == 'a')", "[1]", Fails("cannot compare the number 1 with the string \"a\"")),
    ("result[0] == 'a'", "[1]", Fails("cannot compare the number 1 with the string \"a\"")),
    ("asFloat(result) == '1.1'", r#""1.1""#, Fails("cannot compare the number 1.1 with the string \"1.1\"")),
    ("len(result) == '1'", "[1]", Fails("cannot compare")),
    ("result == 10", "[10]", Fails("compare elements")),
    ("result == nil", "[]", False),
    ("result != nil", "[]", True),
    ("nil == result", "1", False),
    ("result.status > 1", WEB, Fails("cannot compare `result.status > 1`")),
    ("default(result, 0) < 1", "[]", Fails("cannot compare")),
    // Arrays compare element by element, objects deeply (expr-lang's runtime equality).
    ("result == [1, 2]", "[1, 2]", True),
    ("result == [1, 2]", "[1, 3]", False),
    ("result != [1]", "[1, 2]", True),
    ("result.tags == ['canary', 'v2']", WEB, True),
    ("result.nested == result.nested", WEB, True),
    ("result.a == result.b", r#"{"a": {"x": [1, 2.0]}, "b": {"x": [1.0, 2]}}"#, True),
    ("result.a == result.b", r#"{"a": {"x": 1}, "b": {"x": 1, "y": 2}}"#, False),
    ("[1, 'a'] == [1, 'a']", "null", True),
    // Logic, words and symbols, short-circuit.
    ("true && false", "null", False),
    ("true and true", "null", True),
    ("false || true", "null", True),
    ("false or false", "null", False),
    ("!false", "null", True),
    ("not false", "null", True),
    ("not true or true", "null", True),
    ("!(1 > 2)", "null", True),
    ("false && result[5] > 1", "[]", False),
    ("true || result[5] > 1", "[]", True),
    ("result && true", "1", Fails("`&&` needs true or false, but in `result && true` it got the number 1")),
    ("true || 1", "null", True),
    ("false || 1", "null", Fails("`||` needs true or false")),
    ("!result", "1", Fails("`!`/`not` needs true or false, but result is the number 1")),
    ("result.ok && result.code == 200", WEB, True),
    // Membership and strings.
    ("2 in result", "[1, 2, 3]", True),
    ("5 in result", "[1, 2, 3]", False),
    ("5 not in result", "[1, 2, 3]", True),
    ("'canary' in result.tags", WEB, True),
    ("'stable' not in result.tags", WEB, True),
    ("'status' in result", WEB, True),
    ("'missing' in result", WEB, False),
    ("result in [200, 201]", "201", True),
    ("result in ['a', 1]", r#""a""#, True),
    ("1 in result", "1", Fails("`in` needs an array")),
    ("1 in result", "null", Fails("`in` needs an array")),
    ("1 in result.missing", WEB, False),
    ("'a' in result", "[1, 2]", Fails("cannot look for the string \"a\" in `'a' in result`")),
    ("nil in result", "[1, 2]", False),
    ("'a' in default(result, [])", "[1]", False),
    ("'a' in result", r#"[1, "a"]"#, True),
    ("[1, 2] in result.m", r#"{"m": [[1, 2], [3]]}"#, True),
    ("result.status matches '^o.$'", WEB, True),
    ("result.status matches '^x'", WEB, False),
    ("result.status not matches '^x'", WEB, True),
    ("result matches '['", r#""x""#, Rejected("invalid regular expression")),
    ("result matches result", r#""x""#, True),
    ("'abc' matches result", r#""(""#, Fails("invalid regular expression")),
    ("result contains 'work'", r#""It worked!""#, True),
    ("result not contains 'fail'", r#""It worked!""#, True),
    ("result startsWith 'It'", r#""It worked!""#, True),
    ("result endsWith '!'", r#""It worked!""#, True),
    ("result endsWith '?'", r#""It worked!""#, False),
    ("result contains 'a'", "1", Fails("`contains` works on strings")),
    // Member access and indexing into JSON.
    ("result.nested.a.b == 3", WEB, True),
    ("result['nested']['a']['b'] == 3", WEB, True),
    ("result.missing == nil", WEB, True),
    ("result.none == nil", WEB, True),
    ("result.missing.b == 1", WEB, Fails("result.missing is nil (no value), so `result.missing.b` does not exist")),
    ("result.missing?.b == nil", WEB, True),
    ("result.tags[1] == 'v2'", WEB, True),
    ("result.tags[-1] == 'v2'", WEB, True),
    ("result.tags[2] == 'v2'", WEB, Fails("result.tags is an array of 2 values; result.tags[2] is out of range")),
    ("result.code.x == 1", WEB, Fails("result.code is the number 200, which has no field `x`")),
    ("result.a == 1", "[1]", Fails("result is an array of 1 number, which has no field `a`")),
    ("result.a == 1", "null", Fails("result is nil")),
    ("result[0] == 'x'", r#""xyz""#, True),
    ("result.missing ?? 5 == 5", WEB, True),
    ("result.code ?? 5 == 200", WEB, True),
    // Conditional.
    ("result > 1 ? true : false", "2", True),
    ("(len(result) > 0 ? result[0] : 0) < 1", "[]", True),
    ("result ? 1 : 2", "1", Fails("`?:` needs true or false")),
    // Predicates.
    ("any(result, # > 2)", "[1, 2, 3]", True),
    ("any(result, # > 3)", "[1, 2, 3]", False),
    ("none(result, # > 3)", "[1, 2, 3]", True),
    ("none(result, {# == 2})", "[1, 2, 3]", False),
    ("one(result, # == 2)", "[1, 2, 3]", True),
    ("one(result, # > 1)", "[1, 2, 3]", False),
    ("count(result, # > 1) == 2", "[1, 2, 3]", True),
    ("len(filter(result, # > 1)) == 2", "[1, 2, 3]", True),
    ("sum(map(result, # * 2)) == 12", "[1, 2, 3]", True),
    ("all(map(result, # * 10), # >= 10)", "[1, 2, 3]", True),
    ("all(result, any(result, # > 2))", "[1, 3]", True),
    ("all(result.items, .ok)", r#"{"items": [{"ok": true}, {"ok": true}]}"#, True),
    ("any(result.items, {.ok == false})", r#"{"items": [{"ok": true}, {"ok": false}]}"#, True),
    ("all(result.items, #.ok)", r#"{"items": [{"ok": true}, {"ok": 1}]}"#, Fails("the predicate `#.ok` in all() must give true or false, but for an object with fields ok it gives the number 1")),
    ("all(result, # * 2)", "[1]", Fails("must give true or false")),
    ("all(result, 1000 > #)", "[1, 999]", True),
    ("all(result, 1000 > #)", "[1, 1000]", False),
    ("any(result, # != #)", "[1, NaN]", True),
    ("all(result, # + 1)", "[1]", Fails("for the number 1 it gives the number 2")),
    ("all(result, .x > 1)", "[1]", Fails("# is the number 1, which has no field `x`")),
    ("all(result, # > 0) && count(result, isNaN(#)) == 0", "[1, NaN]", False),
    ("all(result, # > 0)", r#"[1, "a"]"#, Fails("cannot compare `# > 0`")),
    ("# > 1", "[1]", Rejected("`#` is the element inside a predicate")),
    (".x > 1", "[1]", Rejected("`.x` is a field of the element inside a predicate")),
    ("all(result)", "[1]", Rejected("all() takes 2 arguments, but got 1")),
    ("len({# > 1}) > 0", "[1]", Rejected("len() does not take a `{ ... }` predicate")),
    ("{# > 1}", "[1]", Rejected("`{` starts a predicate")),
    // Functions.
    ("len(result) == 3", "[1, 2, 3]", True),
    ("len(result) == 0", "[]", True),
    ("len(result) == 5", r#""hello""#, True),
    ("len(result) == 7", WEB, True),
    ("len(result) == 0", "null", Fails("len() needs an array, a string or an object, but result is nil")),
    ("sum(result) == 6", "[1, 2, 3]", True),
    ("sum(result) == 0", "[]", True),
    ("mean(result) == 2", "[1, 2, 3]", True),
    ("mean(result) < 1", "[]", Fails("mean() of an empty array has no value — guard with len(result) > 0")),
    ("median(result) == 2", "[3, 1, 2]", True),
    ("median(result) == 2.5", "[4, 1, 2, 3]", True),
    ("min(result) == 1", "[3, 1, 2]", True),
    ("max(result) == 3", "[3, 1, 2]", True),
    ("max(1, 5, 2) == 5", "null", True),
    ("min(result, 0) == 0", "[3, 1]", True),
    ("max(result) > 0", "[]", Fails("max() of an empty array has no value")),
    ("sum(result) > 0", r#"["a"]"#, Fails("sum() needs an array of numbers, but element 0 of result is the string \"a\"")),
    ("abs(result) == 2", "-2", True),
    ("ceil(result) == 2", "1.2", True),
    ("floor(result) == 1", "1.8", True),
    ("round(result) == 3", "2.5", True),
    ("round(result) == -3", "-2.5", True),
    ("abs(result) > 1", "[1]", Fails("abs() needs a number, but result is an array of 1 number — pick one element")),
    ("int(result) == 2", "2.9", True),
    ("int('12') == 12", "null", True),
    ("int('1.5') == 1", "null", Fails("int(): \"1.5\" is not a whole number")),
    ("float('1.5') == 1.5", "null", True),
    ("float(result) == 3", "3", True),
    ("string(result) == '0.5'", "0.5", True),
    ("string(result) == '3'", "3", True),
    ("string(result) == 'NaN'", "NaN", True),
    ("string(result) == 'true'", "true", True),
    ("string(len(result)) == '2'", "[1, 2]", True),
    // Argo's helpers.
    ("isNaN(result)", "NaN", True),
    ("isNaN(result)", "1", False),
    ("isNaN(result)", "[NaN]", Fails("isNaN() needs a number, but result is an array of 1 number — pick one element, e.g. isNaN(result[0])")),
    ("isNaN(result)", r#""NaN""#, Fails("isNaN() needs a number")),
    ("isInf(result)", "-Infinity", True),
    ("isInf(result[0])", "[1e308]", False),
    ("asInt(result) == 3", r#""3""#, True),
    ("asInt(result) == 3", "3.7", True),
    ("asInt(\"1.1\") == 1", "null", Fails("asInt(): \"1.1\" is not a whole number")),
    ("asInt(result) == 1", "true", Fails("asInt() needs a finite number or a string")),
    ("asFloat(result) == 1.5", r#""1.5""#, True),
    ("asFloat(result) >= 0.95", r#""0.97""#, True),
    ("asFloat(result) > 0", r#""abc""#, Fails("asFloat(): \"abc\" is not a number")),
    ("isNil(result)", "null", True),
    ("isNil(result)", "[]", False),
    ("isNil(result)", "0", False),
    ("isNil(result.a)", r#"{"b": 1}"#, False),
    ("default(result, 5) == 5", "null", True),
    ("default(result.x, 5) == 5", "null", Fails("result is nil")),
    ("default(result, []) == nil", "[1]", False),
    ("len(default(result, [])) == 0", "null", True),
    // Outcomes that are not booleans.
    ("1", "null", Fails("the condition must give true or false, but it gives the number 1")),
    ("result", "0.5", Fails("the condition must give true or false, but it gives the number 0.5 — compare it")),
    ("result", "true", True),
    ("result.ok", WEB, True),
    ("result.status", WEB, Fails("it gives the string \"ok\"")),
    ("nil", "null", Fails("it gives nil")),
    ("filter(result, # > 1)", "[1, 2]", Fails("it gives an array of 1 value")),
    // Names and syntax checked at compile time.
    ("a > 1", "1", Rejected("column 1: unknown name `a` (the value is called `result`)")),
    ("result > 1 && results[0] > 1", "1", Rejected("column 15: unknown name `results`")),
    ("lenn(result) > 0", "1", Rejected("unknown function `lenn`")),
    ("len > 0", "1", Rejected("`len` is a function")),
    ("result(1)", "1", Rejected("result is a value, not a function")),
    ("len(result, 1) > 0", "1", Rejected("len() takes 1 argument, but got 2")),
    ("default(result) > 0", "1", Rejected("default() takes 2 arguments, but got 1")),
    ("result >", "1", Rejected("column 9: the condition ends too early")),
    ("result = 1", "1", Rejected("use `==` to compare")),
    ("result[0 >= 1", "1", Rejected("expected `]`")),
    ("", "1", Rejected("the condition is empty")),
    ("   ", "1", Rejected("the condition is empty")),
    ("result @ 1", "1", Rejected("unexpected character `@`")),
    ("1..3", "1", Rejected("ranges are not supported")),
    ("result[1:2]", "[1]", Rejected("slices")),
    ("result.", "1", Rejected("expected a field name")),
    ("'abc", "1", Rejected("string is not closed")),
    ("result\n  && )", "1", Rejected("line 2, column 6")),
];

fn outcome(condition: &str, value: &str) -> Result<Result<bool, String>, String> {
    let value = parse_result(value).map_err(|e| format!("bad test value: {e}"))?;
    let compiled = Condition::compile(condition).map_err(|e| e.to_string())?;
    Ok(compiled.evaluate(&value).map_err(|e| e.to_string()))
}

#[test]
fn the_table_has_at_least_150_cases() {
    assert!(CASES.len() >= 150, "only {} cases", CASES.len());
}

#[test]
fn every_condition_in_the_table_gives_its_expected_outcome() {
    let mut wrong = Vec::new();
    for (condition, value, expect) in CASES {
        let got = outcome(condition, value);
        let ok = match (expect, &got) {
            (True, Ok(Ok(true))) | (False, Ok(Ok(false))) => true,
            (Fails(text), Ok(Err(message))) => message.contains(text),
            (Rejected(text), Err(message)) => message.contains(text),
            _ => false,
        };
        if !ok {
            wrong.push(format!(
                "{condition:?} with {value}: expected {expect:?}, got {got:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn a_compiled_condition_gives_the_same_answer_every_time() {
    let c =
        Condition::compile("len(result) > 0 && all(result, # < 1000)").map_err(|e| e.to_string());
    let Ok(c) = c else {
        panic!("{c:?}");
    };
    let value = canaryd::engine::value::MetricValue::Numbers(vec![1.0, 2.0]);
    for _ in 0..3 {
        assert_eq!(c.evaluate(&value), Ok(true));
    }
    assert_eq!(c.source(), "len(result) > 0 && all(result, # < 1000)");
}
