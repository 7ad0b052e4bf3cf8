"""``registry.user_dirs`` names the folders platformdirs names, in every environment: the XDG rule it applies itself
on Linux, and platformdirs' own answer wherever that rule does not apply."""

from __future__ import annotations

import itertools

import platformdirs
import pytest

from registry.user_dirs import APP, Kind, user_dir

KINDS: tuple[Kind, ...] = ("data", "config", "state", "cache")
VARIABLE = {"data": "XDG_DATA_HOME", "config": "XDG_CONFIG_HOME", "state": "XDG_STATE_HOME", "cache": "XDG_CACHE_HOME"}
HOMES = (None, "", "/home/ann", "/home/ann/", "/", "relative/home", "~ann")
XDGS = (None, "", "/srv/xdg", "/srv/xdg/", "relative/xdg", "~/xdg", "/")


@pytest.mark.parametrize(("home", "xdg"), list(itertools.product(HOMES, XDGS)))
def test_each_folder_is_the_one_platformdirs_names(
    monkeypatch: pytest.MonkeyPatch, home: str | None, xdg: str | None
) -> None:
    for kind in KINDS:
        for name, value in (("HOME", home), (VARIABLE[kind], xdg)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        try:
            theirs: str | None = getattr(platformdirs, f"user_{kind}_dir")(APP)
        except RuntimeError:  # platformdirs cannot name a home: neither can this
            theirs = None
        if theirs is None:
            with pytest.raises(RuntimeError):
                user_dir(kind)
        else:
            assert user_dir(kind) == theirs, (kind, home, xdg)
