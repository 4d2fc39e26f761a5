"""``threadwise models check``: which chat model and embedder the settings name, reached
with one structured call and one embedding, each timed; a wrong key, base URL or model name
is one line with its cause (exit code 2)."""

from __future__ import annotations

import argparse

from bot.cli.output import out
from bot.config import Secrets, Settings, export_model_keys


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``models`` to the command parser ``sub``."""
    p = sub.add_parser("models", parents=[common], help="the chat model and embedder: check that they answer")
    p.add_argument("action", choices=["check"], help="check: one structured call and one embedding, timed")
    p.set_defaults(handler=cmd_models)


async def cmd_models(args: argparse.Namespace, settings: Settings) -> int:
    """Print one line per model (what is configured, by which setting, and the call's
    result and latency); exit code 0 when both answered, 2 when one did not."""
    from graphs.models import ModelUnavailableError, build_chat_model, build_embeddings, close_chat_model
    from graphs.models.check import Probe, probe_chat, probe_embeddings
    from graphs.models.embeddings import embedding_choice
    from graphs.models.providers import resolve_chat_spec

    export_model_keys()  # provider keys from .env or secret files, as `run` does
    secrets = Secrets.from_env()
    m = settings.models
    timeout = float(m.request_timeout_seconds)
    probes: list[Probe] = []
    try:
        spec = resolve_chat_spec(m, secrets.mistral_api_key)
        where = f" at {spec.base_url}" if spec.base_url else ""
        out.console.print(f"chat model: {spec.name}{where} (set by {spec.chosen_by})", markup=False, highlight=False)
        model = build_chat_model(m, secrets.mistral_api_key, spec=spec)
    except ModelUnavailableError as exc:
        probes.append(Probe("chat model", "", False, 0.0, str(exc), True))
    else:
        try:
            probes.append(await probe_chat(model, timeout=timeout, base_url=spec.base_url, method=m.structured_output))
        finally:
            await close_chat_model(model)
    try:
        provider, name, chosen_by = embedding_choice(settings.knowledge.embeddings, m, secrets.mistral_api_key)
        out.console.print(
            f"embeddings: {provider}{':' + name if name else ''} (set by {chosen_by})", markup=False, highlight=False
        )
        emb, emb_id = build_embeddings(settings.knowledge.embeddings, m, secrets.mistral_api_key)
    except ModelUnavailableError as exc:
        probes.append(Probe("embeddings", "", False, 0.0, str(exc), True))
    else:
        probes.append(await probe_embeddings(emb, emb_id, timeout=timeout))
    for probe in probes:
        if probe.ok:
            out.console.print(probe.line(), markup=False, highlight=False)
        elif probe.name:
            out.err.print(probe.line(), style="red", markup=False, highlight=False)
        else:
            out.err.print(f"{probe.part}: {probe.detail}", style="red", markup=False, highlight=False)
    return 0 if all(p.ok for p in probes) else 2
