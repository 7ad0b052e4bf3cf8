"""A search query as a developer types it, and the words of a message as the index holds them.

The query language is small on purpose: words, ``"exact phrases"`` and ``prefix*``, all of which must match (AND);
everything else a full-text engine would read as an operator (``OR``, ``NOT``, ``NEAR``, ``-``, ``:``, ``^``,
parentheses) is taken as plain text. Code-shaped terms match as a developer expects: ``snake_case``, ``foo.bar``
and ``path/to/file.py`` are phrases of their parts (the index splits on ``_``, ``.`` and ``/`` alike), and a
``CamelCase`` word is found by itself and by each of its parts (``indexed`` adds the parts of such words to what it
indexes). Matching ignores case and accents.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final, NamedTuple

from registry.errors import InvalidParams
from registry.limits import MAX_QUERY_BYTES, MAX_QUERY_TERMS

__all__ = ["MIN_PREFIX", "Query", "Term", "indexed", "parse", "tokens"]

MIN_PREFIX: Final = 2
"""Characters before a ``*``: a one-letter prefix would match most of the index."""

_TOKEN: Final = re.compile(r"[^\W_]+")  # letters and digits: what the index's unicode61 tokenizer keeps
_PART: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")  # the humps of a CamelCase word
_PIECE: Final = re.compile(r'"([^"]*)"?|(\S+)')
_INNER_CAPITAL: Final = re.compile(r"[^\W_][A-Z]")  # in ASCII text: what every word ``indexed`` splits holds


def _fold(token: str) -> str:
    """A token as the index compares it: lower case, accents removed."""
    if token.isascii():
        return token.lower()
    decomposed = unicodedata.normalize("NFKD", token.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    """The tokens of ``text`` as the index holds them (letters and digits; case and accents folded)."""
    return [_fold(t) for t in _TOKEN.findall(text)]


def indexed(text: str) -> str:
    """What the index holds for a message: its text, then the parts of each word that mixes cases (``CamelCase``:
    ``camel case``; ``HTTPServer``: ``http server``), so that a part finds the word. Deterministic: the index takes
    a message out again by indexing the same text."""
    if text.isascii() and _INNER_CAPITAL.search(text) is None:
        return text  # no word has a capital after its first letter: nothing to split (most messages)
    parts: list[str] = []
    for word in _TOKEN.findall(text):
        if not word.islower() and not word.isupper() and not word.isdigit() and word[1:] != word[1:].lower():
            humps = _PART.findall(word)
            if len(humps) > 1:
                parts += humps
    return text if not parts else f"{text}\n{' '.join(parts)}"


class Term(NamedTuple):
    """One thing the query asks for: a run of tokens that must follow each other (one token: a word), the last
    one a prefix when ``prefix``."""

    words: tuple[str, ...]
    prefix: bool = False


class Query(NamedTuple):
    """A parsed query: every term must match. ``text`` is what the user typed (for cursors and messages)."""

    text: str
    terms: tuple[Term, ...]

    def fts5(self) -> str:
        """The query in SQLite FTS5's syntax: each term a quoted phrase (so nothing in it is an operator)."""
        return " ".join(f'"{" ".join(t.words)}"' + (" *" if t.prefix else "") for t in self.terms)

    def tsquery(self) -> str:
        """The query in PostgreSQL's ``to_tsquery`` syntax: phrases with ``<->``, prefixes with ``:*``."""
        out = []
        for term in self.terms:
            words = [f"'{w}'" for w in term.words]
            if term.prefix:
                words[-1] += ":*"
            out.append(words[0] if len(words) == 1 else "(" + " <-> ".join(words) + ")")
        return " & ".join(out)

    def highlight(self) -> re.Pattern[str]:
        """A pattern of the query's terms in a message's text, to mark where it matched (case-insensitive; a
        phrase's words may be joined by any non-word characters, as the index splits them)."""
        alternatives = []
        for term in sorted(self.terms, key=lambda t: -sum(map(len, t.words))):
            words = [re.escape(w) for w in term.words]
            tail = r"\w*" if term.prefix else r"(?![^\W_])"
            alternatives.append(r"(?<![^\W_])" + r"[\W_]+".join(words) + tail)
        return re.compile("|".join(alternatives), re.IGNORECASE)


def parse(text: object) -> Query:
    """The query ``text`` as terms; ``InvalidParams`` when it is not a string, too long, or holds nothing to search
    for (only operators and punctuation)."""
    if not isinstance(text, str):
        raise InvalidParams(f"the query must be a string, not {type(text).__name__}")
    size = len(text.encode(errors="replace"))
    if size > MAX_QUERY_BYTES:
        raise InvalidParams(f"the query is {size:,} bytes long; at most {MAX_QUERY_BYTES:,} are searched")
    terms: list[Term] = []
    for match in _PIECE.finditer(text):
        phrase, word = match.groups()
        piece = phrase if phrase is not None else word
        prefix = phrase is None and piece.endswith("*")
        words = tuple(tokens(piece))
        if not words:
            continue
        if prefix and len(words[-1]) < MIN_PREFIX:
            raise InvalidParams(f"{piece!r}: a prefix needs at least {MIN_PREFIX} letters or digits before the '*'")
        term = Term(words, prefix)
        if term not in terms:
            terms.append(term)
    if not terms:
        raise InvalidParams(f"the query {text[:80]!r} holds no words to search for (letters or digits)")
    if len(terms) > MAX_QUERY_TERMS:
        raise InvalidParams(f"the query holds {len(terms)} terms; at most {MAX_QUERY_TERMS} are searched at once")
    return Query(text, tuple(terms))
