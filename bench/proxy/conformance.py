"""The official MCP conformance suite against the copilot, as a proxy (``python -m bench conformance``).

``python -m bench conformance`` (or ``python -m bench.proxy.conformance [--scenario NAME ...] [--keep DIR]``)

1. Installs the suite (npm ``@modelcontextprotocol/conformance``, pinned) and Node 22 (the npm
   package ``node@22``; the suite needs Node >= 22) into a cache directory, once
   (``COPILOT_CONFORMANCE_CACHE``, default: the user cache dir). ``npm`` must be on PATH.
2. Crawls ``tests/fixtures/conformance_server.py`` -- a child with the tools, resources and
   prompts the suite's server scenarios ask for -- into a fresh index.
3. Serves the copilot over streamable HTTP in front of it with ``COPILOT_EXPOSE=all`` and
   ``COPILOT_EXPOSE_UNPREFIXED=conformance`` (its items keep their names), and runs every server
   scenario of the suite against it (``--suite all``: the active ones and the pending ones).
4. Prints one line per scenario: passed, failed (with the failing checks), or an expected failure
   with its reason (:data:`EXPECTED_FAILURES`). The exit code is 1 when a scenario fails that is
   not an expected failure.

So every scenario checks a pass-through path: the host talks to the copilot, the copilot to the
child. Scenarios that need a feature the copilot does not relay are listed with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from platformdirs import user_cache_dir

from index.cli.console import HelpFormatter
from index.settings import PROJECT_DIR

SUITE_PACKAGE = "@modelcontextprotocol/conformance@0.1.16"
NODE_PACKAGE = "node@22"
FIXTURE = PROJECT_DIR / "tests" / "fixtures" / "conformance_server.py"
SERVER_NAME = "conformance"
START_TIMEOUT = 120.0
SUITE_TIMEOUT = 600.0

#: Scenarios that fail against the copilot, and why (the README's conformance table says the same).
#: Scenarios that fail for a known reason (name -> why). Empty: with the relay of host and child
#: (progress, logging, sampling, elicitation) every server scenario of the suite passes.
EXPECTED_FAILURES: dict[str, str] = {}


class SuiteUnavailable(RuntimeError):
    """The suite or Node 22 cannot be installed here (no npm, or npm's registry unreachable)."""


@dataclass
class Scenario:
    name: str
    passed: bool
    failures: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Suite:
    conformance: Path
    node_bin: Path

    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.node_bin}{os.pathsep}{os.environ.get('PATH', '')}"}


def cache_dir() -> Path:
    configured = os.environ.get("COPILOT_CONFORMANCE_CACHE")
    return Path(configured) if configured else Path(user_cache_dir("mcp-copilot")) / "conformance"


def install_suite(cache: Path | None = None) -> Suite:
    """The suite and Node 22 from the cache, installed there with npm first if needed."""
    cache = cache or cache_dir()
    bin_dir = cache / "node_modules" / ".bin"
    conformance, node = bin_dir / "conformance", bin_dir / "node"
    if not (conformance.exists() and node.exists()):
        npm = shutil.which("npm")
        if npm is None:
            raise SuiteUnavailable("npm is not on PATH: install Node.js (which provides npm) to run the suite")
        cache.mkdir(parents=True, exist_ok=True)
        try:
            result = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache), NODE_PACKAGE, SUITE_PACKAGE],
                capture_output=True,
                text=True,
                timeout=600,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise SuiteUnavailable("npm install of the conformance suite took over 10 minutes") from None
        if result.returncode != 0 or not conformance.exists():
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise SuiteUnavailable(f"npm could not install {SUITE_PACKAGE} and {NODE_PACKAGE}: {' | '.join(tail)}")
    check = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if check.returncode != 0 or not check.stdout.startswith("v22"):
        raise SuiteUnavailable(f"the cached Node is not Node 22 ({check.stdout.strip() or check.stderr.strip()})")
    return Suite(conformance=conformance, node_bin=bin_dir)


def prepare_home(home: Path) -> Path:
    """A COPILOT_HOME whose index holds the conformance child; returns its servers file."""
    from index.catalog.crawl import crawl_servers
    from index.catalog.servers import load_servers
    from index.settings import CopilotSettings
    from index.search.tool_index import ToolIndex

    servers = home / "servers.json"
    home.mkdir(parents=True, exist_ok=True)
    servers.write_text(
        json.dumps({"mcpServers": {SERVER_NAME: {"command": sys.executable, "args": [str(FIXTURE)]}}}), encoding="utf-8"
    )

    async def crawl() -> object:
        return await crawl_servers(
            load_servers(servers).servers, timeout=120, log_dir=home / "crawl-logs", progress=False
        )

    report = anyio.run(crawl)
    if report.failed:  # type: ignore[attr-defined]
        raise RuntimeError(f"could not crawl the conformance fixture: {report.failed[0].message}")  # type: ignore[attr-defined]
    ToolIndex.open(CopilotSettings(home=home)).sync(report.records)  # type: ignore[attr-defined]
    return servers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_copilot(home: Path, servers: Path, log: Path) -> Iterator[str]:
    """The copilot over HTTP on a free loopback port in front of the fixture; yields its URL."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPILOT_")}
    env.update(
        COPILOT_HOME=str(home),
        COPILOT_CATALOG=str(home / "no-catalog.json"),
        COPILOT_EXPOSE="all",
        COPILOT_EXPOSE_UNPREFIXED=SERVER_NAME,
        COPILOT_AUTO_INDEX="false",
        COPILOT_WARM_INDEX="false",
        PYTHONUNBUFFERED="1",
    )
    command = [sys.executable, "-m", "server", "--servers", str(servers), "--http", "--port", str(port)]
    ready = threading.Event()
    with log.open("wb") as sink:
        process = subprocess.Popen(command, env=env, cwd=str(home), stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.PIPE)

        def drain() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                sink.write(line)
                sink.flush()
                if b"serving MCP over streamable HTTP on" in line:
                    ready.set()
            ready.set()

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            if not ready.wait(START_TIMEOUT) or process.poll() is not None:
                raise RuntimeError(f"the copilot did not start serving HTTP; see {log}")
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)
            reader.join(30)


def run_suite(suite: Suite, url: str, out: Path, scenarios: Sequence[str] = ()) -> dict[str, Scenario]:
    """Run every server scenario (or only ``scenarios``) against ``url``; results by scenario."""
    runs = list(scenarios) or [""]
    if out.exists():
        shutil.rmtree(out)  # a kept directory's earlier results are not this run's
    out.mkdir(parents=True)
    with (out / "suite.log").open("w", encoding="utf-8", errors="replace") as log:  # why a scenario wrote no result
        for scenario in runs:
            command = [str(suite.conformance), "server", "--url", url, "-o", str(out)]
            command += ["--scenario", scenario] if scenario else ["--suite", "all"]
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            subprocess.run(
                command, env=suite.env(), stdout=log, stderr=subprocess.STDOUT, timeout=SUITE_TIMEOUT, stdin=subprocess.DEVNULL
            )
    return read_results(out)


def read_results(out: Path) -> dict[str, Scenario]:
    """``<out>/server-<scenario>-<timestamp>/checks.json`` -> one :class:`Scenario` each."""
    results: dict[str, Scenario] = {}
    for checks_file in sorted(out.glob("server-*/checks.json")):
        name = checks_file.parent.name.removeprefix("server-").rsplit("-", 6)[0]
        checks = json.loads(checks_file.read_text(encoding="utf-8"))
        failures = [
            f"{check.get('name')}: {check.get('errorMessage') or check.get('status')}"
            for check in checks
            if check.get("status") not in ("SUCCESS", "INFO", "WARNING")
        ]
        results[name] = Scenario(name=name, passed=bool(checks) and not failures, failures=failures)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench conformance", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=HelpFormatter)
    parser.add_argument("--scenario", nargs="+", default=[], help="run only these scenarios")
    parser.add_argument("--keep", type=Path, help="keep the copilot's home, log and the suite's results here")
    args = parser.parse_args(list(argv) if argv is not None else None)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        suite = install_suite()
    except SuiteUnavailable as error:
        print(f"conformance suite unavailable: {error}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="copilot-conformance-") as temp:
        root = args.keep or Path(temp)
        home = root / "home"
        servers = prepare_home(home)
        with serve_copilot(home, servers, root / "copilot.log") as url:
            results = run_suite(suite, url, root / "results", args.scenario)
    return report(results, args.scenario)


def report(results: dict[str, Scenario], requested: Sequence[str]) -> int:
    """Print one line per scenario and the totals; 1 when a scenario failed unexpectedly or did not run."""
    unexpected = 0
    missing = [name for name in requested if name not in results]
    if missing:
        print(
            f"no result for scenario(s) {', '.join(missing)}: unknown to the suite, or it failed to run "
            "(its output: results/suite.log in the --keep DIR)",
            file=sys.stderr,
        )
        unexpected += len(missing)
    if not results:
        print("no scenario ran, so none passed", file=sys.stderr)
        return 1
    print(f"\n{'scenario':<32} result")
    print("-" * 80)
    for name, scenario in sorted(results.items()):
        if scenario.passed:
            line = "passed"
        elif name in EXPECTED_FAILURES:
            line = f"expected failure: {EXPECTED_FAILURES[name]}"
        else:
            unexpected += 1
            line = "FAILED: " + "; ".join(scenario.failures)[:300]
        print(f"{name:<32} {line}")
    passed = sum(s.passed for s in results.values())
    print(f"\n{passed} of {len(results)} scenarios passed; {unexpected} unexpected failure(s)")
    return 1 if unexpected else 0


if __name__ == "__main__":
    raise SystemExit(main())
