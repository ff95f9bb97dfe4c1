"""Trace parsers on small inline texts: every format, bad rows named by line, detection."""

from __future__ import annotations

import numpy as np
import pytest

from tandem.errors import InputError
from tandem.sim.traces import (
    Trace,
    detect_format,
    parse_azure_csv,
    parse_burstgpt_csv,
    parse_mooncake_jsonl,
    parse_trace,
)

AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
    "2023-11-16 18:15:46.6805900,374,44\r\n"
    "2023-11-16 18:15:50.9951690,396,109\r\n"
    "2023-11-16 18:16:46.6805901,12,1"
)
MOONCAKE = (
    '{"timestamp": 1000, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]}\n'
    '{"timestamp": 1000, "input_length": 7322, "output_length": 490, "hash_ids": [0, 14]}\n'
    '{"timestamp": 4000, "input_length": 915, "output_length": 355, "hash_ids": [0]}\n'
)
BURSTGPT = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "45,ChatGPT,1087,230,1317,Conversation log\n"
    "60,GPT-4,300,0,300,API log\n"
    "118,GPT-4,417,276,693,Conversation log\n"
)


def _problem(excinfo: pytest.ExceptionInfo[InputError]) -> str:
    assert len(excinfo.value.problems) == 1
    return str(excinfo.value)


# -- the three formats -------------------------------------------------------------------


def test_azure_times_are_exact_to_the_fractional_digit():
    trace = parse_azure_csv(AZURE, "conv.csv")
    assert trace.name == "conv"
    # 4.3145790 s apart, and a step of 100 ns that a float parse of the whole timestamp would lose.
    assert trace.arrival_s.tolist() == [0.0, 4.314579, 60.0000001]
    assert trace.input_tokens.tolist() == [374, 396, 12]
    assert trace.output_tokens.tolist() == [44, 109, 1]
    assert trace.arrival_s.dtype == np.float64 and trace.input_tokens.dtype == np.int64


def test_azure_columns_are_found_by_name_not_position():
    text = "GeneratedTokens,TIMESTAMP,ContextTokens\n5,2024-05-10 00:00:00.5,10\n7,2024-05-10 00:00:01,20\n"
    trace = parse_azure_csv(text)
    assert trace.arrival_s.tolist() == [0.0, 0.5]
    assert trace.input_tokens.tolist() == [10, 20]
    assert trace.output_tokens.tolist() == [5, 7]


def test_mooncake_milliseconds_become_seconds_from_the_first_request():
    trace = parse_mooncake_jsonl(MOONCAKE, "conversation_trace.jsonl")
    assert trace.arrival_s.tolist() == [0.0, 0.0, 3.0]
    assert trace.input_tokens.tolist() == [6758, 7322, 915]
    assert trace.output_tokens.tolist() == [500, 490, 355]


def test_burstgpt_drops_failed_requests_and_counts_them():
    trace = parse_burstgpt_csv(BURSTGPT, "BurstGPT_1.csv")
    assert trace.arrival_s.tolist() == [0.0, 40.0, 113.0]
    assert trace.input_tokens.tolist() == [472, 1087, 417]
    assert trace.output_tokens.tolist() == [18, 230, 276]
    assert trace.failed_dropped == 1
    assert trace.summary()["failed_dropped"] == 1


def test_burstgpt_time_zero_is_the_first_request_that_did_not_fail():
    text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n3,ChatGPT,10,0,10,API log\n7,ChatGPT,10,5,15,API log\n"
    trace = parse_burstgpt_csv(text)
    assert trace.arrival_s.tolist() == [0.0] and trace.failed_dropped == 1


def test_unsorted_rows_are_sorted_stably():
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:05,1,1\n2023-01-01 00:00:00,2,2\n2023-01-01 00:00:05,3,3\n"
    trace = parse_azure_csv(text)
    assert trace.arrival_s.tolist() == [0.0, 5.0, 5.0]
    assert trace.input_tokens.tolist() == [2, 1, 3]


def test_bom_blank_lines_and_crlf_are_accepted_and_lines_still_counted():
    text = "\ufeffTIMESTAMP,ContextTokens,GeneratedTokens\r\n\r\n2023-01-01 00:00:00,1,1\r\n\r\n2023-01-01 00:00:01,x,1\r\n"
    with pytest.raises(InputError) as excinfo:
        parse_azure_csv(text, "t.csv")
    assert _problem(excinfo) == "t.csv: line 5: ContextTokens: 'x' is not an integer"


def test_summary_is_plain_numbers():
    summary = parse_azure_csv(AZURE, "conv.csv").summary()
    assert summary["requests"] == 3
    assert summary["duration_s"] == pytest.approx(60.0000001)
    assert summary["rate_per_s"] == pytest.approx(3 / 60.0000001)
    assert summary["input_tokens"] == {"mean": pytest.approx(782 / 3), "p50": 374.0, "p99": pytest.approx(395.56), "max": 396, "total": 782}
    assert type(summary["output_tokens"]["max"]) is int


def test_a_single_request_has_no_rate():
    trace = parse_mooncake_jsonl('{"timestamp": 5, "input_length": 1, "output_length": 1}')
    assert len(trace) == 1 and trace.duration_s == 0.0
    assert trace.summary()["rate_per_s"] is None


def test_trace_arrays_are_read_only_and_equality_is_by_value():
    trace = parse_azure_csv(AZURE, "conv.csv")
    with pytest.raises(ValueError):
        trace.arrival_s[0] = 5.0
    assert trace == parse_azure_csv(AZURE, "conv.csv")
    assert trace != parse_azure_csv(AZURE, "other.csv")


def test_trace_rejects_broken_columns():
    with pytest.raises(ValueError):
        Trace("x", [1.0, 0.0], [1, 1], [1, 1])
    with pytest.raises(ValueError):
        Trace("x", [0.0], [1, 1], [1])
    with pytest.raises(ValueError):
        Trace("x", [], [], [])


# -- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "format"), [(AZURE, "azure"), (MOONCAKE, "mooncake"), (BURSTGPT, "burstgpt")])
def test_format_is_detected_from_the_header_or_first_record(text, format):
    assert detect_format(text) == format
    assert parse_trace(text, "x") == {"azure": parse_azure_csv, "mooncake": parse_mooncake_jsonl, "burstgpt": parse_burstgpt_csv}[format](text, "x")


def test_detection_skips_leading_blank_lines():
    assert detect_format("\n\n" + MOONCAKE) == "mooncake"


def test_an_unknown_header_names_the_line_and_the_expected_headers():
    with pytest.raises(InputError) as excinfo:
        parse_trace("\ntime,prompt,answer\n1,2,3\n", "mystery.csv")
    message = _problem(excinfo)
    assert message.startswith("mystery.csv: line 2: cannot tell the trace format from 'time,prompt,answer'")
    assert "TIMESTAMP,ContextTokens,GeneratedTokens" in message and "Request tokens" in message


def test_an_explicit_format_overrides_detection_and_an_unknown_one_is_refused():
    with pytest.raises(InputError) as excinfo:
        parse_trace(MOONCAKE, "m.jsonl", format="azure")
    assert "line 1: header lacks column(s) TIMESTAMP, ContextTokens, GeneratedTokens" in _problem(excinfo)
    with pytest.raises(InputError) as excinfo:
        parse_trace(AZURE, "a.csv", format="sharegpt")
    assert _problem(excinfo) == "a.csv: format: unknown trace format 'sharegpt'; use one of azure, mooncake, burstgpt"


# -- bad input: one line naming the line and the column ----------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "t: the trace is empty"),
        ("  \n\n", "t: the trace is empty"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "t: the trace has a header but no requests"),
        ("TIMESTAMP,ContextTokens\n2023-01-01 00:00:00,1\n", "t: line 1: header lacks column(s) GeneratedTokens"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,1,1\n2023-01-01 00:00:01,1\n", "t: line 3: expected 3 fields (TIMESTAMP,ContextTokens,GeneratedTokens), got 2"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,abc,1\n", "t: line 2: ContextTokens: 'abc' is not an integer"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,1.5,1\n", "t: line 2: ContextTokens: '1.5' is not an integer"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,1,0\n", "t: line 2: GeneratedTokens: must be at least 1, got 0"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,-4,2\n", "t: line 2: ContextTokens: must be at least 1, got -4"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,99999999999999999999,2\n", "t: line 2: ContextTokens: '99999999999999999999' is too large"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", "t: line 2: TIMESTAMP: 'yesterday' is not a date and time like 2023-11-16 18:15:46.6805900"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16,1,1\n", "t: line 2: TIMESTAMP: '2023-11-16' is not a date and time"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46Z,1,1\n", "t: line 2: TIMESTAMP: '2023-11-16 18:15:46Z' is not a date and time"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-13-16 18:15:46,1,1\n", "t: line 2: TIMESTAMP: '2023-13-16 18:15:46' is not a valid date and time"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n\"2023-01-01 00:00:00,1,1\n2023-01-01 00:00:01,1,1\n", "t: line 2: a quoted field is not closed on its line"),
    ],
)
def test_bad_azure_input_is_one_problem_naming_line_and_column(text, expected):
    with pytest.raises(InputError) as excinfo:
        parse_azure_csv(text, "t")
    assert _problem(excinfo).startswith(expected)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"timestamp": 1, "input_length": 2}', "line 2: output_length: required field is missing"),
        ('{"timestamp": 1, "input_length": "12", "output_length": 3}', 'line 2: input_length: "12" is not an integer'),
        ('{"timestamp": 1, "input_length": 12.0, "output_length": 3}', "line 2: input_length: 12.0 is not an integer"),
        ('{"timestamp": 1, "input_length": true, "output_length": 3}', "line 2: input_length: true is not an integer"),
        ('{"timestamp": 1, "input_length": 0, "output_length": 3}', "line 2: input_length: must be at least 1, got 0"),
        ('{"timestamp": "noon", "input_length": 1, "output_length": 3}', 'line 2: timestamp: "noon" is not a number'),
        ('{"timestamp": NaN, "input_length": 1, "output_length": 3}', "line 2: timestamp: nan is not a finite number"),
        ('{"timestamp": 1, "input_length": 1, "output_length": 3', "line 2: not valid JSON: Expecting ',' delimiter at column 55"),
        ("[1, 2, 3]", "line 2: expected a JSON object, got list"),
    ],
)
def test_bad_mooncake_lines_are_named(line, expected):
    text = '{"timestamp": 0, "input_length": 5, "output_length": 5}\n' + line + "\n"
    with pytest.raises(InputError) as excinfo:
        parse_mooncake_jsonl(text, "m.jsonl")
    assert _problem(excinfo).startswith("m.jsonl: " + expected)


def test_mooncake_with_only_blank_lines_is_empty():
    with pytest.raises(InputError) as excinfo:
        parse_mooncake_jsonl("\n \n", "m.jsonl")
    assert _problem(excinfo) == "m.jsonl: the trace has no requests"


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("9,ChatGPT,0,5,5,API log", "line 3: Request tokens: must be at least 1, got 0"),
        ("9,ChatGPT,10,-1,9,API log", "line 3: Response tokens: must be at least 0, got -1"),
        ("soon,ChatGPT,10,5,15,API log", "line 3: Timestamp: 'soon' is not a number"),
        ("inf,ChatGPT,10,5,15,API log", "line 3: Timestamp: 'inf' is not a finite number"),
        ("9,ChatGPT,10,5,15", "line 3: expected 6 fields"),
    ],
)
def test_bad_burstgpt_rows_are_named(row, expected):
    text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,ChatGPT,1,1,2,API log\n" + row + "\n"
    with pytest.raises(InputError) as excinfo:
        parse_burstgpt_csv(text, "b.csv")
    assert _problem(excinfo).startswith("b.csv: " + expected)


def test_a_burstgpt_failure_may_have_zero_request_tokens_too():
    text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,ChatGPT,0,0,0,API log\n2,ChatGPT,3,4,7,API log\n"
    trace = parse_burstgpt_csv(text)
    assert len(trace) == 1 and trace.failed_dropped == 1


def test_a_burstgpt_file_of_only_failures_is_an_error():
    text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,ChatGPT,4,0,4,API log\n2,ChatGPT,3,0,3,API log\n"
    with pytest.raises(InputError) as excinfo:
        parse_burstgpt_csv(text, "b.csv")
    assert _problem(excinfo) == "b.csv: all 2 requests failed upstream (Response tokens 0): nothing to replay"
