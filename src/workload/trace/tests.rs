use super::*;

fn parse(text: &str) -> Result<Trace, TraceError> {
    read(text.as_bytes(), "t")
}

#[test]
fn datetimes_parse_to_nanoseconds_since_1970() {
    // Mutation: drop the leap-year day in days_in_month and 2024-02-29 is refused.
    assert_eq!(parse_datetime_ns("1970-01-01 00:00:00"), Some(0));
    assert_eq!(parse_datetime_ns("2023-11-16 18:15:46.6805900"), Some(1_700_158_546_680_590_000));
    assert_eq!(parse_datetime_ns("2023-11-16T18:15:46.68059Z"), Some(1_700_158_546_680_590_000));
    assert_eq!(parse_datetime_ns("2023-11-16 19:15:46.68059+01:00"), Some(1_700_158_546_680_590_000));
    assert!(parse_datetime_ns("2024-02-29 00:00:00").is_some());
    for bad in ["2023-02-29 00:00:00", "2023-11-16", "2023-11-16 25:00:00", "16/11/2023 18:15:46", "2023-11-16 18:15:46.x", ""] {
        assert_eq!(parse_datetime_ns(bad), None, "{bad}");
    }
}

#[test]
fn azure_traces_count_from_the_earliest_row() {
    let t =
        parse("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5000000,4808,10\n2023-11-16 18:15:48.0000000,100,2\n").unwrap();
    assert_eq!(t.format, TraceFormat::AzureCsv);
    let got: Vec<(f64, u64, u64)> = t.requests.iter().map(|r| (r.arrival_s, r.input_tokens, r.output_tokens)).collect();
    assert_eq!(got, vec![(0.0, 4808, 10), (1.5, 100, 2)]);
    let e = parse("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,0,10\n").unwrap_err();
    assert!(e.message.contains("line 2: field `ContextTokens`: 0 is not between 1"), "{e}");
    let e = parse("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,10\n").unwrap_err();
    assert!(e.message.contains("line 2: field `TIMESTAMP` is `yesterday`; expected a date and time"), "{e}");
}

#[test]
fn the_tools_csv_tolerates_bom_quotes_and_extra_columns() {
    let t = parse("\u{feff}\"arrival_s\",\"input_tokens\",\"output_tokens\",note\n0.5,100,10,x\n").unwrap();
    assert_eq!((t.format, t.requests.len(), t.ignored_columns.clone()), (TraceFormat::ToolCsv, 1, vec!["note".to_string()]));
}

#[test]
fn unknown_formats_name_what_was_found_and_what_is_accepted() {
    let e = parse("time,prompt,completion\n1,2,3\n").unwrap_err();
    assert!(e.message.contains("the header row has columns `time`, `prompt`, `completion`"), "{e}");
    assert!(e.message.contains("Mooncake") && e.message.contains("TIMESTAMP,ContextTokens"), "{e}");
    let e = parse("{\"t\": 1, \"in\": 2}\n").unwrap_err();
    assert!(e.message.contains("the first object has keys `in`, `t`"), "{e}");
}

#[test]
fn long_lines_are_refused() {
    // Mutation: drop the `take` in next_line and a 2 MiB line is read whole (and parsed).
    let line = format!("{{\"arrival_s\": 0, \"input_tokens\": 5, \"output_tokens\": 5, \"pad\": \"{}\"}}\n", "x".repeat(2 << 20));
    let e = parse(&line).unwrap_err();
    assert!(e.message.contains("line 1 is longer than 1048576 bytes"), "{e}");
}

fn mooncake(ids: &[&str]) -> String {
    ids.iter()
        .enumerate()
        .map(|(i, h)| format!("{{\"timestamp\": {}, \"input_length\": 1500, \"output_length\": 8, \"hash_ids\": [{h}]}}\n", i * 100))
        .collect()
}

#[test]
fn mooncake_hash_ids_become_prefix_groups() {
    // Requests 0 and 1 share three blocks, request 2 shares only the first (a prefix of the
    // same chain: one group), request 3 nothing. Mutation: take the path's whole length instead
    // of its shared run and request 3 gets a group, request 2 a 1500-token prefix.
    let groups = |t: &Trace| t.requests.iter().map(|r| (r.prefix_group, r.prefix_len)).collect::<Vec<_>>();
    let t = parse(&mooncake(&["1, 2, 3", "1, 2, 3", "1, 9, 10", "7, 8"])).unwrap();
    assert_eq!(t.format, TraceFormat::MooncakeJsonLines);
    assert_eq!(t.requests.iter().map(|r| r.arrival_s).collect::<Vec<_>>(), vec![0.0, 0.1, 0.2, 0.3]);
    assert_eq!(groups(&t), vec![(Some(0), 1500), (Some(0), 1500), (Some(0), 512), (None, 0)]);
    // Turns of a conversation extend one chain; branches after a common block are groups of
    // their own. Mutation: always join the ancestor's group and both branches share group 0.
    let t = parse(&mooncake(&["1, 2", "1, 2, 3", "1, 2, 3", "1, 5", "1, 5"])).unwrap();
    assert_eq!(groups(&t), vec![(Some(0), 1024), (Some(0), 1500), (Some(0), 1500), (Some(1), 1024), (Some(1), 1024)]);
    // The same id after a different prefix is another block.
    let t = parse(&mooncake(&["1, 2", "5, 2"])).unwrap();
    assert!(t.requests.iter().all(|r| r.prefix_group.is_none()));
    let e = parse(&mooncake(&["1, 2, 3, 4"])).unwrap_err();
    assert!(e.message.contains("line 1: field `hash_ids`: 4 ids for 1500 input tokens; at most 3"), "{e}");
}

#[test]
fn mooncake_extra_keys_are_named() {
    let t = parse("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1], \"chat_id\": 4}\n").unwrap();
    assert_eq!(t.ignored_columns, vec!["chat_id".to_string()]);
}
