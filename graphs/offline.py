"""The model-free pieces of the graph (``[graph] composer = "extractive"``): the
extractive grader/composer and the embedding router, built on first use, and the
question variants they score against."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from graphs import signals
from graphs.extractive import Extractive, TextEmbedder
from graphs.knowledge import KnowledgeBase
from graphs.knowledge.crosslingual import is_foreign, load_encoder
from graphs.learned import LearnedMeaning, LearnedStore, usable_for
from graphs.messages import history_before_last, kb_queries, last_user_message, message_text
from graphs.offline_router import OfflineRouter, RouteSignals
from graphs.state import Doc, RAGState, scope_of


class OfflineKit:
    """:class:`~graphs.extractive.Extractive` and :class:`~graphs.offline_router.OfflineRouter`
    over the knowledge base's embeddings, built together on first use (loading the
    embeddings is slow; a graph that never runs offline never pays for it).

    Args:
        knowledge: the knowledge base (its ``embeddings`` may be None: lexical only).
        learned: the experts' learned entries (None: none), matched to a message by meaning
            (:attr:`learned_meaning`: the router and the search use it).
    """

    def __init__(
        self, knowledge: KnowledgeBase, cross_language: bool = True, learned: LearnedStore | None = None
    ) -> None:
        self.knowledge = knowledge
        self.cross_language = cross_language
        self.embedder = TextEmbedder(knowledge.embeddings)  # one vector cache for the router, scorer and entries
        self.learned_meaning = LearnedMeaning(self.embedder, learned)
        self._extractive: Extractive | None = None
        self._router: OfflineRouter | None = None
        self._lock = threading.Lock()

    @property
    def extractive(self) -> Extractive:
        """The extractive grader/composer (built on first use)."""
        with self._lock:
            if self._extractive is None:
                cross = load_encoder() if self.cross_language and self.knowledge.embeddings is not None else None
                extractive = Extractive(self.embedder, self.knowledge, cross_encoder=cross)
                self._router = OfflineRouter(
                    extractive.embedder, self.knowledge, extractive=extractive, learned=self.learned_meaning
                )
                self._extractive = extractive
            return self._extractive

    @property
    def router(self) -> OfflineRouter:
        """The embedding router (built with :attr:`extractive`)."""
        self.extractive  # noqa: B018 - builds both
        assert self._router is not None
        return self._router


# A follow-up says it continues: it opens with a conjunction or an acknowledgement ("and sick
# leave, same cap?", "what about on windows?", "ok and once they approve...") or its opening
# words point back ("do those ever stop", "does the same trick work", "that one").
_CONTINUES_START = re.compile(
    r"^\W*(?:and|or|but|plus|so|then|what\s+about|how\s+about|what\s+if|ok(?:ay)?|cool|nice|great|"
    r"thanks?|got\s+it)\b",
    re.I,
)
_POINTS_BACK = re.compile(r"\b(?:same|those|these|them|that\s+one|this\s+one|too|either|also|as\s+well)\b", re.I)
# Words that may point back but often do not ("can I run it with postgres?" names the product):
# they keep the thread only for a message whose own search is not confident.
_MAY_POINT_BACK = re.compile(r"\b(?:it|its|that|this|they|their|there|then|one)\b", re.I)
OPENING_WORDS = 8  # how far into a message a word pointing back counts (a long question's later "them" is its own)

#: The router's knowledge-base signal (best chunk cosine of the message alone, MiniLM) from which
#: a message finds its own answer: with nothing saying it continues, it is a new question
#: (bench/README.md "Offline search in a thread": the development set's topic switches and
#: follow-ups).
CONFIDENT_ALONE = 0.55
#: Cosine of the message with the thread's previous question from which they are about the same thing.
RELATED = 0.4


def continues(message: str) -> bool:
    """``message`` says it continues the thread (:data:`_CONTINUES_START`, or a word pointing
    back among its first :data:`OPENING_WORDS`)."""
    opening = " ".join(message.split()[:OPENING_WORDS])
    return bool(_CONTINUES_START.search(message) or _POINTS_BACK.search(opening))


def stands_alone(message: str, earlier: str, kb: float | None = None, similarity: float | None = None) -> bool:
    """``message``, asked after the question ``earlier`` in one thread, is a new question to be
    answered on its own (not a follow-up read with the thread): it is in another language
    than ``earlier``; or nothing in it says it continues (:func:`continues`) and either its own
    search is confident (``kb``, the router's knowledge-base similarity, at least
    :data:`CONFIDENT_ALONE`) or it shares no term and no meaning (``similarity`` below
    :data:`RELATED`) with ``earlier`` and its opening words point back at nothing."""
    if is_foreign(message) != is_foreign(earlier):
        return True
    if continues(message):
        return False
    if kb is not None and kb >= CONFIDENT_ALONE:
        return True
    shared = signals.terms(message) & signals.terms(earlier)
    related = bool(shared) or (similarity is not None and similarity >= RELATED)
    return not related and not _MAY_POINT_BACK.search(" ".join(message.split()[:OPENING_WORDS]))


def follows_thread(
    state: RAGState, history_limit: int, router: OfflineRouter | None = None, sig: RouteSignals | None = None
) -> bool:
    """The newest message is a follow-up, to be read with the thread's history: the thread has
    an earlier question (among ``history_limit`` messages) and the message does not stand alone
    (:func:`stands_alone`, with ``router``'s knowledge-base similarity of the message, ``sig``
    when already computed, and its similarity to the previous question; without a router on
    the words only). Decided once per message, by the route step (:func:`route_message`),
    which keeps it in ``state["follow_up"]`` for :func:`thread_history`."""
    earlier = [message_text(m) for m in history_before_last(state, history_limit) if isinstance(m, HumanMessage)]
    if not earlier:
        return False
    raw = last_user_message(state)
    kb = similarity = None
    if router is not None and router.embedder.available and raw.strip() and earlier[-1].strip():
        sig = sig if sig is not None else router.signals(raw)
        kb = None if sig.foreign else sig.kb
        vecs = router.embedder([raw, earlier[-1]])
        if vecs is not None:
            similarity = float(vecs[0] @ vecs[1])
    return not stands_alone(raw, earlier[-1], kb, similarity)


def route_message(
    state: RAGState,
    history_limit: int,
    router: OfflineRouter,
    k: int = 5,
    define: Callable[[Extractive, str, list[Doc]], bool] | None = None,
) -> tuple[str, RouteSignals, bool]:
    """The offline route step for the newest message: ``(route, signals, follow_up)``. The
    router's signals (the message against every chunk vector and the example classes) are
    computed once and decide both whether it is a follow-up (:func:`follows_thread`) and its
    route (a new question in a thread is routed as in a new thread, the present-moment rule
    too); the learned entries count when the turn's scope allows them. A message opening with
    thanks or a greeting is routed as the question it goes on to ask
    (:func:`graphs.signals.after_chat_opening`). A message routed as
    general knowledge goes to the knowledge base when its ``k`` best chunks answer it strongly:
    ``define(extractive, message, docs)``, the graders' :func:`graphs.graders.documents_define`
    (passed in, as the graders read this module; without it the router's route stands)."""
    scope = scope_of(state)
    # "thanks, but how do I uninstall on mac?" is routed as the question it asks: the thanks would
    # make it read like small talk
    message = signals.after_chat_opening(last_user_message(state))
    sig = router.signals(message, learned=usable_for(scope) if scope["learning"] else False)
    if message != last_user_message(state) and signals.asks_yes_no(message):
        # after a greeting, whether someone is there is small talk ("hello, is anybody here?", "hey,
        # are you a bot?"): the question's meaning decides, not the words' veto; a question asking
        # how, what or where is never small talk
        sig.chat_words = True
    follow_up = follows_thread(state, history_limit, router, sig)
    route = router.decide(sig, follow_up)
    if route == "direct" and define is not None and router.extractive is not None and as_general_knowledge(sig):
        if define(router.extractive, message, router.extractive.retrieve([message], k)):
            route = "vectorstore"
    return route, sig, follow_up


def as_general_knowledge(sig: RouteSignals) -> bool:
    """The router sends the message away as general knowledge: no greeting word, and its embedding
    is nearer the general-knowledge examples than the small-talk ones."""
    return not sig.small_talk_words and sig.general > sig.small_talk


def thread_history(state: RAGState, history_limit: int) -> list[AnyMessage]:
    """The thread's messages the offline path reads the newest message with: up to
    ``history_limit`` before it for a follow-up, none for a message that stands alone (a new
    question in a thread is searched, graded, composed and routed as in a new thread). The
    decision is the route step's, ``state["follow_up"]``; a state no route step has seen (a
    test's or a benchmark's) is decided on its words (:func:`follows_thread` without a router)."""
    follow_up = state.get("follow_up")
    if follow_up is None:
        follow_up = follows_thread(state, history_limit)
    return history_before_last(state, history_limit) if follow_up else []


# A name in code without spaces in an answer ("raise `cache.max_size_mb`"): a setting, a key, a
# function; a command with its arguments is not a name a follow-up points at.
_NAMED = re.compile(r"`([^`\s]{3,60})`")
NAMES_KEPT = 2  # names of the previous answer a follow-up pointing back is read with
# A follow-up asking the thread's question again about another thing it names ("same for docker?", "what about
# docker then?", "is it the same on mysql?", "does that work on docker too?"): its words point back at the question,
# and what it asks about now is the thing it names, not what the previous answer names
_PRONOUN = r"(?:it|its|that|this|them|those|these|they|there|one|the\s+same)\b"
_VARIANT = re.compile(
    rf"\b(?:what|how)\s+about\s+(?:on\s+|for\s+|with\s+|in\s+|under\s+)?(?!{_PRONOUN})\w|"
    rf"\b(?:same|works?|apply|applies)\s+(?:\w+\s+)?(?:for|on|with|in|under)\s+(?!{_PRONOUN})\w",
    re.I,
)


def resolved_message(state: RAGState, history_limit: int) -> str:
    """The newest message, for a follow-up (:func:`thread_history`) whose opening words point back
    ("whats the default for that setting", "how do I turn it off") and that names nothing in code
    itself, with the names in code the previous answer's first paragraph quotes (at most
    :data:`NAMES_KEPT`), in parentheses: ``"whats the default for that setting
    (cache.max_size_mb)"`` after an answer saying "raise `cache.max_size_mb`". What "that setting"
    is stands in the answer, not in the user's earlier words. Else the message as written, without
    the thanks or greeting it opens with (:func:`graphs.signals.after_chat_opening`: "morning!
    where's the export?" is graded and answered as "where's the export?")."""
    raw = signals.after_chat_opening(last_user_message(state))
    opening = " ".join(raw.split()[:OPENING_WORDS])
    if (
        _NAMED.search(raw)
        or _VARIANT.search(raw)
        or not (_POINTS_BACK.search(opening) or _MAY_POINT_BACK.search(opening))
    ):
        return raw
    answers = [message_text(m) for m in thread_history(state, history_limit) if isinstance(m, AIMessage)]
    if not answers:
        return raw
    names = list(dict.fromkeys(_NAMED.findall(answers[-1].split("\n\n", 1)[0])))[:NAMES_KEPT]
    return f"{raw} ({' '.join(names)})" if names else raw


def offline_questions(state: RAGState, history_limit: int) -> list[str]:
    """Question variants the extractive graders and composer score against: the
    user's words (the message; for a follow-up, :func:`thread_history`, also the previous
    user message joined with it), never a rewritten keyword query (documents must answer the
    question)."""
    raw = resolved_message(state, history_limit)
    prev = [message_text(m) for m in thread_history(state, history_limit) if isinstance(m, HumanMessage)]
    return [raw, f"{prev[-1]} {raw}"] if prev else [raw]


#: RRF weight of the search variants that join the thread's history to the message (the
#: message alone weighs 1): a follow-up is searched mostly by its own words, while a real
#: follow-up still finds its page (lower weights lost follow-ups).
HISTORY_WEIGHT = 0.75


def offline_search_queries(state: RAGState, history_limit: int) -> list[str | tuple[str, float]]:
    """Search variants without a model: :func:`~graphs.messages.kb_queries` plus, for a
    follow-up (:func:`thread_history`), the previous answer's opening joined with the message
    (it names what "it" is, which a follow-up like "and how do I stop it?" does not say), as
    ``(query, weight)`` where the weight is not 1: the variants that carry the thread's
    history weigh :data:`HISTORY_WEIGHT`. A message that stands alone is searched without
    the thread's history."""
    raw = last_user_message(state)
    history = thread_history(state, history_limit)
    prev_user = [message_text(m) for m in history_before_last(state, history_limit) if isinstance(m, HumanMessage)]
    joined = f"{prev_user[-1]} {raw}".strip() if prev_user else None  # kb_queries' history variant
    queries: list[str | tuple[str, float]] = [
        (q, HISTORY_WEIGHT) if q == joined else q for q in kb_queries(state, history_limit) if history or q != joined
    ]
    answers = [message_text(m) for m in history if isinstance(m, AIMessage)]
    if answers:
        queries.append((f"{answers[-1][:300]} {raw}", HISTORY_WEIGHT))
    named = resolved_message(state, history_limit)
    if named != raw:  # "that setting" searched as the setting the previous answer names
        queries.insert(1, named)
    rewritten = state.get("kb_query", "")
    if (
        (state.get("path") or [""])[-1] == "rewrite_kb"
        and rewritten in queries
        and not any(f.startswith("Hint from ") for f in state.get("query_feedback", []))
    ):
        # the model-free rewrite (the question's terms) only nudges the ranking: its extra
        # hits are what the grader's threshold, calibrated on first searches, has not seen
        queries[queries.index(rewritten)] = (rewritten, 0.5)
    return queries
