"""Retrieval as the catalog grows: a lab study.

``python -m bench.retrieval.studies.scale [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

LiveMCPBench's pool holds 527 tools; a user's pool may hold thousands. Here the 527 tools get
unrelated tools added: the documented public functions and classes of Python libraries, each made a
tool (named ``module_function``, described by the first paragraph of its docstring, its parameters
read from its signature, its server the module, described by the module's docstring). Two
families, so a result does not hang on one kind of text: the standard library, and third-party
libraries the project installs (numpy, scipy, torch, ...). No query set has a relevant tool among
them, so each one only competes, and every ranker sees the same ones.

Printed per family and size: the shipped ranker (z-scores bounded at
:data:`index.search.ranking.SIGNAL_CEILING`), other bounds and dense alone, each paired with the
unbounded z-sum at the same size (task-clustered intervals); and each ranker at each size against
itself on the 527 tools alone. How many tools a family yields depends on the installed versions
(printed); which are added at a size is a fixed shuffle of their sorted ids.
"""

from __future__ import annotations

import importlib
import inspect
import random
import sys
from collections.abc import Iterable, Sequence
from dataclasses import replace

from bench.retrieval.lab import Score, Space, build_space, dense_only, fused, with_input_providers
from bench.retrieval.studies.harness import Rows, Study, open_study, print_comparison, study_rows
from index.catalog.records import Catalog, CatalogServer, ToolRecord
from index.search.ranking import HYBRID, SIGNAL_CEILING

STANDARD_LIBRARY = (
    "abc argparse array asyncio base64 binascii bisect bz2 calendar cmd codecs collections colorsys concurrent.futures "
    "configparser contextlib copy csv datetime decimal difflib email email.utils enum filecmp fnmatch fractions ftplib "
    "functools gc getpass gettext glob gzip hashlib heapq hmac html html.parser http.client http.cookies imaplib inspect "
    "io ipaddress itertools json locale logging lzma mailbox math mimetypes multiprocessing os os.path pathlib pickle "
    "platform poplib pprint queue random re sched secrets select selectors shelve shlex shutil smtplib socket "
    "socketserver sqlite3 ssl stat statistics string struct subprocess tarfile tempfile textwrap threading time "
    "traceback unicodedata urllib.parse urllib.request uuid wave webbrowser xml.dom.minidom xml.etree.ElementTree "
    "xmlrpc.client zipfile zlib zoneinfo"
).split()
THIRD_PARTY = (
    "numpy numpy.linalg numpy.fft numpy.random scipy.stats scipy.optimize scipy.signal scipy.linalg scipy.io "
    "scipy.interpolate scipy.spatial torch torch.nn.functional networkx sympy matplotlib.pyplot PIL.Image PIL.ImageOps "
    "PIL.ImageFilter httpx pydantic jinja2 yaml rich.console psutil"
).split()
FAMILIES = {"standard library": STANDARD_LIBRARY, "third-party libraries": THIRD_PARTY}
#: Tools added per family (the largest is capped by what the family yields).
SIZES = (1000, 3000)
CEILINGS = (6.0, 8.0, SIGNAL_CEILING, 16.0)
_MAX_PARAMETERS = 6


def library_tools(modules: Iterable[str]) -> tuple[list[ToolRecord], dict[str, CatalogServer]]:
    """Every public function or class with a docstring of ``modules`` (those that import) as a tool,
    in sorted id order; and each module as a server."""
    tools: dict[str, ToolRecord] = {}
    servers: dict[str, CatalogServer] = {}
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 -- a library missing here only makes the family smaller
            continue
        server = "py-" + module_name.replace(".", "-")
        description = _first_paragraph(inspect.getdoc(module) or module_name, 300)
        servers[server] = CatalogServer(description=description, category="Python library")
        for name, value in sorted(vars(module).items()):
            doc = inspect.getdoc(value) if callable(value) and not name.startswith("_") else None
            if not doc or len(doc) < 20:
                continue
            record = ToolRecord(
                server=server,
                name=f"{module_name.replace('.', '_')}_{name}",
                description=_first_paragraph(doc, 400),
                input_schema={"type": "object", "properties": {p: {"type": "string"} for p in _parameters(value)}},
                server_description=description,
                category="Python library",
            )
            tools.setdefault(record.id, record)
    return [tools[key] for key in sorted(tools)], servers


def _first_paragraph(text: str, limit: int) -> str:
    return text.strip().split("\n\n")[0][:limit]


def _parameters(value: object) -> list[str]:
    try:
        names = list(inspect.signature(value).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    return [n for n in names if n not in ("self", "args", "kwargs")][:_MAX_PARAMETERS]


def with_distractors(catalog: Catalog, tools: Sequence[ToolRecord], servers: dict[str, CatalogServer], count: int, seed: int = 0) -> Catalog:
    """``catalog`` with ``count`` of ``tools`` added (a fixed shuffle of them, the same prefix at every size)."""
    order = list(tools)
    random.Random(seed).shuffle(order)
    added = order[:count]
    used = {t.server for t in added}
    return Catalog(
        source=catalog.source,
        servers={**catalog.servers, **{name: info for name, info in servers.items() if name in used}},
        tools=[*catalog.tools, *added],
    )


#: The reference every ranker is paired with, and the ranker that ships.
UNBOUNDED = "unbounded z-sum"
SHIPPED = f"bounded at {SIGNAL_CEILING:g} (shipped)"


def rankers() -> dict[str, Score]:
    """The rankers compared, the unbounded z-sum (the reference) first."""
    out: dict[str, Score] = {UNBOUNDED: with_input_providers(fused(replace(HYBRID, ceiling=None)))}
    for ceiling in CEILINGS:
        label = SHIPPED if ceiling == SIGNAL_CEILING else f"bounded at {ceiling:g}"
        out[label] = with_input_providers(fused(replace(HYBRID, ceiling=ceiling)))
    out["dense alone"] = dense_only()
    return out


def rows_at(study: Study, space: Space) -> dict[str, Rows]:
    return {label: study_rows(study, score, space=space) for label, score in rankers().items()}


def grown_space(study: Study, catalog: Catalog) -> Space:
    space = build_space(catalog, study.encoder, "v3", study.cache)
    space.query_vectors.update(study.space.query_vectors)  # the same query vectors at every size
    return space


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.scale", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    alone = rows_at(study, study.space)
    print(f"== LiveMCPBench's {len(study.catalog.tools)} tools alone; each ranker against the unbounded z-sum")
    for label, rows in alone.items():
        print_comparison(f"-- {label}", rows, alone[UNBOUNDED], study.sets)
    for family, modules in FAMILIES.items():
        tools, servers = library_tools(modules)
        print(f"\n== {family}: {len(tools)} documented functions and classes of {len(servers)} modules", flush=True)
        for size in sorted({min(size, len(tools)) for size in SIZES}):
            catalog = with_distractors(study.catalog, tools, servers, size)
            print(f"\n==== {len(catalog.tools)} tools ({size} added)", file=sys.stderr, flush=True)
            grown = rows_at(study, grown_space(study, catalog))
            print(f"\n==== {family}, {size} added ({len(catalog.tools)} tools)")
            for label in (UNBOUNDED, SHIPPED):
                print_comparison(f"-- {label}, against itself on the 527 tools alone", grown[label], alone[label], study.sets)
            for label, rows in grown.items():
                if label != UNBOUNDED:
                    print_comparison(f"-- {label}, against the unbounded z-sum at this size", rows, grown[UNBOUNDED], study.sets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
