"""Fail when compiled libraries hold instructions outside the portable x86-64-v3 baseline.

Usage: python scripts/check_isa.py [--dispatched REGEX] PATH [PATH ...]
  PATH: a wheel (.whl), a shared library (.so), or a folder searched for both.
  --dispatched REGEX: instructions inside functions whose (demangled) name matches REGEX are
    allowed: variants for one CPU family that the library calls only after asking the CPU at
    run time (e.g. numkong's ``nk_dot_f32_skylake`` beside ``nk_dot_f32_haswell``).

A llama.cpp build made with -march=native on a CPU with AVX-512 or AMX carries
``zmm`` registers, opmask (``%k1``..``%k7``) operands and AMX tile instructions
(``tileloadd``, ``tdpbssd``, ``ldtilecfg`` ...). Such a library dies with SIGILL on a
CPU (or VM) that lacks or refuses them; a one-token prompt may not reach that code, so
only a disassembly shows it. This disassembles every library with binutils' ``objdump``
and exits 1 naming the library and the first offending instructions; exit 0 when clean,
exit 2 when objdump is missing. The baseline (AVX, AVX2, FMA, F16C) is x86-64-v3 as
defined by the x86-64 psABI microarchitecture levels.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# AVX-512 uses zmm registers or opmask registers; AMX uses tile instructions; AVX-VNNI
# (vpdpbusd on xmm/ymm with a VEX prefix) is not in x86-64-v3 either.
FORBIDDEN = re.compile(
    r"%zmm\d|\{%k[1-7]\}|\bk(?:mov|and|or|xor|not|shift|test|ortest|add|unpck)[bwdq]\b"
    r"|\b(?:tileloadd|tileloaddt1|tilestored|tilezero|tilerelease|ldtilecfg|sttilecfg"
    r"|tdpb[su][su]d|tdpbf16ps|tdpfp16ps)\b|\{vex\}\s*vpdp"
)


def libraries(paths: list[str], scratch: Path) -> list[Path]:
    """Expand wheels (unpacked into scratch) and folders into the .so files they hold."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.suffix == ".whl":
            target = scratch / path.stem
            with zipfile.ZipFile(path) as wheel:
                wheel.extractall(target)
            path = target
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.so*") if p.is_file()))
        elif path.is_file():
            found.append(path)
    # wheels store each symlink (libx.so -> libx.so.0 -> libx.so.0.1) as a copy: check each content once
    unique: dict[str, Path] = {}
    for lib in found:
        unique.setdefault(hashlib.sha256(lib.read_bytes()).hexdigest(), lib)
    return list(unique.values())


_FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")


def offending(library: Path, limit: int = 5, dispatched: re.Pattern[str] | None = None) -> tuple[int, list[str]]:
    """(count, first `limit` lines) of instructions outside the baseline in one library,
    not counting those inside functions whose name matches ``dispatched``."""
    proc = subprocess.run(
        ["objdump", "-d", "-C", "--no-show-raw-insn", str(library)],
        capture_output=True,
        text=True,
        check=False,
    )
    count, first = 0, []
    allowed = False
    for line in proc.stdout.splitlines():
        function = _FUNCTION.match(line)
        if function:
            allowed = dispatched is not None and bool(dispatched.search(function.group(1)))
            continue
        if not allowed and FORBIDDEN.search(line):
            count += 1
            if len(first) < limit:
                first.append(" ".join(line.split()))
    return count, first


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    if shutil.which("objdump") is None:
        print("check_isa: objdump not found (install binutils)", file=sys.stderr)
        return 2
    dispatched = None
    if argv[0] == "--dispatched":
        if len(argv) < 3:
            print(__doc__.strip().splitlines()[2], file=sys.stderr)
            return 2
        dispatched, argv = re.compile(argv[1]), argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        libs = libraries(argv, Path(tmp))
        if not libs:
            print(f"check_isa: no shared library found in {' '.join(argv)}", file=sys.stderr)
            return 2
        bad = 0
        for lib in libs:
            count, first = offending(lib, dispatched=dispatched)
            if count:
                bad += 1
                print(
                    f"check_isa: {lib.name}: {count} instructions outside x86-64-v3 "
                    f"(AVX-512/AMX), e.g. {first[0]!r}"
                    + ("" if dispatched else "; rebuild with scripts/build-llama-portable.sh"),
                    file=sys.stderr,
                )
        if bad:
            return 1
        print(f"check_isa: {len(libs)} libraries within x86-64-v3 (no AVX-512, no AMX)")
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
