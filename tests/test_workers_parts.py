"""The ``--workers`` supervisor's parts that need no process: the names it
gives, the key it mints, the configuration it hands over and the channel's
framing (the processes themselves: tests/e2e/test_workers.py)."""

from __future__ import annotations

import base64

import pytest

from trio_mcp._config import MCPConfig, RunConfig, ServerConfig
from trio_mcp._control import MAX_LINE_BYTES, LineBuffer, encode
from trio_mcp._settings import SETTINGS, config_from_values, config_values
from trio_mcp._workers import (
    heartbeat_interval_s,
    mint_request_state_key,
    owner_name,
    warn_if_queues_reset,
    worker_cpus,
)


def test_owner_names_fit_the_contract() -> None:
    assert [owner_name("", i) for i in (1, 2, 12)] == ["w1", "w2", "w12"]
    assert owner_name("web", 3) == "web-3"
    long = owner_name("a-very-long-name-indeed", 12)
    assert long == "a-very-long-n-12" and len(long) == 16
    for name in ("w1", "web-3", long):
        MCPConfig(owner_name=name)  # (valid)


def test_the_minted_key_is_as_strong_as_a_generated_one() -> None:
    key = mint_request_state_key()
    assert len(base64.urlsafe_b64decode(key + "=")) == 32
    assert key != mint_request_state_key()


def test_heartbeats_fit_several_times_in_the_timeout() -> None:
    assert heartbeat_interval_s(20.0) == 1.0
    assert heartbeat_interval_s(2.0) == 0.5


def test_a_configuration_survives_the_trip_to_a_worker_secrets_included() -> None:
    config = RunConfig(
        app="app.py:mcp",
        workers=3,
        mcp=MCPConfig(
            http=ServerConfig(port=8123, ssl_keyfile_password=None, drain_delay_s=2.5),
            request_state_keys=("one", "two"),
            cache_hints={"tools/list": (60000, "public")},
            allowed_hosts=("a.example",),
            stream_slow_answers_after_s=None,
            owner_name="w2",
        ),
    )
    values = config_values(config)
    assert set(values) == {setting.name for setting in SETTINGS}
    assert values["request_state_keys"] == ["one", "two"]
    assert config_from_values(values) == config
    assert config_from_values(config_values(RunConfig())) == RunConfig()


def test_the_channel_frames_one_message_a_line() -> None:
    buffer = LineBuffer()
    data = encode({"ping": 1}) + encode({"ready": 80})
    assert buffer.feed(data[:5]) == []
    assert buffer.feed(data[5:-3]) == [{"ping": 1}]
    assert buffer.feed(data[-3:]) == [{"ready": 80}]
    with pytest.raises(ValueError, match="too long"):
        LineBuffer().feed(b"x" * (MAX_LINE_BYTES + 1))


def test_a_reuse_port_process_warns_when_queues_would_be_reset(tmp_path, caplog) -> None:
    sysctl = tmp_path / "tcp_migrate_req"
    sysctl.write_text("0\n")
    with caplog.at_level("WARNING", logger="trio_mcp.workers"):
        assert warn_if_queues_reset(str(sysctl))
        assert warn_if_queues_reset(str(tmp_path / "missing"))  # (before Linux 5.14)
        sysctl.write_text("1\n")
        assert not warn_if_queues_reset(str(sysctl))
    assert len(caplog.records) == 2
    assert "sysctl net.ipv4.tcp_migrate_req=1" in caplog.records[0].getMessage()


def test_metrics_of_the_group_are_summed_into_one_scrape() -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

    from trio_mcp._observe._exposition import merge

    counter = CounterMetricFamily("refusals", "Refusals", labels=["reason"])
    counter.add_metric(["429"], 2)
    histogram = HistogramMetricFamily("took", "Took", labels=["m"], unit="seconds")
    histogram.add_metric(["a"], [("0.1", 1), ("+Inf", 3)], 0.5)
    peer = [
        ["refusals", "counter", "Refusals", "", [
            ["refusals_total", {"reason": "429"}, 5.0],
            ["refusals_total", {"reason": "503"}, 1.0],
        ]],
        ["took_seconds", "histogram", "Took", "seconds", [
            ["took_seconds_bucket", {"m": "a", "le": "0.1"}, 1.0],
            ["took_seconds_bucket", {"m": "a", "le": "+Inf"}, 1.0],
            ["took_seconds_count", {"m": "a"}, 1.0],
            ["took_seconds_sum", {"m": "a"}, 0.25],
        ]],
        ["only_there", "gauge", "Elsewhere", "", [["only_there", {}, 7.0]]],
    ]  # fmt: skip
    merged = {family.name: family for family in merge([counter, histogram], [peer, peer])}
    values = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in merged.values()
        for sample in family.samples
    }
    assert values[("refusals_total", (("reason", "429"),))] == 12
    assert values[("refusals_total", (("reason", "503"),))] == 2
    assert values[("took_seconds_bucket", (("le", "+Inf"), ("m", "a")))] == 5
    assert values[("took_seconds_count", (("m", "a"),))] == 5
    assert values[("took_seconds_sum", (("m", "a"),))] == 1.0
    assert values[("only_there", ())] == 14
    assert merged["only_there"].type == "gauge"


def test_spread_counts_add_what_is_in_transit_and_settle_a_dead_slot(tmp_path) -> None:
    from trio_mcp._trio._spread import SpreadCounts

    counts = SpreadCounts.create(str(tmp_path / "connections"), 3)
    other = SpreadCounts(str(tmp_path / "connections"), 3)  # (another process's map)
    try:
        counts.set_pid(1, 4242)
        counts.set_held(1, 5)
        for _ in range(3):
            counts.count_passed(0, 1)
        counts.count_passed(2, 1)
        other.count_received(1, 0)
        assert other.load(1) == 5 + 2 + 1
        assert counts.in_transit(0) == counts.in_transit(2) == 0
        counts.forget(1, 999)  # (not the slot's process: a retired one)
        assert counts.pid(1) == 4242 and counts.load(1) == 8
        counts.forget(1, 4242)  # what was on its way to it is lost with it
        assert (counts.pid(1), counts.held(1), counts.in_transit(1)) == (0, 0, 0)
        counts.count_passed(0, 1)  # and its next process counts from there
        assert other.load(1) == 1
    finally:
        other.close()
        counts.close()


def test_the_connection_slack_is_at_least_one_or_off() -> None:
    assert RunConfig(worker_connection_slack=None).worker_connection_slack is None
    assert RunConfig().worker_connection_slack == 2
    with pytest.raises(ValueError, match="worker_connection_slack"):
        RunConfig(worker_connection_slack=0)


def test_workers_take_the_cpus_they_may_use_in_turn(monkeypatch) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {7, 2, 5})
    assert worker_cpus(2) == [2, 5]
    assert worker_cpus(4) == [2, 5, 7, 2]


def test_cpu_affinity_needs_linux(monkeypatch) -> None:
    assert RunConfig(workers=2, worker_cpu_affinity=True).worker_cpu_affinity
    monkeypatch.delattr("os.sched_setaffinity")
    with pytest.raises(ValueError, match="worker_cpu_affinity needs Linux"):
        RunConfig(workers=2, worker_cpu_affinity=True)
    assert not RunConfig(workers=2).worker_cpu_affinity


@pytest.mark.parametrize(
    ("local", "mine", "theirs", "passed"),
    [
        (False, 3, 1, True),  # the slack, 2
        (False, 2, 1, False),
        (False, 43, 33, True),
        (True, 3, 1, True),  # the slack where a third is less
        (True, 2, 1, False),
        (True, 43, 33, False),  # within a third of 33 (11): the kernel's choice stays
        (True, 44, 33, True),
    ],
)
async def test_with_cpu_affinity_a_connection_moves_only_beyond_a_third(
    tmp_path, local, mine, theirs, passed
) -> None:
    import socket
    from types import SimpleNamespace

    from trio_mcp._trio._spread import ConnectionSpread, SpreadCounts

    counts = SpreadCounts.create(str(tmp_path / "connections"), 2)
    paths = [str(tmp_path / "w1.conns"), str(tmp_path / "w2.conns")]
    spread = ConnectionSpread(counts, 0, paths, 2, None, local=local)
    sent: list[int] = []
    spread._send = lambda target, sock: sent.append(target) is None  # type: ignore[method-assign]
    spread.quota = SimpleNamespace(held=mine)  # type: ignore[assignment]
    counts.set_pid(1, 4242)
    counts.set_held(1, theirs)
    left, right = socket.socketpair()
    try:
        assert spread.pass_on(left) is passed
        assert sent == ([1] if passed else [])
    finally:
        left.close()
        right.close()
        spread.close()
        counts.close()
