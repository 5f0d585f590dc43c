//! The engine's own JSON (on its way out: the engine now reads and writes JSON with serde_json)
//! against serde_json as an oracle.

use captchaai_engine::json::Json;
use proptest::prelude::*;
use serde_json::Value;

/// Converts our value to serde_json's for comparison.
fn to_serde(json: &Json) -> Value {
    serde_json::from_str(&json.to_text()).expect("our output is valid JSON")
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[\\x00-\\x1f\"\\\\/\\u{7f}\\u{2028}\\u{10000}]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn serde_json_output_parses_to_the_same_value_and_prints_back(value in arbitrary_json()) {
        let compact = serde_json::to_string(&value).unwrap();
        let ours = Json::parse(&compact).unwrap();
        // Numbers keep their literal text, so equal bytes mean equal values.
        prop_assert_eq!(ours.to_text(), compact, "same bytes as serde_json for the same (sorted) value");
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        prop_assert_eq!(Json::parse(&pretty).unwrap().to_pretty(), pretty);
    }

    #[test]
    fn acceptance_matches_serde_json(text in "[\\[\\]{}\",:0-9a-z.eE+\\-\\\\ ]{0,24}") {
        let ours = Json::parse(&text);
        let theirs = serde_json::from_str::<Value>(&text);
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) => prop_assert_eq!(&to_serde(a), b),
            (Err(_), Ok(_)) => {
                // We reject duplicate keys; serde_json keeps the last one.
                prop_assert!(text.contains('{'), "rejected valid JSON {:?}", text);
            }
            (Ok(a), Err(e)) => prop_assert!(
                a.to_text().contains('e') || a.to_text().contains('E'),
                "accepted {:?} that serde_json rejects ({}): only out-of-range floats may differ", text, e
            ),
            (Err(_), Err(_)) => {}
        }
    }

}

#[test]
fn json_edge_cases() {
    for good in ["0", "-0", "1.5e-7", "\"\\ud83d\\ude00\"", "[]", "{}", " [ 1 , { \"a\" : null } ] ", "\"\\u00e9\\/\""]
    {
        let ours = Json::parse(good).unwrap_or_else(|e| panic!("{good}: {e}"));
        assert_eq!(to_serde(&ours), serde_json::from_str::<Value>(good).unwrap(), "{good}");
    }
    for bad in [
        "",
        "01",
        "1.",
        ".5",
        "-",
        "1e",
        "\"\\ud83d\"",
        "\"a\nb\"",
        "[1,]",
        "{\"a\":1,}",
        "tru",
        "nul",
        "[1 2]",
        "{\"a\" 1}",
        "\"\\x\"",
    ] {
        assert!(Json::parse(bad).is_err(), "accepted {bad:?}");
    }
    assert!(Json::parse(r#"{"a":1,"a":2}"#).is_err(), "duplicate keys are rejected");
    let deep = "[".repeat(65) + &"]".repeat(65);
    assert!(Json::parse(&deep).is_err(), "nesting is bounded");
    let ok_deep = "[".repeat(60) + &"]".repeat(60);
    assert!(Json::parse(&ok_deep).is_ok());
    assert!(Json::parse("[1,").unwrap_err().eof, "an early end is reported as such");
    assert_eq!(Json::parse("18446744073709551615").unwrap().as_u64(), Some(u64::MAX));
    assert_eq!(Json::parse("18446744073709551616").unwrap().as_u64(), None);
    assert_eq!(Json::parse("0.3").unwrap().as_f64(), Some(0.3));
    assert_eq!(Json::parse("12.75").unwrap().as_f64(), Some(12.75));
    assert_eq!(Json::parse("-2.5E2").unwrap().as_f64(), Some(-250.0));
}
