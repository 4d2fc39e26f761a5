"""What a fresh machine needs: every direct import declared, compiled libraries portable.

The instruction-set check is the test that would have caught the SIGILL of a natively
built llama.cpp on a CPU without AMX/AVX-512 (issue: front door on any machine): it
disassembles the installed libraries, so it fails on the machine that built them.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK_ISA = ROOT / "scripts" / "check_isa.py"


def _parse(path: Path) -> ast.Module:
    """``ast.parse`` of a file, tried again on CPython 3.11's spurious "AST constructor recursion
    depth mismatch" SystemError (python/cpython#106905: the AST converter's depth counter goes
    wrong in threaded programs; a thread an earlier test left running is enough)."""
    for attempt in range(3):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def _imported_top_modules(folders: list[str]) -> set[str]:
    names: set[str] = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(_parse(path)):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names.add(node.module.split(".")[0])
    return names


def _declared(groups: list[str]) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for group in groups:
        reqs += project["optional-dependencies"][group]
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].strip().lower().replace("_", "-") for r in reqs}


def _undeclared(folders: list[str], groups: list[str]) -> list[str]:
    first_party = {"bot", "graphs", "threadwise", "tests", "bench", "scripts"}
    dists = metadata.packages_distributions()
    declared = _declared(groups)
    missing = []
    for name in sorted(_imported_top_modules(folders) - first_party):
        if name in sys.stdlib_module_names or name == "__future__":
            continue
        owners = {d.lower().replace("_", "-") for d in dists.get(name, [])}
        if not owners:
            missing.append(f"{name} (not installed)")
        elif not owners & declared:
            missing.append(f"{name} (from {', '.join(sorted(owners))})")
    return missing


def test_product_imports_are_declared_dependencies() -> None:
    """bot/, graphs/ and threadwise/ import only what `pip install threadwise[offline,postgres,metrics,documents]`
    installs, plus the provider extras' integrations, each imported only when its provider is configured."""
    groups = ["offline", "postgres", "metrics", "documents", "openai", "anthropic", "ollama", "google", "bedrock"]
    assert _undeclared(["bot", "graphs", "threadwise"], groups) == []


def test_test_imports_are_declared_dependencies() -> None:
    assert _undeclared(["tests"], ["offline", "postgres", "test"]) == []


needs_objdump = pytest.mark.skipif(
    shutil.which("objdump") is None or shutil.which("gcc") is None, reason="needs binutils' objdump and gcc"
)


def _check(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK_ISA), *map(str, paths)], capture_output=True, text=True)


@needs_objdump
@pytest.mark.parametrize(
    "asm, kind",
    [
        ("vaddps %zmm0, %zmm1, %zmm2", "AVX-512 zmm"),
        ("vaddps %ymm0, %ymm1, %ymm2{%k1}", "AVX-512 opmask"),
        ("kmovw %k1, %eax", "opmask move"),
        ("tilezero %tmm0", "AMX tile"),
        ("tileloadd (%rsi,%rdx,1), %tmm1", "AMX tile load"),
    ],
)
def test_isa_check_rejects_instructions_beyond_the_baseline(tmp_path: Path, asm: str, kind: str) -> None:
    src = tmp_path / "k.c"
    src.write_text(f'void kernel(void) {{ __asm__ volatile("{asm}"); }}\n')
    lib = tmp_path / "libkernel.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    result = _check(lib)
    assert result.returncode == 1, (kind, result.stdout, result.stderr)
    assert "libkernel.so" in result.stderr and "outside x86-64-v3" in result.stderr


@needs_objdump
def test_isa_check_accepts_avx2_fma(tmp_path: Path) -> None:
    src = tmp_path / "k.c"
    src.write_text('void kernel(void) { __asm__ volatile("vfmadd231ps %ymm0, %ymm1, %ymm2"); }\n')
    lib = tmp_path / "libkernel.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    result = _check(lib)
    assert result.returncode == 0, result.stderr


@needs_objdump
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="offline extra (llama-cpp-python) not installed"
)
def test_installed_llama_cpp_is_portable() -> None:
    """The installed llama.cpp build runs on any x86-64-v3 CPU (no AVX-512, no AMX)."""
    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.submodule_search_locations
    result = _check(Path(next(iter(spec.submodule_search_locations))))
    assert result.returncode == 0, result.stderr + "\nRebuild: scripts/build-llama-portable.sh .venv/bin/python"


# numkong (usearch's distance kernels) builds each kernel for several CPU families and calls
# one after asking the CPU at run time; the variants beyond x86-64-v3 carry the family's name
NUMKONG_VARIANTS = r"_(?:skylake|icelake|genoa|sapphire|sapphireamx|graniteamx|turin|alder|sierra|diamond)(?:\.\w+)*$"


@needs_objdump
def test_isa_check_allows_named_run_time_variants(tmp_path: Path) -> None:
    src = tmp_path / "k.c"
    src.write_text(
        'void nk_dot_f32_skylake(void) { __asm__ volatile("vaddps %zmm0, %zmm1, %zmm2"); }\n'
        'void nk_dot_f32_haswell(void) { __asm__ volatile("vfmadd231ps %ymm0, %ymm1, %ymm2"); }\n'
    )
    lib = tmp_path / "libkernel.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    assert _check(lib).returncode == 1
    result = subprocess.run(
        [sys.executable, str(CHECK_ISA), "--dispatched", NUMKONG_VARIANTS, str(lib)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


@needs_objdump
def test_installed_vector_search_is_portable() -> None:
    """usearch (graphs/knowledge/ann.py) and its kernels run on any x86-64-v3 CPU: no AVX-512
    or AMX outside the variants chosen at run time, and the choice made here is one this CPU has."""
    folders = []
    for name in ("usearch", "numkong"):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations, f"{name} is not installed"
        folders.append(Path(next(iter(spec.submodule_search_locations))))
    result = subprocess.run(
        [sys.executable, str(CHECK_ISA), "--dispatched", NUMKONG_VARIANTS, *map(str, folders)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    import numpy as np

    from graphs.knowledge.ann import _usearch

    index = _usearch()(ndim=8, metric="ip", dtype="i8")
    index.add(np.array([1, 2], dtype=np.uint64), np.array([[0.5] * 8, [-0.5] * 8], dtype=np.float32))
    assert index.search(np.array([0.5] * 8, dtype=np.float32), 1).keys.tolist() == [1]
    assert index.hardware_acceleration  # names the family chosen at run time (e.g. "haswell")
