"""Params as structs (``registry.acp.params``): the msgspec messages it reads, as the pinned msgspec writes them.

msgspec's ``ValidationError`` has no structured path or kind; ``params.py`` reads its message. These tests hold
each message form to the msgspec the dependency range allows (the dev extra installs its lowest release), so a
msgspec that words them otherwise fails here rather than garbling a client's -32602.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from registry.acp.methods import METHODS
from registry.acp.params import (
    InitializeParams,
    ListParams,
    NewSessionParams,
    SessionRef,
    convert_params,
    invalid_params,
)
from registry.errors import InvalidParams

ROOT = Path(__file__).resolve().parent.parent


def _requirement(extra: str | None = None) -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return str(next(r for r in listed if re.match(r"msgspec\b", r)))


def test_the_tested_msgspec_is_the_lowest_the_range_allows() -> None:
    lowest = re.fullmatch(r"msgspec>=([0-9.]+),<([0-9.]+)", _requirement())
    assert lowest is not None, "the msgspec range must have a lower and an upper bound"
    assert _requirement("dev") == f"msgspec=={lowest[1]}" or _requirement("dev") == f"msgspec=={lowest[1]}.0"
    assert msgspec.__version__ in {lowest[1], f"{lowest[1]}.0"}, msgspec.__version__


@pytest.mark.parametrize(
    ("value", "shape", "message"),
    [
        ({}, SessionRef, "Object missing required field `sessionId`"),
        ({"cwd": 7}, ListParams, "Expected `str | null`, got `int` - at `$.cwd`"),
        (
            {"cwd": "/a", "additionalDirectories": ["/b", 3]},
            NewSessionParams,
            "Expected `str`, got `int` - at `$.additionalDirectories[1]`",
        ),
        ([], ListParams, "Expected `object`, got `array`"),
        ({"protocolVersion": 1.5}, InitializeParams, "Expected `int`, got `float` - at `$.protocolVersion`"),
    ],
)
def test_msgspec_writes_the_messages_params_reads(value: Any, shape: type, message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(value, shape)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("value", "shape", "field", "message"),
    [
        ({}, SessionRef, "sessionId", "sessionId is missing"),
        ({"cwd": 7}, ListParams, "cwd", "cwd must be a string, not a number"),
        (
            {"cwd": "/a", "additionalDirectories": ["/b", 3]},
            NewSessionParams,
            "additionalDirectories[1]",
            "additionalDirectories[1] must be a string, not a number",
        ),
        ([], ListParams, "params", "params must be an object, not an array"),
        (
            {"protocolVersion": 1.5},
            InitializeParams,
            "protocolVersion",
            "protocolVersion must be an integer, not a number",
        ),
        (
            {"sessionId": "s", "title": [1]},
            METHODS["_registry/rename"].params,
            "title",
            "title must be a string, not an array",
        ),
        ({"sessionId": 5}, SessionRef, "sessionId", "sessionId must be a non-empty string, not a number"),
    ],
)
def test_each_message_names_its_field(value: Any, shape: type, field: str, message: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        convert_params(value, shape)
    assert (str(caught.value), caught.value.data) == (message, {"field": field})


def test_a_message_of_another_form_is_still_a_clear_invalid_params() -> None:
    error = invalid_params("Something new happened - at `$.cwd`")
    assert (str(error), error.data) == ("cwd: something new happened", {"field": "cwd"})
    nested = invalid_params("Expected `str`, got `int` - at `$.text`", "prompt[2]")
    assert (str(nested), nested.data) == ("prompt[2].text must be a string, not a number", {"field": "prompt[2].text"})
