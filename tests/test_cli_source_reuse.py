"""`--source DIR` naming a folder config.toml indexes already answers from that index (no second
index read and embedded, its other sources left out), and a missing folder is said once, in one
line naming where the path is read from, with the exit code README gives. Real CLI processes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_cli_offline import threadwise


def config(root: Path, *folders: str) -> Path:
    path = root / "config.toml"
    path.write_text(
        f'[knowledge]\nsources = {json.dumps(list(folders))}\nembeddings = "local"\nk = 3\n'
        '[graph]\ncomposer = "extractive"\n'
        '[service]\ncheckpoint_db = "data/checkpoints.sqlite"\nbookkeeping_db = "data/bookkeeping.sqlite"\n'
    )
    return path


def test_a_source_folder_config_toml_indexes_is_answered_from_its_index(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "deploy.md").write_text("# Deploy\n\nRoll back a deploy within 15 minutes of the release.\n")
    (tmp_path / "handbook").mkdir()
    (tmp_path / "handbook" / "leave.md").write_text("# Leave\n\nBook annual leave in the HR portal four weeks ahead.\n")
    config(tmp_path, "docs", "handbook")
    first = threadwise("ask", "--config", "config.toml", "--json", "how do I book annual leave?", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads(first.stdout)["sources"] == ["leave.md"]
    indexes = sorted(p.name for p in (tmp_path / "data").iterdir() if p.name.startswith("index"))

    (tmp_path / "docs" / "deploy.md").write_text("# Deploy\n\nRoll back a deploy within 45 minutes of the release.\n")
    asked = threadwise(
        "-v",
        "ask",
        "--config",
        "config.toml",
        "--source",
        "docs",
        "--json",
        "how long do I have to roll back a deploy?",
        cwd=tmp_path,
    )
    assert asked.returncode == 0, asked.stderr[-2000:]
    answer = json.loads(asked.stdout)
    assert "45 minutes" in answer["answer"], answer  # the folder as it is now
    # the configured index, its one changed file read again: no index of its own, nothing embedded twice
    assert sorted(p.name for p in (tmp_path / "data").iterdir() if p.name.startswith("index")) == indexes
    assert "1 updated" in asked.stderr and "2 added" not in asked.stderr, asked.stderr[-3000:]
    # `reindex --source` of that folder syncs it in config.toml's index, too
    synced = threadwise("reindex", "--config", "config.toml", "--source", "docs", cwd=tmp_path)
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "data").iterdir() if p.name.startswith("index")) == indexes
    assert f"• {tmp_path / 'docs'}: 0 added, 0 updated, 0 removed, 1 unchanged" in synced.stdout, synced.stdout
    # only that folder is searched, as with a --source index of its own
    other = threadwise(
        "ask", "--config", "config.toml", "--source", "docs", "--json", "how do I book annual leave?", cwd=tmp_path
    )
    assert other.returncode == 0, other.stderr[-2000:]
    assert "leave.md" not in json.loads(other.stdout)["sources"], other.stdout


def test_a_source_folder_config_toml_names_that_does_not_exist_is_a_configuration_error(tmp_path):
    """A configured folder that does not exist exited 1 ("a source failed", after the index was
    opened), while the same path given with --source exited 2: README's exit code 2 is for what is
    wrong before any source is read, config.toml among it. Each command reading the sources now
    stops before any work, exit 2, one line naming the key and the path; a --source folder that
    exists is still answered, config.toml's sources not being read then."""
    hint = "(a path in config.toml is relative to the config file's folder)"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "deploy.md").write_text("# Deploy\n\nRoll back a deploy within 15 minutes of the release.\n")
    cases = [
        # a [knowledge] sources folder misspelt
        (["missing-docs"], "", f"knowledge.sources: knowledge source not found: {tmp_path / 'missing-docs'}"),
        # a [[sources]] files entry of one path gone, and one whose every path (a folder, a glob) is gone
        (
            [],
            '[[sources]]\nname = "handbook"\ntype = "files"\npath = "handbook"\n',
            f'[[sources]] entry 1 (name = "handbook"): path: knowledge source not found: {tmp_path / "handbook"}',
        ),
        (
            [],
            '[[sources]]\nname = "docs"\ntype = "files"\npath = "docs"\n'
            '[[sources]]\nname = "team"\ntype = "files"\npath = ["wiki", "docs/*.pdf"]\n',
            '[[sources]] entry 2 (name = "team"): path: knowledge source not found: '
            f"{tmp_path / 'wiki'}, {tmp_path / 'docs/*.pdf'}",
        ),
    ]
    commands = (["ask", "how do I roll back?"], ["reindex"], ["sync"], ["run"], ["console"])
    for folders, entries, said in cases:
        cfg = config(tmp_path, *folders)
        cfg.write_text(cfg.read_text() + entries)
        for command in commands:
            result = threadwise(*command, "--config", "config.toml", cwd=tmp_path)
            assert result.returncode == 2, (entries, command, result.returncode, result.stdout, result.stderr[-2000:])
            assert result.stderr.strip().splitlines() == [f"Configuration error: config.toml: {said} {hint}"], (
                command,
                result.stderr,
            )
        assert not (tmp_path / "data").exists(), "the data folder was made"
    # config.toml's sources are not read when --source names others
    config(tmp_path, "missing-docs")
    asked = threadwise(
        "ask", "--config", "config.toml", "--source", "docs", "--json", "how do I roll back?", cwd=tmp_path
    )
    assert asked.returncode == 0 and "15 minutes" in json.loads(asked.stdout)["answer"], asked.stderr[-2000:]
    missing = threadwise("ask", "--config", "config.toml", "--source", "nothere", "how do I roll back?", cwd=tmp_path)
    assert missing.returncode == 2, missing.stderr  # README: a --source path that does not exist
    assert missing.stderr.strip().splitlines() == [
        "knowledge source not found: nothere (a path given with --source is relative to the current folder)"
    ]


def test_a_source_folder_inside_a_configured_one_says_it_gets_an_index_of_its_own(tmp_path):
    """`--source docs/runbooks` with `docs` in config.toml built a second index silently; now the
    command says the folder is inside `docs`, is searched alone from an index of its own, and that
    without --source `docs` is searched whole. A folder config.toml indexes itself says nothing."""
    (tmp_path / "docs" / "runbooks").mkdir(parents=True)
    (tmp_path / "docs" / "leave.md").write_text("# Leave\n\nBook annual leave in the HR portal four weeks ahead.\n")
    (tmp_path / "docs" / "runbooks" / "deploy.md").write_text(
        "# Deploy\n\nRoll back a deploy within 15 minutes of the release.\n"
    )
    config(tmp_path, "docs")
    said = f"{Path('docs') / 'runbooks'} is inside docs, which config.toml indexes: it is searched alone, from an index"
    asked = threadwise(
        "ask", "--config", "config.toml", "--source", "docs/runbooks", "--json", "how do I roll back?", cwd=tmp_path
    )
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert said in asked.stderr and "without --source, docs is searched whole" in asked.stderr, asked.stderr[-2000:]
    assert json.loads(asked.stdout)["sources"] == ["deploy.md"], asked.stdout
    synced = threadwise("reindex", "--config", "config.toml", "--source", "docs/runbooks", cwd=tmp_path)
    assert synced.returncode == 0 and said in synced.stderr, synced.stderr[-2000:]
    whole = threadwise(
        "ask", "--config", "config.toml", "--source", "docs", "--json", "how do I roll back?", cwd=tmp_path
    )
    assert whole.returncode == 0 and "is inside" not in whole.stderr, whole.stderr[-2000:]
