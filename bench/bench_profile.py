"""Where the bot's CPU goes during a burst of questions: py-spy on the running process.

One fresh ``threadwise run`` (as in bench/bench_load.py), one warm-up question, then
``py-spy record --pid PID --nonblocking --threads --format raw`` while ``--burst``
questions arrive at once; py-spy is stopped (SIGINT) when they are answered. The raw
file (collapsed stacks, loadable in speedscope or flamegraph.pl once gunzipped) goes to
bench/results/profile-<label>.txt.gz and a summary (samples by thread, by package of the
running frame, by package anywhere on the stack, by the innermost bot/ or graphs/ function)
to key "profile" of bench/results/load-<label>.json.

Needs py-spy (``pip install py-spy``) and permission to ptrace the bot (root, or
kernel.yama.ptrace_scope = 0).

Usage: python bench/bench_profile.py [--burst 100] [--rate 100] [--label NAME]
       python bench/bench_profile.py --summarise FILE.txt   (summary of an existing raw file)
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import linecache
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_harness import RESULTS, ROOT  # noqa: E402
from bench_load import Runner, common_args, default_label, level_stats, update_results  # noqa: E402

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def frame_parts(frame: str) -> tuple[str, str]:
    """``"func (path/file.py:12)"`` -> ``(func, path/file.py)``; other frames -> ``(frame, "")``."""
    m = _FRAME.match(frame.strip())
    return (m.group("func"), m.group("file")) if m else (frame.strip(), "")


def package_of(file: str) -> str:
    """A readable owner of a source file: ``bot``/``graphs`` (ours), a site-packages
    distribution's top module, ``stdlib:<module>``, or ``other``."""
    if not file:
        return "other"
    path = file.replace("\\", "/")
    for ours in ("bot", "graphs", "tests", "bench"):
        if path.startswith(f"{ROOT}/{ours}/") or path.startswith(f"{ours}/"):
            return f"{ours} (ours)"
    if "/site-packages/" in path:
        top = path.split("/site-packages/", 1)[1].split("/", 1)[0]
        return top.removesuffix(".py").split(".")[0]
    if path.startswith("<frozen "):
        return "stdlib:" + path[len("<frozen ") :].rstrip(">").split(".")[0]
    m = re.search(r"/lib/python3\.\d+/(.+)$", path)
    if m:
        return "stdlib:" + m.group(1).split("/", 1)[0].removesuffix(".py")
    return "other"


_WAITS = re.compile(r"\.get\(|select\(|\.wait\(|\.acquire\(|\.poll\(|time\.sleep\(")


def is_wait(file: str, line: str | None) -> bool:
    """True when the sampled line is a blocking wait (queue get, select, lock/condition wait):
    py-spy's idle detection misses some of these on a busy machine (``--nonblocking``)."""
    if not file or not line:
        return False
    return bool(_WAITS.search(linecache.getline(file, int(line))))


def summarise(raw: Path, top: int = 15) -> dict[str, Any]:
    """Summary of a py-spy raw (collapsed) file recorded with ``--threads --full-filenames``.

    Samples whose running line is a blocking wait (:func:`is_wait`) are counted apart
    (``waiting_samples``) and left out of every share."""
    waiting = 0
    threads: Counter[str] = Counter()
    self_pkg: Counter[str] = Counter()
    incl_pkg: Counter[str] = Counter()
    self_frame: Counter[str] = Counter()
    ours_innermost: Counter[str] = Counter()
    task_root: Counter[str] = Counter()
    total = 0
    opener = gzip.open if raw.suffix == ".gz" else open
    with opener(raw, "rt", errors="replace") as fh:
        lines = fh.read().splitlines()
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        leaf = _FRAME.match(frames[-1].strip())
        if leaf and is_wait(leaf.group("file"), leaf.group("line")):
            waiting += n
            continue
        total += n
        has_thread = frames[0].startswith("thread ")
        thread = re.sub(r"^thread \(\d+\):\s*", "", frames[0]) if has_thread else "?"
        thread = re.sub(r"_\d+$", "_N", re.sub(r"-\d+ ", "-N ", thread))  # pool threads as one
        threads[thread] += n
        parts = [frame_parts(f) for f in frames[int(has_thread) :]] or [("?", "")]
        func, file = parts[-1]
        self_pkg[package_of(file)] += n
        at = f":{leaf.group('line')}" if leaf and leaf.group("line") else ""
        self_frame[f"{func} ({_short(file)}{at})"] += n
        for pkg in {package_of(f) for _, f in parts}:
            incl_pkg[pkg] += n
        ours = [(fn, f) for fn, f in parts if package_of(f).endswith("(ours)") and not f.endswith("__main__.py")]
        handles = [i for i, (fn, _) in enumerate(parts) if fn == "Handle._run"]
        if handles and handles[-1] + 1 < len(parts):
            fn, f = parts[handles[-1] + 1]
            task_root[f"{_short(f)}:{fn}"] += n
        else:
            task_root[f"(thread) {thread}"] += n
        if ours:
            fn, f = ours[-1]
            ours_innermost[f"{_short(f)}:{fn}"] += n
        else:
            ours_innermost[f"(no bot/graphs frame) {thread}: {package_of(file)}"] += n

    def share(c: Counter[str], k: int = top) -> list[list[Any]]:
        return [[name, n, round(100 * n / total, 1)] for name, n in c.most_common(k)] if total else []

    return {
        "samples": total,
        "waiting_samples": waiting,
        "threads": share(threads, 8),
        "self_by_package": share(self_pkg),
        "inclusive_by_package": share(incl_pkg, 20),
        "innermost_product_frame": share(ours_innermost, 20),
        "event_loop_callback": share(task_root, 20),
        "top_self_frames": share(self_frame, 20),
    }


def _short(file: str) -> str:
    path = file.replace("\\", "/")
    if "/site-packages/" in path:
        return path.split("/site-packages/", 1)[1]
    if path.startswith(str(ROOT) + "/"):
        return path[len(str(ROOT)) + 1 :]
    m = re.search(r"/lib/python3\.\d+/(.+)$", path)
    return m.group(1) if m else path


def py_spy() -> str:
    """The py-spy executable (beside this Python, or on PATH); exits with a hint if missing."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if not found:
        sys.exit("py-spy is not installed: pip install py-spy (into the venv that runs the bench)")
    return found


async def profile(args: argparse.Namespace, raw: Path) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="tw-prof-"))
    runner = Runner(args, folder)
    out: dict[str, Any] = {"burst": args.burst, "rate": args.rate}
    spy: subprocess.Popen | None = None
    try:
        out.update(await runner.start())
        await runner.phase(1)  # warm-up
        assert runner.bot is not None
        spy_log = folder / "py-spy.log"
        spy = subprocess.Popen(
            [
                py_spy(),
                "record",
                "--pid",
                str(runner.bot.pid),
                "--rate",
                str(args.rate),
                *(["--native"] if os.environ.get("BENCH_NATIVE") else ["--nonblocking"]),
                # BENCH_GIL=1: only threads holding the GIL (the Python CPU, no waits)
                *(["--gil"] if os.environ.get("BENCH_GIL") else []),
                "--threads",
                "--subprocesses",
                "--full-filenames",
                "--format",
                "raw",
                "--duration",
                str(int(args.phase_timeout)),
                "-o",
                str(raw),
            ],
            stdout=spy_log.open("w"),
            stderr=subprocess.STDOUT,
        )
        await asyncio.sleep(1.0)  # py-spy attaches
        if spy.poll() is not None:
            raise RuntimeError(f"py-spy exited: {spy_log.read_text()[-2000:]}")
        cpu0, t0 = runner.bot.cpu_seconds(), time.monotonic()
        phase = await runner.phase(args.burst)
        out["burst_cpu_s"] = round(runner.bot.cpu_seconds() - cpu0, 2)
        out["burst_wall_s"] = round(time.monotonic() - t0, 2)
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
        out["level"] = level_stats([phase])
        out["py_spy_exit"] = spy.returncode
    finally:
        if spy is not None and spy.poll() is None:
            spy.kill()
            spy.wait(10)
        out.update(await runner.stop())
        shutil.rmtree(folder, ignore_errors=True)
    return out


def print_summary(s: dict[str, Any]) -> None:
    for key in (
        "threads",
        "self_by_package",
        "inclusive_by_package",
        "innermost_product_frame",
        "event_loop_callback",
        "top_self_frames",
    ):
        print(f"\n{key} (of {s['samples']} samples; {s['waiting_samples']} more were blocking waits):")
        for name, n, pct in s[key]:
            print(f"  {pct:5.1f}%  {n:6d}  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(ap)
    ap.add_argument("--burst", type=int, default=100, help="questions at once while profiling")
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    ap.add_argument("--summarise", metavar="RAW", help="only summarise an existing py-spy raw file")
    args = ap.parse_args()
    if args.summarise:
        print_summary(summarise(Path(args.summarise)))
        return
    if not (1 <= args.burst <= 1000 and 1 <= args.rate <= 1000):
        ap.error("--burst and --rate 1..1000")
    label = args.label or default_label()
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw = RESULTS / f"profile-{label}.txt"
    result = asyncio.run(profile(args, raw))
    result["summary"] = summarise(raw)
    packed = raw.with_name(raw.name + ".gz")
    with raw.open("rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    result["raw"] = str(packed.relative_to(ROOT))
    print_summary(result["summary"])
    print(
        f"\nburst of {args.burst}: {result['burst_cpu_s']} CPU s in {result['burst_wall_s']} s wall; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"wrote {update_results(label, 'profile', result)} and {packed}")


if __name__ == "__main__":
    main()
