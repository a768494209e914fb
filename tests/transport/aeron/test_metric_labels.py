"""The label of a metric series a node publishes (counters.metric_label, issue #31)."""

from __future__ import annotations

import pytest

import exon
from exon.transport.aeron.counters import metric_label, parse_metric_label


def test_a_label_round_trips() -> None:
    label = metric_label("exon_socket_links", "ab" * 16, "127.0.0.1:4000",
                         {"type": "pull", "tag": "5"})
    assert label == (f"exon metric exon_socket_links: node {'ab' * 16} 127.0.0.1:4000 "
                     f"tag=5 type=pull")
    assert parse_metric_label(label) == ("exon_socket_links", "ab" * 16, "127.0.0.1:4000",
                                         {"tag": "5", "type": "pull"})


@pytest.mark.parametrize("label", [
    "exon links: node 00 127.0.0.1:1",           # a node counter, not a metric
    "exon metric x: node onlyid",                # no address
    "exon metric : node a b",                    # no name
    "exon metric x: node a b tag",               # a label without '='
    "",
])
def test_other_labels_are_not_metrics(label: str) -> None:
    assert parse_metric_label(label) is None


def test_a_label_value_with_a_space_is_refused() -> None:
    with pytest.raises(exon.ConfigurationError, match="no space"):
        metric_label("exon_x", "a", "b", {"k": "two words"})
