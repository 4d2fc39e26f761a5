"""Keyword search and the lexical signals work in any script:
Japanese, Chinese, Korean, Russian, German and accented words, through
KnowledgeBase.search, graphs.signals and a lexical-graders graph run."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.platforms.console import ConsoleResponder
from bot.protocol import IncomingMessage
from graphs import signals
from graphs.knowledge import KnowledgeBase
from tests.conftest import scripted_runtime, write_config

PAGES = {
    "ja/auth.md": "# 認証\n\nアクセストークンの有効期限は1時間です。"
    "期限が切れたら、管理画面で新しいトークンを発行してください。\n",
    "zh/deploy.md": "# 部署\n\n容器启动前需要设置数据库地址和缓存地址。然后运行镜像。\n",
    "ko/backup.md": "# 백업\n\n데이터베이스 백업은 매일 밤 자동으로 실행됩니다.\n",
    "ru/backup.md": "# Резервное копирование\n\n"
    "Резервные копии базы данных создаются каждую ночь и хранятся тридцать дней.\n",
    "de/config.md": "# Übersicht der Konfiguration\n\nSie ändern die Einstellungen in der Datei config.toml. "
    "Die maximale Größe einer Nachricht ist 4000 Zeichen.\n",
    "fr/cafe.md": "# Café\n\nLe café est servi à la réunion d'équipe chaque matin.\n",
    "en/slack.md": "# Slack\n\nCreate a Slack app, enable socket mode and invite the bot to a channel.\n",
}

# (question, expected page, an answer made of the page's words)
CASES = [
    ("トークンの有効期限はどれくらいですか？", "ja/auth.md", "アクセストークンの有効期限は1時間です [1]。"),
    ("容器启动需要设置什么？", "zh/deploy.md", "容器启动前需要设置数据库地址和缓存地址 [1]。"),
    ("데이터베이스 백업은 언제 실행됩니까?", "ko/backup.md", "데이터베이스 백업은 매일 밤 실행됩니다 [1]."),
    (
        "Когда создаются резервные копии базы данных?",
        "ru/backup.md",
        "Резервные копии базы данных создаются каждую ночь [1].",
    ),
    (
        "Grösse ändern?",
        "de/config.md",
        "Sie ändern die Einstellungen in config.toml; die maximale Größe ist 4000 Zeichen [1].",
    ),
    ("Réunion, café ?", "fr/cafe.md", "Le café est servi à la réunion chaque matin [1]."),
]


def write_pages(root: Path) -> Path:
    src = root / "src"
    for rel, text in PAGES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    return src


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    kb = KnowledgeBase(tmp_path / "index", [write_pages(tmp_path)])
    kb.reindex()
    return kb


@pytest.mark.parametrize("question,page,answer", CASES, ids=[c[1] for c in CASES])
def test_keyword_search_finds_pages_in_any_script(kb, question, page, answer):
    hits = kb.search([question], 3)
    assert hits and hits[0]["location"] == page


@pytest.mark.parametrize("question,page,answer", CASES, ids=[c[1] for c in CASES])
def test_lexical_signals_score_any_script(question, page, answer):
    doc = PAGES[page]
    others = [text for rel, text in PAGES.items() if rel != page]
    assert signals.relevance(question, doc) >= 0.3
    assert all(signals.relevance(question, other) < 0.3 for other in others)
    assert signals.grounding(answer, [doc]) >= 0.6
    assert signals.grounding(answer, others) < 0.6
    assert signals.is_useful(question, answer)
    assert signals.key_sentences(question, doc)


def test_single_kanji_full_width_and_folded_queries(kb):
    assert kb.search(["認証"], 1)[0]["location"] == "ja/auth.md"
    assert kb.search(["GROSSE EINSTELLUNGEN"], 1)[0]["location"] == "de/config.md"  # ß = ss, case folded
    assert kb.search(["cafe reunion"], 1)[0]["location"] == "fr/cafe.md"  # accents folded
    assert kb.search(["ＣＯＮＦＩＧ．ＴＯＭＬ"], 1)[0]["location"] == "de/config.md"  # full-width folds to ASCII


async def test_lexical_graph_answers_a_japanese_question_from_the_japanese_page(tmp_path):
    path = write_config(tmp_path, sources=[write_pages(tmp_path)])
    path.write_text(path.read_text() + '\n[graph]\ngraders = "lexical"\n')
    settings = load_settings(path)
    script = {"generate": CASES[0][2]}
    async with scripted_runtime(settings, script) as (rt, model):
        out = ConsoleResponder("t", show_status=False)
        await rt.service.handle(
            IncomingMessage(
                platform="console", thread_key="console:t", message_id=uuid.uuid4().hex, author_id="u", text=CASES[0][0]
            ),
            out,
        )
    [answer] = out.answers
    assert answer.kind == "answer" and answer.text.startswith("アクセストークンの有効期限は1時間です")
    assert answer.sources[0].location == "ja/auth.md"
    assert not out.help_requests
