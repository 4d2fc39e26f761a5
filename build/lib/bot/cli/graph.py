"""``threadwise graph``: print the answering graph as Mermaid text (no model is built or called)."""

from __future__ import annotations

import argparse

from bot.config import Settings


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``graph`` to the command parser ``sub``."""
    sub.add_parser("graph", parents=[common], help="print the graph as Mermaid text").set_defaults(handler=cmd_graph)


def cmd_graph(args: argparse.Namespace, settings: Settings) -> int:
    """Print the graph's Mermaid text on stdout."""
    # langgraph and the graph's nodes load only here
    from bot.runtime import graph_config
    from graphs.adaptive_rag import build_graph
    from graphs.knowledge import KnowledgeBase
    from graphs.models import ModelCaller, UnavailableChatModel
    from graphs.nodes import GraphDeps

    # drawing needs the nodes, not a model: no model is built or called
    model = UnavailableChatModel(reason="the graph is only drawn")
    deps = GraphDeps(
        ModelCaller(model), KnowledgeBase(settings.path("data/none"), []), None, graph_config(settings, model)
    )
    print(build_graph(deps).get_graph().draw_mermaid())
    return 0
