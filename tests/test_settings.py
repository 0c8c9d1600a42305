"""Every setting from each of its three sources (flag, TRIO_MCP_* variable, TOML
file), their precedence, and errors that name the setting and its source."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Iterator, Mapping

import pytest

from trio_mcp import _config
from trio_mcp._config import MCPConfig, RunConfig, ServerConfig
from trio_mcp._errors import SettingError
from trio_mcp._settings import (
    BY_NAME,
    REDACTED,
    SETTINGS,
    Setting,
    add_flags,
    render,
    resolve,
)

#: A valid non-default value for settings whose values are constrained; any
#: other setting's is derived from its default (`_sample`).
SAMPLES: dict[str, object] = {
    "app": "server.py:mcp",
    "transport": "stdio",
    "log_level": "debug",
    "log_format": "json",
    "log_config": "logging.json",
    "host": "::1",
    "sched_slice_us": 250,
    "forwarded_allow_ips": ("10.0.0.0/8", "127.0.0.1"),
    "path": "/api/mcp",
    "eras": "modern",
    "cache_scope": "public",
    "cache_hints": {"tools/list": (60000, "public")},
    "sse_path": "/events",
    "messages_path": "/post",
    "allowed_origins": ("https://app.example",),
    "allowed_hosts": ("mcp.example", "localhost"),
    "request_state_keys": ("key-one", "key-two"),
    "ssl_certfile": "server.pem",
    "ssl_keyfile": "server.key",
    "ssl_keyfile_password": "pass-word",
    "ssl_ca_certs": "clients-ca.pem",
    "ssl_cert_reqs": "required",
    "health_path": "/live",
    "metrics_path": "/stats",
    "access_log_format": "json",
    "access_log_sample": 0.25,
    "access_log_path": "access.log",
    "ready_path": "/ready",
    "owner_name": "w1",
    "peer_sockets_dir": "/run/trio-mcp",
    "redis_url": "redis://127.0.0.1:6380/2",
    "redis_password": "hunter2",
}
#: What a setting is valid only beside (given in the file, the lowest source).
COMPANIONS: dict[str, dict[str, object]] = {
    "ssl_keyfile": {"ssl_certfile": "server.pem"},
    "ssl_keyfile_password": {"ssl_certfile": "server.pem"},
    "ssl_ca_certs": {"ssl_certfile": "server.pem", "ssl_cert_reqs": "optional"},
    "ssl_cert_reqs": {"ssl_certfile": "server.pem", "ssl_ca_certs": "ca.pem"},
    "peer_sockets_dir": {"owner_name": "w1"},
}


def _fields(cls: type) -> Iterator[str]:
    """The configuration dataclasses' leaf fields, found without _settings."""
    hints = typing.get_type_hints(cls, globalns=vars(_config))
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            yield from _fields(hint)
        else:
            yield field.name


def _sample(setting: Setting) -> object:
    if setting.name in SAMPLES:
        return SAMPLES[setting.name]
    default = setting.default
    if setting.kind == "bool":
        return not default
    if setting.kind == "int":
        return 3 if default is None else default + 1
    if setting.kind == "float":
        return default * 2 if default else 2.5
    raise AssertionError(f"add a sample value of {setting.name} to SAMPLES")


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, Mapping):
        return ",".join(f"{m}={ttl}:{scope}" for m, (ttl, scope) in value.items())
    return str(value)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(f'"{item}"' for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f'"{m}" = [{t}, "{s}"]' for m, (t, s) in value.items()) + "}"
    return repr(value)


def _value(config: RunConfig, setting: Setting) -> object:
    value: object = config
    for name in setting.path:
        value = getattr(value, name)
    return value


def _parse(argv: list[str]) -> dict[str, object]:
    parser = argparse.ArgumentParser(exit_on_error=False, allow_abbrev=False)
    add_flags(parser)
    return vars(parser.parse_args(argv))


def test_every_field_is_a_setting_with_help() -> None:
    # A new config field gets its flag, variable and file key from _settings
    # by itself; this fails if _settings ever stops finding one, or if the
    # field has no line in its class's Attributes (its --help and README).
    assert [setting.name for setting in SETTINGS] == list(_fields(RunConfig))
    assert len(BY_NAME) == len(SETTINGS), "two config fields share a name"
    undocumented = [setting.name for setting in SETTINGS if not setting.help]
    assert undocumented == []


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda setting: setting.name)
def test_each_setting_from_each_source(setting: Setting, tmp_path) -> None:
    sample = _sample(setting)
    assert sample != setting.default
    companions = "".join(
        f"{name} = {_toml(value)}\n" for name, value in COMPANIONS.get(setting.name, {}).items()
    )
    base = tmp_path / "companions.toml"
    base.write_text(companions)
    beside = {"config": str(base)}
    file = tmp_path / "settings.toml"
    file.write_text(f"{setting.name} = {_toml(sample)}\n{companions}")
    from_file = resolve({"config": str(file)}, {})
    from_env = resolve(beside, {setting.variable: _text(sample)})
    results = [from_file, from_env]
    assert from_file.sources[setting.name] == str(file)
    assert from_env.sources[setting.name] == setting.variable
    if setting.secret:
        # No flag carries a secret (ps shows flags): a file of its own does.
        with pytest.raises(SystemExit):  # (unrecognized arguments)
            _parse([setting.flag, _text(sample)])
        own = tmp_path / "secret"
        lines = sample if isinstance(sample, tuple) else (sample,)
        own.write_text("\n".join(typing.cast(tuple[str, ...], lines)) + "\n")
        results.append(resolve({**_parse([f"{setting.flag}-file", str(own)]), **beside}, {}))
        results.append(resolve(beside, {f"{setting.variable}_FILE": str(own)}))
    elif setting.kind == "bool":
        flag = setting.flag if sample else f"--no-{setting.flag[2:]}"
        results.append(resolve({**_parse([flag]), **beside}, {}))
    else:
        results.append(resolve({**_parse([setting.flag, _text(sample)]), **beside}, {}))
    for resolved in results:
        assert _value(resolved.config, setting) == sample
    assert resolve({}, {}).sources == {}
    assert _value(resolve({}, {}).config, setting) == setting.default


@pytest.mark.parametrize(
    ("flag", "env", "file", "expected", "source"),
    [
        (None, None, None, 1024, None),
        (None, None, "7", 7, "file"),
        (None, "8", "7", 8, "TRIO_MCP_MAX_SESSIONS"),
        ("9", "8", "7", 9, "--max-sessions"),
        ("9", None, "7", 9, "--max-sessions"),
        ("9", "8", None, 9, "--max-sessions"),
    ],
)
def test_flag_over_environment_over_file_over_default(
    tmp_path, flag, env, file, expected, source
) -> None:
    given: dict[str, object] = _parse(["--max-sessions", flag] if flag else [])
    if file:
        path = tmp_path / "c.toml"
        path.write_text(f"max_sessions = {file}\n")
        given["config"] = str(path)
        source = str(path) if source == "file" else source
    resolved = resolve(given, {"TRIO_MCP_MAX_SESSIONS": env} if env else {})
    assert resolved.config.mcp.max_sessions == expected
    assert resolved.sources.get("max_sessions") == source


def test_the_file_may_be_named_by_the_environment(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('host = "::1"\n')
    resolved = resolve({}, {"TRIO_MCP_CONFIG": str(path)})
    assert resolved.config.mcp.http.host == "::1"
    assert resolved.sources["host"] == f"{path} (TRIO_MCP_CONFIG)"


@pytest.mark.parametrize(
    ("given", "environ", "file", "message"),
    [
        (["--port", "70000"], {}, "", "--port: port must be in 0..65535, not 70000"),
        ([], {"TRIO_MCP_PORT": "abc"}, "", "TRIO_MCP_PORT: port: expected a whole number"),
        ([], {}, "port = 70000", "{file}: port must be in 0..65535"),
        ([], {}, 'port = "80"', "{file}: port: expected a whole number, got str '80'"),
        ([], {}, "max_sesions = 3", "{file}: unknown setting 'max_sesions' (did you mean"),
        ([], {}, "port = ", "{file}: not valid TOML"),
        ([], {"TRIO_MCP_STATELESS": "maybe"}, "", "TRIO_MCP_STATELESS: stateless: expected true"),
        (["--eras", "future"], {}, "", "--eras: eras must be"),
        (["--cache-hints", "tools/list=soon"], {}, "", "cache_hints: expected METHOD=TTL_MS"),
        (
            ["--max-request-line-bytes", "99999"],
            {},
            "",
            "max_request_line_bytes cannot exceed max_head_bytes (max_request_line_bytes "
            "from --max-request-line-bytes)",
        ),
        ([], {}, "port_file = 'x'", "{file}: port: only secrets have a 'port_file'"),
        (
            ["--request-state-keys-file", "/nonexistent/keys"],
            {},
            "",
            "--request-state-keys-file: cannot read /nonexistent/keys",
        ),
    ],
)
def test_errors_name_the_setting_and_its_source(tmp_path, given, environ, file, message) -> None:
    parsed = _parse(given)
    path = tmp_path / "c.toml"
    if file:
        path.write_text(file + "\n")
        parsed["config"] = str(path)
    with pytest.raises(SettingError) as raised:
        resolve(parsed, environ)
    text = str(raised.value)
    assert message.format(file=path) in text
    assert "\n" not in text


def test_a_missing_file_is_one_line() -> None:
    with pytest.raises(SettingError, match=r"cannot read the configuration file /no/such\.toml"):
        resolve({"config": "/no/such.toml"}, {})


def test_a_variable_close_to_a_setting_is_a_warning() -> None:
    resolved = resolve({}, {"TRIO_MCP_MAX_SESION": "3", "TRIO_MCP_NO_EXTENSIONS": "1"})
    assert resolved.warnings == (
        "TRIO_MCP_MAX_SESION is not a setting; did you mean TRIO_MCP_MAX_SESSIONS?",
    )
    assert resolved.config.mcp.max_sessions == MCPConfig().max_sessions


def test_printed_configuration_is_a_file_that_gives_it_back(tmp_path) -> None:
    given = _parse(["--port", "9100", "--stateless", "--allowed-hosts", "a.example,b"])
    resolved = resolve(given, {"TRIO_MCP_CACHE_HINTS": "tools/list=5:public"})
    printed = render(resolved)
    assert "port = 9100  # --port\n" in printed
    assert 'cache_hints = {"tools/list" = [5, "public"]}  # TRIO_MCP_CACHE_HINTS\n' in printed
    assert 'host = "127.0.0.1"  # default\n' in printed
    path = tmp_path / "printed.toml"
    path.write_text(printed)
    again = resolve({"config": str(path)}, {})
    assert again.config == resolved.config


def test_printed_secrets_are_redacted(tmp_path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("k-alpha\nk-beta\n")
    resolved = resolve(_parse(["--request-state-keys-file", str(keys)]), {})
    assert resolved.config.mcp.request_state_keys == ("k-alpha", "k-beta")
    printed = render(resolved)
    assert "k-alpha" not in printed and "k-beta" not in printed
    assert f'request_state_keys = "{REDACTED}"  # --request-state-keys-file {keys}' in printed


def test_metrics_takes_a_path_or_none() -> None:
    assert resolve(_parse(["--metrics"]), {}).config.mcp.metrics_path == "/metrics"
    assert resolve(_parse(["--metrics", "/m"]), {}).config.mcp.metrics_path == "/m"
    assert resolve(_parse([]), {}).config.mcp.metrics_path is None


def test_the_old_flag_names_still_work() -> None:
    parsed = _parse(
        ["--json-response", "--no-trio-tweaks", "--gc-full-interval", "none",
         "--timeout-keep-alive", "5", "--timeout-graceful-shutdown", "3"]
    )  # fmt: skip
    config = resolve(parsed, {}).config.mcp
    assert config.json_response_only is True
    assert config.http.trio_tweaks is False
    assert config.http.gc_full_interval_s is None
    assert config.http.idle_timeout_s == 5.0
    assert config.http.shutdown_timeout_s == 3.0
    assert ServerConfig().gc_full_interval_s is not None
