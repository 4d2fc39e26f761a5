"""Routing without a chat model (``[graph] composer = "extractive"``): embedding
similarity of the message to the knowledge base and to example small-talk, general
knowledge and current-events questions, plus the lexical small-talk signal.

The decision (:meth:`OfflineRouter.route`):

1. a greeting or thanks (:func:`graphs.signals.is_small_talk`) -> ``direct``; a message an
   expert's learned answer is about (:class:`graphs.learned.LearnedMeaning`, by meaning, not by
   wording) -> ``vectorstore``;
2. a question about the present moment ("right now", "the latest release", "is X down", not
   "which version is currently supported": :func:`graphs.signals.asks_for_now`) -> ``websearch``;
3. a follow-up (the message is read with the thread's history, :func:`graphs.offline.follows_thread`;
   a new question asked later in a thread is routed as in a new thread, rule 2 included)
   -> ``vectorstore`` unless it is small talk;
4. the class whose examples are most similar wins over the knowledge base when its
   similarity beats the knowledge base's best chunk by ``margin`` (calibrated on the
   development set by ``bench/calibrate_offline.py``); current events -> ``websearch``,
   small talk and general knowledge -> ``direct``; else ``vectorstore``. The embeddings of
   short questions lie close to the examples of every class, so the words have a veto: small
   talk wins only for a message with a greeting, thanks or goodbye word or no content word
   (:func:`graphs.signals.sounds_like_chat`: not "how do I uninstall it?"), general knowledge
   only for a message that does not speak of the asker's own setup
   (:func:`graphs.signals.speaks_of_own_setup`: not "how much RAM do I need") nor of a limit, size
   bound or price (:func:`graphs.signals.asks_for_bound`: not "max file size"), and neither for
   a single word or code (:func:`graphs.signals.is_lookup`: "AB-500"), current events only for
   a message that says when or that something changed (:func:`graphs.signals.speaks_of_time`:
   not "is Windows 10 supported?"), nor for a question asking which version is the newest
   (:func:`graphs.releases.asks_newest_version`: "what's the latest version?", a changelog's newest
   entry); a vetoed class sends the
   message to the knowledge base, whose grader then decides whether a page answers it.

Without embeddings only rule 1 applies (everything else goes to the knowledge base).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from graphs import releases, signals
from graphs.extractive import TextEmbedder
from graphs.learned import MEANING_MATCH

if TYPE_CHECKING:
    from graphs.extractive import Extractive
    from graphs.knowledge import KnowledgeBase
    from graphs.learned import EntryFilter, LearnedMeaning

# Example messages of each class (generic, not taken from any eval set).
SMALL_TALK = [
    "hi",
    "hello there",
    "good morning everyone",
    "thanks!",
    "thank you so much",
    "thanks, that worked",
    "that solved my problem, thank you",
    "bye",
    "see you tomorrow",
    "how are you?",
    "you're awesome",
    "ok cool",
    "lol nice",
    "hey bot",
    "hello, is anybody here?",
]
GENERAL = [
    "what is the difference between TCP and UDP",
    "explain recursion in one sentence",
    "what does HTTP status 404 mean",
    "what is a mutex",
    "define latency vs throughput",
    "what's the difference between a list and a tuple in general",
    "what does REST stand for",
    "explain big O notation briefly",
    "what is a race condition",
    "how many bytes in a kilobyte",
    "what is DNS",
    "meaning of the word deprecated",
]
CURRENT = [
    "what's the weather tomorrow",
    "is github down right now?",
    "what is the latest version released this week",
    "current exchange rate of dollars to yen",
    "any news today about the outage",
    "who won the game last night",
    "stock price of nvidia today",
    "is the api having an outage right now",
    "what's new this week in tech news",
    "did they release a new model yesterday",
    "what time is it in tokyo now",
    "is slack down for everyone",
]

# Questions about the world outside any team (sports, cooking, trivia, general coding) and questions
# about a team's own workplace, people and product that its documents may leave out (generic, not
# taken from any eval set): when the knowledge base answers nothing, the first kind gets the polite
# "not about the documents" reply and the second goes to the experts (OfflineRouter.off_topic).
WORLD = [
    "who won the world cup final",
    "what was the score of the football match",
    "how do I make pancakes",
    "how long should I cook rice",
    "what's a good recipe for dinner tonight",
    "how do I undo my last git commit",
    "how do I sort a dictionary by value in python",
    "how do I center a div in css",
    "what is the capital of canada",
    "how tall is mount everest",
    "how many calories are in a banana",
    "who wrote hamlet",
    "what is the speed of light",
    "tell me a joke",
    "which movie won the oscar for best picture",
    "what is the difference between TCP and UDP",
    "explain recursion in one sentence",
    "what is a race condition",
]
TEAM = [
    "who is our head of engineering",
    "when is the team offsite",
    "where is the office",
    "who do I ask about payroll",
    "does the product work with salesforce",
    "what's the wifi password",
    "who approves my holiday request",
    "when is the next all-hands meeting",
    "is there parking at the office",
    "can it export to excel",
    "who owns the billing service",
    "which team handles customer support tickets",
    "how do I get access to the staging server",
    "what's our policy on working from home",
]
WORLD_MARGIN = 0.05  # the world must beat the team by this (MiniLM cosines) for the polite reply

# calibrated on the development set (bench/calibrate_offline.py: both halves pick these)
MARGIN = 0.06  # small talk / general knowledge must beat the knowledge base's best chunk by this
CURRENT_MARGIN = -0.1  # current events: may trail the knowledge base by up to 0.1
FOREIGN_MARGIN = 0.1  # both margins for a question in another language (multilingual encoder)


@dataclass
class RouteSignals:
    """Similarities (cosine, -1..1) of the message to each class; -1 without embeddings."""

    kb: float = -1.0
    small_talk: float = -1.0
    general: float = -1.0
    current: float = -1.0
    small_talk_words: bool = False
    learned: float = -1.0  # best cosine with a learned entry (graphs.learned.LearnedMeaning), -1: none
    asks_for_now: bool = False  # :func:`graphs.signals.asks_for_now`
    # :func:`graphs.signals.asks_for_link` or :func:`~graphs.signals.asks_for_page`: the team's own links and
    # pages are in its documents
    asks_for_link: bool = False
    foreign: bool = False  # measured with the multilingual encoder (another language than the documents)
    chat_words: bool = True  # :func:`graphs.signals.sounds_like_chat`: small talk as far as its words go
    own_setup: bool = False  # :func:`graphs.signals.speaks_of_own_setup`: "do I need", "our builds"
    bound: bool = False  # :func:`graphs.signals.asks_for_bound`: "max file size", "what does it cost"
    team_role: bool = False  # :func:`graphs.signals.asks_who_in_team`: "who approves a hotfix?"
    lookup: bool = False  # :func:`graphs.signals.is_lookup`: one word or code ("AB-500")
    timely: bool = True  # :func:`graphs.signals.speaks_of_time`: "yet", "still", "tomorrow", "this week"
    # :func:`graphs.releases.asks_newest_version`: "whats the latest version", "which version is current"
    newest_version: bool = False
    world: float = -1.0  # best cosine with the WORLD examples (English only)
    team: float = -1.0  # best cosine with the TEAM examples (English only)


class OfflineRouter:
    """Routes a message with embeddings and lexical signals (no chat-model call).

    Args:
        embedder: a :class:`~graphs.extractive.TextEmbedder` (embeddings may be None).
        knowledge: the knowledge base; its live snapshot's chunk vectors give the
            similarity to the knowledge base (None or no vectors: rule 1 only).
        margin: how much a class's similarity must beat the knowledge base's.
    """

    def __init__(
        self,
        embedder: TextEmbedder,
        knowledge: KnowledgeBase | None,
        margin: float = MARGIN,
        current_margin: float = CURRENT_MARGIN,
        extractive: Extractive | None = None,
        learned: LearnedMeaning | None = None,
    ):
        self.embedder = embedder
        self.learned = learned  # the experts' answers, matched by meaning
        self.knowledge = knowledge
        self.margin = margin
        self.current_margin = current_margin
        self.extractive = extractive  # its multilingual encoder routes questions in other languages
        self._examples: dict[str, np.ndarray] | None = None
        self._cross_examples: dict[str, np.ndarray] | None = None

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = self.embedder(texts)
        if vecs is None:  # callers check embedder.available first
            raise RuntimeError("the offline router needs embeddings")
        return vecs

    def _class_vectors(self) -> dict[str, np.ndarray]:
        if self._examples is None:
            self._examples = {
                name: self._embed(texts)
                for name, texts in (
                    ("small_talk", SMALL_TALK),
                    ("general", GENERAL),
                    ("current", CURRENT),
                    ("world", WORLD),
                    ("team", TEAM),
                )
            }
        return self._examples

    def signals(self, message: str, learned: bool | EntryFilter = True) -> RouteSignals:
        """Similarities of ``message`` to the knowledge base and the example classes (with
        the multilingual encoder for a message in another language than the documents), and to
        the learned entries (``learned``: the turn may use them; a filter: those it allows)."""
        out = RouteSignals(
            small_talk_words=signals.is_small_talk(message),
            asks_for_now=signals.asks_for_now(message),
            asks_for_link=signals.asks_for_link(message) or signals.asks_for_page(message),
            chat_words=signals.sounds_like_chat(message),
            own_setup=signals.speaks_of_own_setup(message),
            bound=signals.asks_for_bound(message),
            team_role=signals.asks_who_in_team(message),
            lookup=signals.is_lookup(message),
            timely=signals.speaks_of_time(message) or signals.asks_for_now(message),
            newest_version=releases.asks_newest_version(message),
        )
        if not self.embedder.available or not message.strip():
            return out
        if learned is not False and self.learned is not None:
            out.learned = self.learned.best(message, None if learned is True else learned)
        cross = (
            self.extractive.cross_index()
            if self.extractive is not None and self.extractive.foreign([message])
            else None
        )
        if cross is not None:
            qv = cross.query_vectors([message])[0]
            _, vecs = cross.vectors()
            if len(vecs):
                out.kb = float(np.max(vecs @ qv))
            if self._cross_examples is None:
                self._cross_examples = {
                    name: cross.query_vectors(texts)
                    for name, texts in (("small_talk", SMALL_TALK), ("general", GENERAL), ("current", CURRENT))
                }
            for name, vecs in self._cross_examples.items():
                setattr(out, name, float(np.max(vecs @ qv)))
            out.foreign = True
            return out
        qv = self._embed([message])[0]
        snap = getattr(self.knowledge, "snapshot", None) if self.knowledge is not None else None
        vectors = getattr(snap, "vectors", None)
        if vectors is not None and len(vectors) and vectors.shape[1] == qv.shape[0]:
            out.kb = float(np.max(vectors @ qv))
        for name, vecs in self._class_vectors().items():
            setattr(out, name, float(np.max(vecs @ qv)))
        return out

    @staticmethod
    def chats(s: RouteSignals) -> bool:
        """Signals of small talk rather than a general-knowledge question (the canned reply greets
        rather than saying what the bot answers): a greeting's words, or an embedding at least as near
        the small-talk examples as the general-knowledge ones."""
        return s.small_talk_words or s.small_talk >= s.general

    def route(self, message: str, has_history: bool = False) -> tuple[str, RouteSignals]:
        """``(route, signals)``: route is ``direct``, ``websearch`` or ``vectorstore``."""
        s = self.signals(message)
        return self.decide(s, has_history), s

    def decide(self, s: RouteSignals, has_history: bool = False) -> str:
        """The route for precomputed signals (the rules of the module docstring)."""
        if s.small_talk_words:
            return "direct"
        if s.learned >= MEANING_MATCH:
            return "vectorstore"  # an expert answered it before ("wifi password pls"): never small talk
        if s.asks_for_now and not has_history:
            return "websearch"  # "right now", "today", "is X down": only a live source can tell
        if has_history or s.kb < -0.5 or s.asks_for_link:
            return "vectorstore"  # "where's the link to the tracking page?", "which file configures X?": its pages
        best = max(("small_talk", s.small_talk), ("general", s.general), ("current", s.current), key=lambda x: x[1])
        # the multilingual encoder's similarities run lower and closer together than MiniLM's:
        # a class must beat the knowledge base clearly
        margin, current_margin = (FOREIGN_MARGIN, FOREIGN_MARGIN) if s.foreign else (self.margin, self.current_margin)
        if best[0] == "current" and best[1] >= s.kb + current_margin and not self.vetoed(best[0], s):
            return "websearch"
        if best[0] != "current" and best[1] >= s.kb + margin and not self.vetoed(best[0], s):
            return "direct"
        return "vectorstore"

    @staticmethod
    def off_topic(s: RouteSignals) -> bool:
        """Whether a message the knowledge base found nothing for is about the world outside the
        team ("how long do I cook pasta", "who won the derby", "how do I rebase in git"): nearer the
        :data:`WORLD` examples than the :data:`TEAM` ones by :data:`WORLD_MARGIN`, and than the
        knowledge base's best chunk. It then gets the polite reply that it is not about the
        documents, not a help request paging the experts; a team question nobody documented ("who
        runs marketing?", "when is the summer party?") still goes to them, and so does one asking who
        in the team does, approves or owns something (``s.team_role``: "who approves a hotfix?"),
        whatever its embedding is near. English only."""
        if s.team_role and not s.foreign:
            return False
        return not s.foreign and s.world >= s.team + WORLD_MARGIN and s.world > s.kb

    @staticmethod
    def vetoed(name: str, s: RouteSignals) -> bool:
        """Whether the message's words rule out the class ``name`` ("small_talk", "general" or
        "current") that its embedding is nearest to (rule 4: a question with content words and no
        greeting is no small talk, one about the asker's own setup, a limit or a price, who in the
        team does something, or a single word no general
        knowledge, one that never says when or asks for the newest version no current events). The
        words are read in English
        only: a message in another language is routed on its embedding."""
        if s.foreign:
            return False
        if name == "current":
            # "whats the latest version?" asks what a changelog states, its newest entry ("are trains
            # running tomorrow?" is still news)
            return s.lookup or not s.timely or s.newest_version
        if name == "small_talk":
            return s.lookup or not s.chat_words
        # "max file size": a limit or a price is what the product's pages state; "who approves a
        # hotfix?": the team's roles are what its experts know
        return s.lookup or s.own_setup or s.bound or s.team_role


def capabilities(kb_description: str) -> str:
    """What the bot does and what its knowledge base holds, for a message asking what it is for
    (:func:`graphs.signals.asks_what_bot_does`), with a chat model or without. ``kb_description`` is
    config text (``[knowledge] description``)."""
    return (
        f"I answer questions from {kb_description}. Ask me in your own words: I search it and answer "
        "with the passages that say it, citing their pages. When I can't find the answer there, I ask "
        "the team's experts in the thread, and I remember what they answer for the next person who asks."
    )


_THANKS = re.compile(r"\b(thanks?|thx|ty|cheers|appreciated?)\b", re.I)
_BYE = re.compile(r"\b(bye|goodbye|see you|later|good night)\b", re.I)


def canned_reply(message: str, kb_description: str, small_talk: bool = True) -> str:
    """A short reply without a chat model: to thanks, to a goodbye, to a greeting
    (``small_talk``), and for other messages routed away from the documents (general
    knowledge) a pointer to what can be answered. ``kb_description`` is config text
    (``[knowledge] description``)."""
    if _THANKS.search(message):
        return "You're welcome! Ask again any time."
    if _BYE.search(message):
        return "Bye! Ask again any time."
    if small_talk or signals.is_small_talk(message):
        return f"Hi! Ask me a question about {kb_description}."
    return (
        f"I answer from {kb_description}, and this does not look like a question about it. "
        "Ask me about the documentation, or ask a teammate."
    )
