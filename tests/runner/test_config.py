"""Config helpers: secret masking, ${VAR} expansion and the config hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaltrace.runner import RunConfigError
from evaltrace.runner._config_errors import format_loc, unknown_key_problem
from evaltrace.runner.config import MASK, config_hash, expand_env, mask_secrets
from evaltrace.schema import EvalCase


def test_mask_secrets_keeps_references_and_masks_literals() -> None:
    config = {
        "headers": {"Authorization": "Bearer ${TOKEN}", "X-Api-Key": "abc123", "Accept": "application/json"},
        "api_key": "${OPENAI_API_KEY}",
        "list": [{"password": "hunter2"}],
        "url": "https://example.com",
    }
    assert mask_secrets(config) == {
        "headers": {"Authorization": "Bearer ${TOKEN}", "X-Api-Key": MASK, "Accept": "application/json"},
        "api_key": "${OPENAI_API_KEY}",
        "list": [{"password": MASK}],
        "url": "https://example.com",
    }


def test_expand_env_names_the_entry() -> None:
    env = {"TOKEN": "t"}
    assert expand_env({"a": ["x ${TOKEN}"]}, Path("e.yaml"), "variants[0].config", env) == {"a": ["x t"]}
    with pytest.raises(RunConfigError, match=r"e.yaml: variants\[0\].config.b\[1\]: environment variable NOPE"):
        expand_env({"b": ["ok", "${NOPE}"]}, Path("e.yaml"), "variants[0].config", env)


def test_config_hash_depends_on_config_and_cases() -> None:
    cases = [EvalCase(id="a")]
    first = config_hash({"name": "x"}, cases)
    assert first == config_hash({"name": "x"}, [EvalCase(id="a")])
    assert first != config_hash({"name": "y"}, cases)
    assert first != config_hash({"name": "x"}, [EvalCase(id="b")])


def test_unknown_key_problem_names_the_nearest_key_or_lists_them() -> None:
    assert unknown_key_problem("timout_s", ["target", "timeout_s", "kwargs"]) == "unknown key; did you mean timeout_s?"
    assert unknown_key_problem("zzz", ["b", "a"]) == "unknown key; expected one of a, b"
    assert format_loc(("systems", 1, "config", "timout_s")) == "systems[1].config.timout_s"
    assert format_loc((0, "id")) == "[0].id"


def test_mask_secrets_masks_passwords_inside_connection_strings() -> None:
    """A literal password in a store's dsn (URL or libpq key=value form) never reaches config.yaml."""
    config = {
        "output": [
            {"type": "postgres", "dsn": "postgresql://evt:s3cr3t@db:5432/runs"},
            {"type": "postgres", "dsn": "host=db port=5432 password='p w' dbname=runs"},
            {"type": "postgres", "dsn": "postgresql://evt:${PGPASS}@db/runs"},
        ],
        "url": "http://127.0.0.1:8000/v1",
        "other": "postgres://user@db/runs",
    }
    masked = mask_secrets(config)
    assert masked["output"][0]["dsn"] == f"postgresql://evt:{MASK}@db:5432/runs"
    assert masked["output"][1]["dsn"] == f"host=db port=5432 password={MASK} dbname=runs"
    assert masked["output"][2]["dsn"] == "postgresql://evt:${PGPASS}@db/runs"
    assert masked["url"] == config["url"] and masked["other"] == config["other"]
