"""The price table that estimates what tokens cost where an agent reported no cost: shipped with the package
(``SHIPPED``, dated), overridable per model by a file of the user's.

A price is per million tokens of each kind (``events.Usage``'s disjoint counts): input, output (reasoning tokens
are billed as output), cache reads and cache writes. An estimate is exact arithmetic on those (integers: a price
is kept as billionths of a billionth of its currency per token) and is always shown as an estimate.

The user's file (``--prices FILE``, else ``$ACP_REGISTRY_PRICES``, else ``prices.toml`` in the user's config folder
- ``~/.config/acp-registry/prices.toml`` on Linux - when it exists) is TOML, or JSON when its name ends in
``.json``::

    as_of = "2026-12-01"        # when these prices were read (shown beside every estimate)
    currency = "USD"            # the table's one currency (USD when left out)
    replace = false             # true: only these models; false (default): these over the shipped ones

    [models."claude-sonnet-4-5"]
    input = 3.0                 # per million tokens
    output = 15.0
    cached_read = 0.30          # left out: the input price
    cached_write = 3.75         # left out: the input price

A model is found by its name as an agent reports it: lower-cased, without a provider's prefix (``anthropic/``),
a ``@version`` or a date suffix (``-20250929``, ``-2025-04-14``); then the longest table name it starts with, up to
a ``-`` (``gpt-5-codex-mini`` takes ``gpt-5-codex`` over ``gpt-5``). A model found nowhere has no estimate: its
tokens are shown as tokens only.
"""

from __future__ import annotations

import os
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Final, NamedTuple

from events.logger import Logger
from registry.errors import InvalidParams
from registry.user_dirs import user_dir

__all__ = [
    "ENV_PRICES",
    "SHIPPED",
    "SHIPPED_AS_OF",
    "Price",
    "PriceTable",
    "current",
    "load_prices",
    "price_file",
    "use_prices",
]

ENV_PRICES: Final = "ACP_REGISTRY_PRICES"
SHIPPED_AS_OF: Final = "2025-11-24"
"""The day the shipped prices were read from the vendors' published list prices (standard tier, prompts under
200k tokens where a vendor prices longer ones higher; a cache write at the 5-minute rate)."""
_PER_TOKEN: Final = 10**12
"""A price per million tokens times this is billionths of a billionth of the currency per token (exact)."""

# USD per million tokens: input, output, cache read, cache write.
_SHIPPED_USD: Final[dict[str, tuple[str, str, str, str]]] = {
    # Anthropic
    "claude-opus-4-5": ("5", "25", "0.50", "6.25"),
    "claude-opus-4-1": ("15", "75", "1.50", "18.75"),
    "claude-opus-4": ("15", "75", "1.50", "18.75"),
    "claude-sonnet-4-5": ("3", "15", "0.30", "3.75"),
    "claude-sonnet-4": ("3", "15", "0.30", "3.75"),
    "claude-haiku-4-5": ("1", "5", "0.10", "1.25"),
    "claude-3-7-sonnet": ("3", "15", "0.30", "3.75"),
    "claude-3-5-sonnet": ("3", "15", "0.30", "3.75"),
    "claude-3-5-haiku": ("0.80", "4", "0.08", "1"),
    "claude-3-opus": ("15", "75", "1.50", "18.75"),
    "claude-3-haiku": ("0.25", "1.25", "0.03", "0.30"),
    # OpenAI (no charge for writing the cache: a cache write is priced as input)
    "gpt-5.1": ("1.25", "10", "0.125", "1.25"),
    "gpt-5.1-codex": ("1.25", "10", "0.125", "1.25"),
    "gpt-5": ("1.25", "10", "0.125", "1.25"),
    "gpt-5-codex": ("1.25", "10", "0.125", "1.25"),
    "gpt-5-mini": ("0.25", "2", "0.025", "0.25"),
    "gpt-5-nano": ("0.05", "0.40", "0.005", "0.05"),
    "gpt-4.1": ("2", "8", "0.50", "2"),
    "gpt-4.1-mini": ("0.40", "1.60", "0.10", "0.40"),
    "gpt-4.1-nano": ("0.10", "0.40", "0.025", "0.10"),
    "gpt-4o": ("2.50", "10", "1.25", "2.50"),
    "gpt-4o-mini": ("0.15", "0.60", "0.075", "0.15"),
    "o3": ("2", "8", "0.50", "2"),
    "o3-mini": ("1.10", "4.40", "0.55", "1.10"),
    "o4-mini": ("1.10", "4.40", "0.275", "1.10"),
    "codex-mini-latest": ("1.50", "6", "0.375", "1.50"),
    # Google (prompts up to 200k tokens)
    "gemini-3-pro-preview": ("2", "12", "0.20", "2"),
    "gemini-2.5-pro": ("1.25", "10", "0.31", "1.25"),
    "gemini-2.5-flash": ("0.30", "2.50", "0.075", "0.30"),
    "gemini-2.5-flash-lite": ("0.10", "0.40", "0.025", "0.10"),
    "gemini-2.0-flash": ("0.10", "0.40", "0.025", "0.10"),
    # Others
    "kimi-k2": ("0.60", "2.50", "0.15", "0.60"),
    "grok-code-fast-1": ("0.20", "1.50", "0.02", "0.20"),
}


class Price(NamedTuple):
    """A model's price per token of each kind, in billionths of a billionth of the table's currency."""

    input: int
    output: int
    cached_read: int
    cached_write: int


def _per_token(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise InvalidParams(f"{where} must be a number (per million tokens)")
    try:
        price = Decimal(str(value)) * _PER_TOKEN
    except InvalidOperation:
        raise InvalidParams(f"{where} must be a number (per million tokens), not {value!r}") from None
    if not price.is_finite() or price < 0 or price != price.to_integral_value():
        raise InvalidParams(f"{where} must be a number >= 0 with at most 12 decimals, not {value!r}")
    return int(price)


_SUFFIXES: Final = re.compile(r"(@.*|-\d{8}|-\d{4}-\d{2}-\d{2})$")


class PriceTable:
    """Prices by model, in one currency, as of a date; ``source``: where they came from (for people)."""

    def __init__(self, models: dict[str, Price], *, as_of: str, currency: str = "USD", source: str = "shipped"):
        self.models = {name.lower(): price for name, price in models.items()}
        self.as_of = as_of
        self.currency = currency
        self.source = source
        self._found: dict[str, tuple[str, Price] | None] = {}

    def find(self, model: str) -> tuple[str, Price] | None:
        """The table's name and price for a model as an agent names it (see the module docstring), or None."""
        found = self._found.get(model, False)
        if found is not False:
            return found  # type: ignore[return-value]
        name = _SUFFIXES.sub("", model.strip().lower().rsplit("/", 1)[-1])
        match = None
        if name in self.models:
            match = name
        else:
            for known in self.models:
                if name.startswith(known + "-") and (match is None or len(known) > len(match)):
                    match = known
        result = None if match is None else (match, self.models[match])
        if len(self._found) < 4096:
            self._found[model] = result
        return result

    def estimate(
        self, model: str, input: int, output: int, cached_read: int, cached_write: int, thought: int
    ) -> int | None:
        """What these tokens of ``model`` cost by this table, in billionths of its currency (rounded to the
        nearest); None when it has no price for the model."""
        found = self._found.get(model, False)
        if found is False:
            found = self.find(model)
        if found is None:
            return None
        price = found[1]  # type: ignore[index]
        exact = (
            input * price.input
            + (output + thought) * price.output
            + cached_read * price.cached_read
            + cached_write * price.cached_write
        )
        return (exact + 500_000_000) // 1_000_000_000

    def described(self) -> str:
        """Where the prices come from and as of when, for a line under an estimate."""
        return f"prices of {self.source} as of {self.as_of}"


def _shipped() -> PriceTable:
    models = {name: Price(*(_per_token(value, name) for value in values)) for name, values in _SHIPPED_USD.items()}
    return PriceTable(models, as_of=SHIPPED_AS_OF, currency="USD", source="the shipped table")


SHIPPED: Final = _shipped()


def price_file(option: str | None = None) -> str | None:
    """The user's price file: ``option`` (``--prices``), else ``$ACP_REGISTRY_PRICES``, else ``prices.toml`` in
    the user's config folder when it exists; None for none. (A path as text: ``pathlib`` stays out of a list's
    start, whose pages estimate costs with this table.)"""
    if option:
        return option
    named = os.environ.get(ENV_PRICES)
    if named:
        return named
    default = os.path.join(user_dir("config"), "prices.toml")
    return default if os.path.isfile(default) else None


def load_prices(path: str | os.PathLike[str] | None) -> PriceTable:
    """The shipped table, with the models of the file at ``path`` over it (or instead of it: ``replace``). A file
    that cannot be read or says something else than prices is an ``InvalidParams`` naming it."""
    if path is None:
        return SHIPPED
    try:
        with open(path, "rb") as file:
            text = file.read()
    except OSError as exc:
        raise InvalidParams(f"price file {path}: {exc.strerror or exc}") from None
    data = _parse(path, text)
    where = f"price file {path}"
    if not isinstance(data, dict):
        raise InvalidParams(f"{where}: not a table of prices")
    unknown = sorted(set(data) - {"as_of", "currency", "replace", "models"})
    if unknown:
        raise InvalidParams(f"{where}: unknown key {unknown[0]!r} (as_of, currency, replace, models)")
    as_of, currency, replace = data.get("as_of"), data.get("currency", "USD"), data.get("replace", False)
    if not isinstance(as_of, str) or not as_of.strip():
        raise InvalidParams(f'{where}: as_of must say when the prices were read (e.g. "2026-12-01")')
    if not isinstance(currency, str) or not currency.isalpha() or len(currency) > 16:
        raise InvalidParams(f'{where}: currency must be a code such as "USD"')
    if not isinstance(replace, bool):
        raise InvalidParams(f"{where}: replace must be true or false")
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise InvalidParams(f"{where}: models must be a table of models")
    if currency != SHIPPED.currency and not replace:
        raise InvalidParams(f"{where}: prices in {currency} cannot be mixed with the shipped USD ones (replace = true)")
    prices = {} if replace else dict(SHIPPED.models)
    for name, entry in models.items():
        prices[name.lower()] = _price(entry, f"{where}: models.{name}")
    return PriceTable(prices, as_of=as_of.strip(), currency=currency, source=os.fspath(path))  # the file's name


def _parse(path: str | os.PathLike[str], text: bytes) -> Any:
    if os.path.splitext(path)[1].lower() == ".json":
        import msgspec  # noqa: PLC0415

        try:
            return msgspec.json.decode(text)
        except msgspec.DecodeError as exc:
            raise InvalidParams(f"price file {path} is not JSON: {exc}") from None
    import tomllib  # noqa: PLC0415

    try:
        return tomllib.loads(text.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidParams(f"price file {path} is not TOML: {exc}") from None


def _price(entry: object, where: str) -> Price:
    if not isinstance(entry, dict):
        raise InvalidParams(f"{where} must be a table of prices (input, output, cached_read, cached_write)")
    unknown = sorted(set(entry) - {"input", "output", "cached_read", "cached_write"})
    if unknown:
        raise InvalidParams(f"{where}: unknown key {unknown[0]!r} (input, output, cached_read, cached_write)")
    for needed in ("input", "output"):
        if needed not in entry:
            raise InvalidParams(f"{where} needs an {needed} price")
    prices = {key: _per_token(value, f"{where}.{key}") for key, value in entry.items()}
    return Price(
        prices["input"],
        prices["output"],
        prices.get("cached_read", prices["input"]),
        prices.get("cached_write", prices["input"]),
    )


_current: PriceTable | None = None


def current() -> PriceTable:
    """The table estimates are made with in this process: set by ``use_prices``, else the user's file
    (``price_file()``) over the shipped one, loaded once. A price file that cannot be used is warned about once
    and the shipped table used (a list must not fail for it; ``acp-registry usage`` reports it as an error)."""
    global _current  # noqa: PLW0603 - one table a process, as the store's URL is one a process
    if _current is None:
        try:
            _current = load_prices(price_file())
        except InvalidParams as exc:
            Logger(__name__).warning("%s; estimating with the shipped prices", exc)
            _current = SHIPPED
    return _current


def use_prices(table: PriceTable | None) -> None:
    """Estimate with ``table`` in this process from now on (None: load the user's file again when next needed)."""
    global _current  # noqa: PLW0603
    _current = table
