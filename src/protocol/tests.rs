//! The request parser against every kind of bad line, and the wire shape of events.

use super::*;

fn code(line: &str) -> ErrorCode {
    parse_request(line).unwrap_err().code
}

#[test]
fn parses_a_run_request() {
    let r = parse_request(r#"{"v":1,"op":"run","argv":["ls","-l"],"tags":{"s":"1"}}"#).unwrap();
    let Request::Run(run) = r else { panic!() };
    assert_eq!(run.argv.unwrap(), ["ls", "-l"]);
    assert_eq!(run.tags["s"], "1");
    assert_eq!(
        parse_request(r#"{"v":1,"op":"ping"}"#).unwrap(),
        Request::Ping
    );
}

#[test]
fn names_each_kind_of_bad_request() {
    assert_eq!(code("not json"), ErrorCode::MalformedJson);
    assert_eq!(code("[1,2]"), ErrorCode::MalformedJson);
    assert_eq!(
        code(r#"{"op":"run","argv":["ls"]}"#),
        ErrorCode::UnsupportedVersion
    );
    assert_eq!(
        code(r#"{"v":99,"op":"run","argv":["ls"]}"#),
        ErrorCode::UnsupportedVersion
    );
    assert_eq!(code(r#"{"v":1,"argv":["ls"]}"#), ErrorCode::UnknownOp);
    assert_eq!(code(r#"{"v":1,"op":"dance"}"#), ErrorCode::UnknownOp);
    assert_eq!(code(r#"{"v":1,"op":"run"}"#), ErrorCode::BadRequest);
    assert_eq!(
        code(r#"{"v":1,"op":"run","argv":"ls"}"#),
        ErrorCode::BadRequest
    );
    assert_eq!(
        code(r#"{"v":1,"op":"run","argv":[]}"#),
        ErrorCode::BadRequest
    );
    assert_eq!(
        code(r#"{"v":1,"op":"run","argv":["ls"],"shell":"ls"}"#),
        ErrorCode::BadRequest
    );
    assert_eq!(
        code(r#"{"v":1,"op":"run","argv":["ls"],"max_lines":-1}"#),
        ErrorCode::BadRequest
    );
    assert_eq!(
        code(r#"{"v":1,"op":"run","argv":["ls"],"colour":true}"#),
        ErrorCode::BadRequest
    );
    assert_eq!(
        code(r#"{"v":1,"op":"run","argv":["a\u0000b"]}"#),
        ErrorCode::BadRequest
    );
    assert_eq!(
        code(r#"{"v":1,"op":"run","shell":"ls","env":{"A=B":"c"}}"#),
        ErrorCode::BadRequest
    );
    for base_env in [r#"{"A=B":"c"}"#, r#"{"":"c"}"#, r#"{"A":"c\u0000d"}"#] {
        assert_eq!(
            code(&format!(
                r#"{{"v":1,"op":"run","shell":"ls","base_env":{base_env}}}"#
            )),
            ErrorCode::BadRequest,
            "{base_env}"
        );
    }
}

#[test]
fn run_ids_round_trip_and_are_validated() {
    let id = RunId::generate();
    assert_eq!(id.as_str().parse::<RunId>().unwrap(), id);
    for bad in [
        "",
        "../../etc/passwd",
        "20261121-101502-K3F9",
        "20261121-101502-k3f",
        "2026112a-101502-k3f9",
    ] {
        assert!(bad.parse::<RunId>().is_err(), "{bad}");
    }
}

#[test]
fn parses_the_live_ops() {
    let id = "20261121-101502-k3f7";
    let wait = format!(r#"{{"v":1,"op":"wait","id":"{id}","yield_ms":5,"new":true}}"#);
    let Request::Wait(wait) = parse_request(&wait).unwrap() else {
        panic!()
    };
    assert_eq!(
        (wait.yield_ms, wait.new, wait.caller),
        (Some(5), true, None)
    );
    let send = format!(r#"{{"v":1,"op":"send","id":"{id}","text":"y"}}"#);
    let Request::Send(send) = parse_request(&send).unwrap() else {
        panic!()
    };
    assert!(send.newline && !send.eof, "Enter by default");
    assert!(matches!(
        parse_request(&format!(r#"{{"v":1,"op":"follow","id":"{id}"}}"#)),
        Ok(Request::Follow(_))
    ));
    assert_eq!(
        parse_request(r#"{"v":1,"op":"ps"}"#).unwrap(),
        Request::Ps(PsRequest::default())
    );
    assert!(matches!(
        parse_request(&format!(
            r#"{{"v":1,"op":"kill","id":"{id}","signal":"INT"}}"#
        )),
        Ok(Request::Kill(_))
    ));
    let run = r#"{"v":1,"op":"run","shell":"x","stream":"raw","kill_on_disconnect":true}"#;
    let Request::Run(run) = parse_request(run).unwrap() else {
        panic!()
    };
    assert_eq!(run.stream, Some(StreamMode::Raw));
    for bad in [
        r#"{"v":1,"op":"run","shell":"x","yield_ms":0}"#,
        r#"{"v":1,"op":"run","shell":"x","yield_ms":9,"stream":"text"}"#,
        r#"{"v":1,"op":"wait","id":"x"}"#,
        r#"{"v":1,"op":"send","id":"20261121-101502-k3f7","txt":"y"}"#,
        r#"{"v":1,"op":"ps","all":true}"#,
    ] {
        assert_eq!(code(bad), ErrorCode::BadRequest, "{bad}");
    }
}

/// Every rule about a run request alone is held when the line is parsed, with the message the
/// client is shown; the daemon then only holds the request to its own caps.
#[test]
fn a_run_request_is_checked_whole_when_parsed() {
    let refused = |fields: &str| {
        let line = format!(r#"{{"v":1,"op":"run","shell":"x",{fields}}}"#);
        let error = parse_request(&line).unwrap_err();
        assert_eq!(error.code, ErrorCode::BadRequest, "{fields}");
        error.message
    };
    assert_eq!(
        refused(r#""cwd":"src""#),
        r#"cwd must be an absolute path, got "src""#
    );
    assert_eq!(refused(r#""max_spill":0"#), "max_spill must be at least 1");
    assert_eq!(
        refused(r#""max_tokens":0"#),
        "max_tokens must be at least 1"
    );
    assert_eq!(
        refused(r#""highlight":["x"],"no_highlights":true"#),
        "give highlight patterns or no_highlights, not both"
    );
    for fine in [
        r#""cwd":"/tmp""#,
        r#""max_spill":1,"max_tokens":1"#,
        r#""highlight":["x"],"no_highlights":false"#,
    ] {
        let line = format!(r#"{{"v":1,"op":"run","shell":"x",{fine}}}"#);
        assert!(parse_request(&line).is_ok(), "{fine}");
    }
}

#[test]
fn a_run_runs_its_argv_or_its_shell_line() {
    let program = |request: RunRequest| request.program();
    let argv = Some(vec!["ls".to_string(), "-l".to_string()]);
    let shell = Some("ls | wc".to_string());
    assert_eq!(
        program(RunRequest {
            argv: argv.clone(),
            ..RunRequest::default()
        }),
        Ok(vec!["ls".to_string(), "-l".to_string()])
    );
    assert_eq!(
        program(RunRequest {
            shell: shell.clone(),
            ..RunRequest::default()
        }),
        Ok(["sh", "-c", "ls | wc"].map(String::from).to_vec())
    );
    for (argv, shell) in [(None, None), (argv, shell), (Some(Vec::new()), None)] {
        let request = RunRequest {
            argv,
            shell,
            ..RunRequest::default()
        };
        assert!(program(request).is_err());
    }
}

#[test]
fn events_are_tagged_lines() {
    let line = Event::error(ErrorCode::BadCwd, "no such directory: /x").to_line();
    assert_eq!(
        line,
        "{\"type\":\"error\",\"code\":\"bad_cwd\",\"message\":\"no such directory: /x\"}\n"
    );
}

#[test]
fn signals_by_name_or_number() {
    use nix::sys::signal::Signal;
    let signal = |text: &str| text.parse::<KillSignal>().map(|KillSignal(s)| s);
    assert_eq!(signal("TERM").unwrap(), Signal::SIGTERM);
    assert_eq!(signal("sigint").unwrap(), Signal::SIGINT);
    assert_eq!(signal("9").unwrap(), Signal::SIGKILL);
    assert_eq!(signal(" hup ").unwrap(), Signal::SIGHUP);
    for bad in ["", "NOPE", "0", "999", "-1"] {
        assert!(signal(bad).is_err(), "{bad}");
    }
    let kill = r#"{"v":1,"op":"kill","id":"20261121-101502-k3f7","signal":9}"#;
    let Request::Kill(kill) = parse_request(kill).unwrap() else {
        panic!()
    };
    assert_eq!(kill.signal, Some(KillSignal(Signal::SIGKILL)));
    let bad = r#"{"v":1,"op":"kill","id":"20261121-101502-k3f7","signal":"NOPE"}"#;
    assert_eq!(code(bad), ErrorCode::BadRequest);
}

#[test]
fn history_filters_are_typed_at_the_edge() {
    let line = r#"{"v":1,"op":"history","status":"failed","since":"2026-11-21T10:00:00Z"}"#;
    let Request::History(history) = parse_request(line).unwrap() else {
        panic!()
    };
    assert_eq!(history.status, Some(StatusFilter::Failed));
    assert!(history.since.is_some());
    for bad in [
        r#"{"v":1,"op":"history","status":"fine"}"#,
        r#"{"v":1,"op":"history","since":"yesterday"}"#,
    ] {
        assert_eq!(code(bad), ErrorCode::BadRequest, "{bad}");
    }
}

#[test]
fn requests_round_trip_through_their_line() {
    for line in [
        r#"{"v":1,"op":"ping"}"#,
        r#"{"v":1,"op":"stats"}"#,
        r#"{"v":1,"op":"run","shell":"ls","tags":{"a":"b"},"cpu":0.5}"#,
        r#"{"v":1,"op":"kill","id":"20261121-101502-k3f7","signal":"INT"}"#,
        r#"{"v":1,"op":"history","status":"timed_out","limit":3}"#,
    ] {
        let request = parse_request(line).unwrap();
        assert_eq!(
            parse_request(&request.to_line()).unwrap(),
            request,
            "{line}"
        );
    }
    assert_eq!(code(r#"{"v":1,"op":"ping","x":1}"#), ErrorCode::BadRequest);
}

/// A line with its top-level fields in the given order (`rotate` places `v` among them).
fn line_in_order(request: &Request, rotate: usize) -> String {
    let value: serde_json::Value = serde_json::from_str(&request.to_line()).unwrap();
    let serde_json::Value::Object(fields) = value else {
        panic!("a request line is an object")
    };
    let mut fields: Vec<(String, serde_json::Value)> = fields.into_iter().collect();
    let len = fields.len();
    fields.rotate_left(rotate % len);
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", serde_json::Value::from(k.as_str())))
        .collect();
    format!("{{{}}}", body.join(","))
}

proptest::proptest! {
    /// A run request, whatever its strings hold (quotes, escapes, other scripts, a variable or
    /// tag named `v`) and wherever the envelope's `v` stands among its fields, reads back as it
    /// was sent: only the top level's `v` is the envelope's.
    #[test]
    fn run_requests_read_back_as_sent(
        program in "[a-z]{1,8}",
        args in proptest::collection::vec("\\PC{0,12}", 0..4),
        env in proptest::collection::btree_map("v|op|[a-zA-Z_]{1,6}", "\\PC{0,12}", 0..5),
        tags in proptest::collection::btree_map("v|op|[a-z]{1,4}", "\\PC{0,8}", 0..3),
        max_lines in proptest::option::of(1u64..100_000),
        rotate in 0usize..16,
    ) {
        let request = Request::Run(Box::new(RunRequest {
            argv: Some([vec![program], args].concat()),
            env,
            tags,
            max_lines,
            ..RunRequest::default()
        }));
        let line = line_in_order(&request, rotate);
        proptest::prop_assert_eq!(parse_request(&line).unwrap(), request, "{}", line);
    }
}
