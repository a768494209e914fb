"""Options of format("exon"): every bad option fails naming the option."""

from __future__ import annotations

import pytest

from exon.spark.options import (
    DEFAULT_MAX_RECORDS_PER_PARTITION,
    ExonOptionError,
    parse_read_options,
    parse_write_options,
)

BASE = {"archive": "127.0.0.1:4000", "recording": "orders"}


def test_minimal_read_options_take_the_defaults() -> None:
    opts = parse_read_options(BASE)
    assert opts.archive == "127.0.0.1:4000"
    assert opts.recordings == ("orders",)
    assert opts.format == "raw"
    assert opts.starting == "earliest"
    assert opts.ending == "latest"
    assert opts.max_records_per_trigger is None
    assert opts.max_records_per_partition == DEFAULT_MAX_RECORDS_PER_PARTITION
    assert not opts.multiple


def test_option_names_are_case_insensitive_like_spark() -> None:
    opts = parse_read_options({"ARCHIVE": "h:1", "Recording": "a, b",
                               "maxrecordspertrigger": "10", "MAXRECORDSPERPARTITION": "3"})
    assert opts.recordings == ("a", "b")
    assert opts.multiple
    assert opts.max_records_per_trigger == 10
    assert opts.max_records_per_partition == 3


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"recording": "orders"}, "archive"),
        ({"archive": "no-port", "recording": "orders"}, "archive"),
        ({"archive": "h:99999", "recording": "orders"}, "archive"),
        ({"archive": "h:1"}, "recording"),
        ({"archive": "h:1", "recording": "a,,b"}, "recording"),
        ({"archive": "h:1", "recording": "a,a"}, "recording"),
        ({**BASE, "format": "xml"}, "format"),
        ({**BASE, "format": "json"}, "schema"),
        ({**BASE, "schema": "a int"}, "schema"),
        ({**BASE, "maxRecordsPerTrigger": "0"}, "maxRecordsPerTrigger"),
        ({**BASE, "maxRecordsPerPartition": "ten"}, "maxRecordsPerPartition"),
        ({**BASE, "replayTimeout": "-1"}, "replayTimeout"),
        ({**BASE, "replayTimeout": "nan"}, "replayTimeout"),
        ({**BASE, "truncate": "maybe"}, "truncate"),
        ({**BASE, "truncate": "true"}, "consumer"),
        ({**BASE, "startingPosition": "first"}, "startingPosition"),
        ({**BASE, "startingPosition": '{"clicks": 0}'}, "startingPosition"),
        ({**BASE, "startingPosition": '{"orders": -32}'}, "startingPosition"),
        ({**BASE, "recording": "a,b", "startingPosition": "64"}, "startingPosition"),
        ({**BASE, "recording": "a,b", "startingPosition": '{"a": 0}'}, "startingPosition"),
        ({**BASE, "endingPosition": "earliest"}, "endingPosition"),
        ({**BASE, "startingOffsets": "earliest"}, "startingOffsets"),  # Kafka's, not ours
        ({**BASE, "failOnDataLoss": "sometimes"}, "failOnDataLoss"),
        ({**BASE, "startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({**BASE, "startingTimestamp": "-5"}, "startingTimestamp"),
        ({**BASE, "endingTimestamp": "1.5"}, "endingTimestamp"),
        ({**BASE, "startingTimestamp": "5", "startingPositionByTimestamp": '{"orders": 5}'},
         "startingTimestamp"),
        ({**BASE, "startingTimestamp": "5", "startingPosition": "0"}, "startingPosition"),
        ({**BASE, "endingTimestamp": "5", "endingPosition": "64"}, "endingPosition"),
        ({**BASE, "startingPositionByTimestamp": "5"}, "startingPositionByTimestamp"),
        ({**BASE, "startingPositionByTimestamp": '{"orders": "soon"}'},
         "startingPositionByTimestamp"),
        ({**BASE, "startingPositionByTimestamp": '{"clicks": 5}'},
         "startingPositionByTimestamp"),
        ({**BASE, "recording": "a,b", "endingPositionByTimestamp": '{"a": 5}'},
         "endingPositionByTimestamp"),
        ({**BASE, "minRecordsPerTrigger": "many"}, "minRecordsPerTrigger"),
        ({**BASE, "minRecordsPerTrigger": "50", "maxRecordsPerTrigger": "10"},
         "minRecordsPerTrigger"),
        ({**BASE, "maxTriggerDelay": "5s"}, "maxTriggerDelay"),
        ({**BASE, "minRecordsPerTrigger": "5", "maxTriggerDelay": "soon"}, "maxTriggerDelay"),
        ({**BASE, "minRecordsPerTrigger": "5", "maxTriggerDelay": "0s"}, "maxTriggerDelay"),
    ],
)
def test_bad_read_option_names_the_option(options: dict[str, str], option: str) -> None:
    with pytest.raises(ExonOptionError) as info:
        parse_read_options(options)
    assert info.value.option == option
    assert repr(option) in str(info.value)


def test_positions_parse_as_per_recording_dicts() -> None:
    one = parse_read_options({**BASE, "startingPosition": "64", "endingPosition": "128"})
    assert one.starting == {"orders": 64}
    assert one.ending == {"orders": 128}
    two = parse_read_options({**BASE, "recording": "a,b",
                              "startingPosition": '{"a": 0, "b": 32}'})
    assert two.starting == {"a": 0, "b": 32}
    assert parse_read_options({**BASE, "startingPosition": "LATEST"}).starting == "latest"


def test_decoded_format_keeps_the_ddl() -> None:
    opts = parse_read_options({**BASE, "format": "JSON", "schema": "key string, value double"})
    assert opts.format == "json"
    assert opts.schema == "key string, value double"


def test_truncate_with_a_named_consumer() -> None:
    opts = parse_read_options({**BASE, "truncate": "true", "consumer": "q1"})
    assert opts.truncate
    assert opts.consumer == "q1"


def test_write_modes() -> None:
    peer = parse_write_options({"peer": "127.0.0.1:5000/7"})
    assert peer.mode == "peer"
    assert peer.peer == "127.0.0.1:5000/7"
    rec = parse_write_options({"archive": "127.0.0.1:5000", "recording": "out",
                               "timeout": "5"})
    assert rec.mode == "archive"
    assert (rec.archive, rec.recording, rec.timeout) == ("127.0.0.1:5000", "out", 5.0)


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({}, "peer"),
        ({"peer": "127.0.0.1:5000"}, "peer"),
        ({"peer": "h:1/2", "archive": "h:1", "recording": "r"}, "peer"),
        ({"archive": "h:1"}, "recording"),
        ({"archive": "h:1", "recording": "a,b"}, "recording"),
        ({"recording": "r"}, "peer"),
        ({"peer": "h:1/2", "timeout": "0"}, "timeout"),
    ],
)
def test_bad_write_option_names_the_option(options: dict[str, str], option: str) -> None:
    with pytest.raises(ExonOptionError) as info:
        parse_write_options(options)
    assert info.value.option == option


def test_archive_takes_the_members_of_a_replicated_archive() -> None:
    opts = parse_read_options({**BASE, "archive": "h1:1, h2:2"})
    assert opts.archive == "h1:1,h2:2"
    with pytest.raises(ExonOptionError, match="archive"):
        parse_read_options({**BASE, "archive": "h1:1,no-port"})


def test_an_unknown_option_names_a_near_one() -> None:
    for name, near in (("startingOffsets", "startingPosition"),
                       ("maxrecordpertrigger", "maxRecordsPerTrigger"),
                       ("bogus", None)):
        with pytest.raises(ExonOptionError) as info:
            parse_read_options({**BASE, name: "1"})
        assert info.value.option == name
        if near is None:
            assert "did you mean" not in str(info.value)
        else:
            assert f"did you mean {near!r}" in str(info.value)


def test_kafka_style_options_parse() -> None:
    opts = parse_read_options({**BASE, "recording": "a,b", "startingTimestamp": "1700000000000",
                               "endingPositionByTimestamp": '{"a": 5, "b": "6"}',
                               "FAILONDATALOSS": "false", "minRecordsPerTrigger": "100",
                               "maxTriggerDelay": "90s"})
    assert opts.starting_at == {"a": 1_700_000_000_000_000_000, "b": 1_700_000_000_000_000_000}
    assert opts.ending_at == {"a": 5_000_000, "b": 6_000_000}  # ms in, ns kept
    assert not opts.fail_on_data_loss
    assert (opts.min_records_per_trigger, opts.max_trigger_delay) == (100, 90.0)
    defaults = parse_read_options({**BASE, "minRecordsPerTrigger": "1"})
    assert defaults.fail_on_data_loss
    assert defaults.max_trigger_delay == 15 * 60.0  # Kafka's 15m
    assert defaults.starting_at is None
    for text, seconds in (("250", 0.25), ("250ms", 0.25), ("2 min", 120.0), ("1h", 3600.0)):
        assert parse_read_options({**BASE, "minRecordsPerTrigger": "1",
                                   "maxTriggerDelay": text}).max_trigger_delay == seconds
