"""ACP content blocks (``session/prompt``'s ``prompt``), checked at the edge with msgspec structs.

The shapes are ACP schema v1's ``ContentBlock`` variants: ``text``, ``image``, ``audio``, ``resource_link`` and
``resource`` (text or blob resource contents). A required field of the wrong type, or missing, makes the request
-32602 naming the field (``prompt[0].text``). An optional field of the wrong type is dropped, as the schema's
``x-deserialize-default-on-error`` says the reference implementation does. A block of a type this version does
not know - but an object with a string ``type`` - is ignored: ACP is extensible, and a newer client may send
blocks an older agent skips. Unknown fields are not kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Final

import msgspec
from msgspec import UNSET, UnsetType

from registry.acp.params import convert_params
from registry.commands import json_type
from registry.errors import InvalidParams

__all__ = [
    "AudioContent",
    "ContentBlock",
    "EmbeddedResource",
    "ImageContent",
    "ResourceContents",
    "ResourceLink",
    "TextContent",
    "block_text",
    "blocks_text",
    "prompt_blocks",
]


class _Lenient(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """Optional fields typed ``Any`` so a wrong one never fails the block; ``__post_init__`` drops it."""

    _lenient: ClassVar[dict[str, tuple[type, ...]]] = {}

    meta: Any = msgspec.field(default=UNSET, name="_meta")

    def __post_init__(self) -> None:
        for name, types in {"meta": (dict,), **self._lenient}.items():
            value = getattr(self, name)
            if value is not UNSET and value is not None and (isinstance(value, bool) or not isinstance(value, types)):
                setattr(self, name, UNSET)


class _Block(_Lenient, tag_field="type"):
    _lenient: ClassVar[dict[str, tuple[type, ...]]] = {"annotations": (dict,)}

    annotations: Any = UNSET


class TextContent(_Block, tag="text", kw_only=True):
    text: str


class ImageContent(_Block, tag="image", kw_only=True):
    _lenient: ClassVar[dict[str, tuple[type, ...]]] = {"annotations": (dict,), "uri": (str,)}

    data: str
    mime_type: str
    uri: Any = UNSET


class AudioContent(_Block, tag="audio", kw_only=True):
    data: str
    mime_type: str


class ResourceLink(_Block, tag="resource_link", kw_only=True):
    _lenient: ClassVar[dict[str, tuple[type, ...]]] = {
        "annotations": (dict,),
        "title": (str,),
        "description": (str,),
        "mime_type": (str,),
        "size": (int,),
    }

    name: str
    uri: str
    title: Any = UNSET
    description: Any = UNSET
    mime_type: Any = UNSET
    size: Any = UNSET


class ResourceContents(_Lenient, kw_only=True):
    """ACP's ``TextResourceContents`` (``text``) or ``BlobResourceContents`` (``blob``): exactly one of them."""

    _lenient: ClassVar[dict[str, tuple[type, ...]]] = {"mime_type": (str,)}

    uri: str
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET
    mime_type: Any = UNSET

    def __post_init__(self) -> None:
        if (self.text is UNSET) == (self.blob is UNSET):
            raise ValueError("must hold either a text or a blob")
        super().__post_init__()


class EmbeddedResource(_Block, tag="resource", kw_only=True):
    resource: ResourceContents


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource

_SHAPES: dict[str, type[_Block]] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource_link": ResourceLink,
    "resource": EmbeddedResource,
}


def prompt_blocks(prompt: object, field: str = "prompt") -> list[ContentBlock]:
    """The blocks of ``prompt`` this agent knows, checked; unknown well-formed ones are left out."""
    if not isinstance(prompt, list):
        raise InvalidParams(f"{field} must be an array of content blocks, not {json_type(prompt)}", field=field)
    blocks: list[ContentBlock] = []
    for index, block in enumerate(prompt):
        where = f"{field}[{index}]"
        if not isinstance(block, dict):
            problem = f"must be a content block (an object), not {json_type(block)}"
            raise InvalidParams(f"{where} {problem}", field=where)
        kind = block.get("type")
        if not isinstance(kind, str):
            problem = "is missing" if "type" not in block else f"must be a string, not {json_type(kind)}"
            raise InvalidParams(f"{where}.type {problem}", field=f"{where}.type")
        shape = _SHAPES.get(kind)
        if shape is not None:  # else a block type from a newer ACP: ignored
            blocks.append(convert_params(block, shape, where))  # type: ignore[arg-type]
    return blocks


_NAMED: Final = 2048  # characters of a name, URI or media type kept in a marker: a marker names, it does not carry


def block_text(block: object) -> str:
    """What a content block (as JSON: a dict) says in a conversation as it is kept: a text block's text; a resource
    link or an embedded resource by its name and URI (``[resource: name <uri>]``, never its contents); an image or
    audio by a marker with its media type (``[image: image/png]``, never its bytes); a block of another type by a
    marker naming the type. Anything else (not a block) says nothing."""
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return text if isinstance(text, str) else ""
    if kind == "resource_link":
        return _resource(block.get("name"), block.get("uri"))
    if kind == "resource":
        inner = block.get("resource")
        if isinstance(inner, dict):
            return _resource(inner.get("name"), inner.get("uri"))
        return "[resource]"
    if kind in ("image", "audio"):
        mime = block.get("mimeType")
        return f"[{kind}: {mime[:_NAMED]}]" if isinstance(mime, str) and mime else f"[{kind}]"
    return f"[{kind[:64]}]" if isinstance(kind, str) and kind else ""


def blocks_text(blocks: Iterable[object]) -> str:
    """The text of several blocks said together (a prompt, an agent's chunks): texts joined as they are - a
    client splits a sentence around a mention, an agent a word across chunks - and a marker set apart by a space
    from words it would otherwise touch."""
    out: list[str] = []
    last_marker = False
    for block in blocks:
        text = block_text(block)
        if not text:
            continue
        marker = not (isinstance(block, dict) and block.get("type") == "text")
        if out and (marker or last_marker) and not out[-1][-1:].isspace() and not text[:1].isspace():
            out.append(" ")
        out.append(text)
        last_marker = marker
    return "".join(out)


def _resource(name: object, uri: object) -> str:
    uri = uri[:_NAMED] if isinstance(uri, str) else ""
    name = name[:_NAMED] if isinstance(name, str) and name else uri.rstrip("/").rsplit("/", 1)[-1]
    if name and uri and name != uri:
        return f"[resource: {name} <{uri}>]"
    return f"[resource: <{uri}>]" if uri else f"[resource: {name}]" if name else "[resource]"
