"""The process that converts PDF, office files and large HTML pages for
:func:`graphs.knowledge.convert.convert`, so that a document costing more than
:data:`~graphs.knowledge.convert.MAX_CONVERT_SECONDS` or
:data:`~graphs.knowledge.convert.MAX_CONVERT_MEMORY_BYTES` costs that document only, not the
sync or the machine.

Run as ``python -m graphs.knowledge.convert_worker MEMORY_BYTES``. It limits its own address
space (``RLIMIT_AS``) to what it holds after its imports plus ``MEMORY_BYTES``, then reads
requests from stdin and writes answers to stdout until stdin closes. Each message is an
8-byte big-endian length and a pickle: a request ``(data, kind, content_type, base_url)``,
an answer ``("ok", Converted)`` or ``("error", message)``. Only the parent process that
started it talks to it.
"""

from __future__ import annotations

import resource
import sys
from typing import Any

from graphs.knowledge.worker_messages import read_message, write_message


def _vm_size() -> int:
    """This process's address space in bytes (``VmSize``), 0 where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main() -> None:
    from graphs.knowledge.convert import ConversionError, convert_here

    # the converters' own imports, before the limit is measured
    for module in ("pdfminer.high_level", "pdfplumber", "docx", "openpyxl", "markitdown.converters", "bs4"):
        try:
            __import__(module)
        except ImportError:
            pass
    budget = int(sys.argv[1])
    base = _vm_size()
    if base:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = base + budget
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a converter's prints must not break the answers
    while True:
        try:
            data, kind, content_type, base_url = read_message(requests)
        except EOFError:
            return
        try:
            answer: tuple[str, Any] = ("ok", convert_here(data, kind, content_type, base_url))
        except ConversionError as exc:
            answer = ("error", str(exc))
        except MemoryError:
            answer = ("memory", "")
        except RecursionError:
            answer = ("error", "cannot read this document (nested too deep)")
        del data
        write_message(answers, answer)


if __name__ == "__main__":
    main()
