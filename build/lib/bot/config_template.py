"""config.toml rendered from the settings models of :mod:`bot.config`.

The models hold every key, default and description once; :func:`render_defaults` writes
them as TOML: one ``[section]`` per model (``[slack.reactions]`` for a nested one) under its
description, each key's description as a ``#`` comment above ``key = default``. A key whose default is
unset (``None``) is shown commented out with its example value; ``[[channels]]`` is shown
as a commented example. ``threadwise config show-defaults > config.toml`` regenerates the
project's config.toml, and tests/test_config_defaults.py fails when the two disagree.
"""

from __future__ import annotations

import json
import textwrap
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from bot.config import Settings

#: The comment at the top of config.toml.
HEADER = """\
Threadwise configuration. Every setting has a sane default; paths are relative to this file.
Secrets never go here: MISTRAL_API_KEY, TAVILY_API_KEY, SLACK_BOT_TOKEN, SLACK_APP_TOKEN,
SLACK_SIGNING_SECRET, DISCORD_TOKEN and THREADWISE_DATABASE_URL come only from the environment,
as do the model providers' keys (OPENAI_API_KEY, ANTHROPIC_API_KEY, GOOGLE_API_KEY, ...).
Generated from the settings models in bot/config.py: `threadwise config show-defaults > config.toml`."""

WIDTH = 110  # comment lines are wrapped at this many characters


def toml_value(value: Any) -> str:
    """``value`` (str, bool, int, float or a list of them) as a TOML literal.

    Raises:
        TypeError: a value of another type (a settings model has no other).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):  # a JSON string is a TOML basic string (same escapes)
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML literal for {type(value).__name__}: {value!r}")


def description(model: type[BaseModel], name: str) -> str:
    """The description of ``model``'s field ``name``, or of the same field in a base class
    (a subclass that only changes defaults, like ``DiscordReactions``); "" if none."""
    for cls in model.__mro__:
        fields = getattr(cls, "model_fields", None) or {}
        if name in fields and fields[name].description:
            return fields[name].description
    return ""


def _comment(text: str, prefix: str = "# ") -> list[str]:
    return textwrap.wrap(
        text, WIDTH, initial_indent=prefix, subsequent_indent=prefix, break_long_words=False, break_on_hyphens=False
    )


def _keys(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    return [(n, f) for n, f in model.model_fields.items() if not f.exclude]


def _section_model(field: FieldInfo) -> type[BaseModel] | None:
    """The model of a nested section field (``[slack.reactions]``), else None."""
    ann = field.annotation
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def _example(model: type[BaseModel], key: str, field: FieldInfo) -> Any:
    if not field.examples:
        raise TypeError(f"{model.__name__}.{key}: a key without a default needs Field(examples=[...]) for config.toml")
    return field.examples[0]


def _table_model(field: FieldInfo) -> type[BaseModel] | None:
    """The model of a ``list[Model]`` field (an array of tables like ``[[channels]]``), else None."""
    args = typing.get_args(field.annotation)
    return args[0] if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], BaseModel) else None


def _section(name: str, model: type[BaseModel], about: str) -> list[str]:
    lines = ["", *_comment(about), f"[{name}]"]
    nested = []
    for key, field in _keys(model):
        sub = _section_model(field)
        if sub is not None:
            nested.append((key, sub, field.description or ""))
            continue
        lines += _comment(description(model, key))
        if field.default is None:
            lines.append(f"# {key} = {toml_value(_example(model, key, field))}")
        else:
            lines.append(f"{key} = {toml_value(field.default)}")
    for key, sub, about in nested:
        lines += _section(f"{name}.{key}", sub, about)
    return lines


def _example_table(name: str, model: type[BaseModel], about: str) -> list[str]:
    """A commented ``[[name]]`` example: every key with its example value and description."""
    lines = ["", *_comment(about), "# Example:", f"# [[{name}]]"]
    for key, field in _keys(model):
        lines += _comment(description(model, key), "#   ")
        lines.append(f"# {key} = {toml_value(_example(model, key, field))}")
    return lines


def render_defaults(settings_model: type[BaseModel] = Settings) -> str:
    """config.toml with every key of ``settings_model`` at its default, each with its
    description as a comment (the format is described in the module docstring).

    Raises:
        TypeError: a field config.toml cannot show (a type :func:`toml_value` lacks, or an
            unset default without ``Field(examples=[...])``).
    """
    lines = ["# " + line for line in HEADER.splitlines()]
    for name, field in _keys(settings_model):
        section, table = _section_model(field), _table_model(field)
        if section is not None:
            lines += _section(name, section, field.description or "")
        elif table is not None:
            lines += _example_table(name, table, field.description or "")
        else:
            raise TypeError(f"{name}: a top-level key outside a section cannot be shown in config.toml")
    return "\n".join(lines) + "\n"


def missing_descriptions(settings_model: type[BaseModel] = Settings) -> list[str]:
    """Dotted keys of ``settings_model`` (nested sections included) without a description."""
    out = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for key, field in _keys(model):
            if not description(model, key):
                out.append(prefix + key)
            sub = _section_model(field) or _table_model(field)
            if sub is not None:
                walk(sub, f"{prefix}{key}.")

    walk(settings_model, "")
    return out
