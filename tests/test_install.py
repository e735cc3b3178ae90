"""The install is pinned: constraints.txt fits pyproject.toml's ranges, pins all that gets installed, and the README's
set-up commands are the ones CI runs."""
from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from readme_transcripts import fenced_blocks, section

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def pins() -> dict[str, Version]:
    """constraints.txt as {canonical name: version}; a line that is not `name==version` fails the test."""
    found: dict[str, Version] = {}
    for number, line in enumerate((ROOT / "constraints.txt").read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        match = PIN.fullmatch(text)
        assert match, f"constraints.txt:{number}: not an exact pin: {line!r}"
        name = canonicalize_name(match.group(1))
        assert name not in found, f"constraints.txt:{number}: {name} is pinned twice"
        found[name] = Version(match.group(2))
    return found


def declared() -> list[tuple[str, Requirement]]:
    """(where, requirement) for every dependency pyproject.toml declares: build system, runtime, each extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    out = [("build-system", Requirement(r)) for r in project["build-system"]["requires"]]
    out += [("dependencies", Requirement(r)) for r in project["project"]["dependencies"]]
    for extra, requirements in project["project"]["optional-dependencies"].items():
        out += [(f"[{extra}]", Requirement(r)) for r in requirements]
    return out


def test_pyproject_ranges_admit_every_pin():
    """Each declared dependency (and each extra it asks for) has a pin, and the pin lies in the declared range."""
    pinned = pins()
    for where, requirement in declared():
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{where} {requirement}: no pin in constraints.txt"
        assert requirement.specifier.contains(pinned[name], prereleases=True), \
            f"{where} {requirement} does not admit constraints.txt's {name}=={pinned[name]}"
        for extra in requirement.extras:  # psycopg[binary] needs psycopg-binary pinned too
            assert canonicalize_name(f"{name}-{extra}") in pinned, f"{where} {requirement}: {name}-{extra} unpinned"


def test_a_range_that_excludes_a_pin_is_caught():
    """The range check is real: pytest 9.2 (which breaks Schemathesis' plugin) is outside the declared range."""
    pytest_range = next(r for _, r in declared() if r.name == "pytest")
    assert not pytest_range.specifier.contains(Version("9.2.0"))
    assert pytest_range.specifier.contains(pins()["pytest"])


def _closure(distribution: str, extras: frozenset) -> dict[str, str]:
    """{canonical name: installed version} of a distribution and everything it requires, markers evaluated."""
    seen: dict[str, str] = {}
    visited: set = set()
    todo = [(distribution, extras)]
    while todo:
        name, wanted = todo.pop()
        if (canonicalize_name(name), wanted) in visited:
            continue
        visited.add((canonicalize_name(name), wanted))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional part this platform does not install
        seen[canonicalize_name(dist.metadata["Name"])] = dist.version
        for text in dist.requires or ():
            requirement = Requirement(text)
            environments = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            if requirement.marker is None or any(requirement.marker.evaluate(env) for env in environments):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return seen


def test_everything_installed_for_the_tests_is_pinned():
    """No package that kentino-expert[test] pulls in floats: each has a pin, so CI gets the same set every time."""
    try:
        metadata.distribution("kentino-expert")
    except metadata.PackageNotFoundError:
        pytest.skip("kentino-expert is not installed here (the README installs it with pip install -e '.[test]')")
    installed = _closure("kentino-expert", frozenset({"test"}))
    unpinned = sorted(set(installed) - set(pins()) - {"kentino-expert"})
    assert not unpinned, f"installed but not pinned in constraints.txt: {', '.join(unpinned)}"
    assert {"pytest", "schemathesis", "mcp", "durable-rules", "psycopg-binary"} <= set(installed)


def test_a_plain_install_brings_mcp():
    """MCP is how assistants connect: `pip install kentino-expert`, no extra, installs the mcp package (2.x)."""
    try:
        metadata.distribution("kentino-expert")
    except metadata.PackageNotFoundError:
        pytest.skip("kentino-expert is not installed here (the README installs it with pip install -e '.[test]')")
    plain = _closure("kentino-expert", frozenset())
    assert "mcp" in plain and plain["mcp"].split(".")[0] == "2", sorted(plain)
    runtime = [r for where, r in declared() if where == "dependencies"]
    assert any(r.name == "mcp" for r in runtime)


def _setup_commands() -> list[str]:
    text, line = section("## Set-up")
    block = next(b for b in fenced_blocks(text, line) if b.info == "sh")
    return [re.sub(r"\s+#.*$", "", command) for _, command in block.lines]


def test_readme_set_up_starts_with_a_venv_and_pins_every_install():
    """The set-up makes a venv first (PEP 668), then installs only through constraints.txt."""
    venv, *installs = _setup_commands()
    assert venv.startswith("python3 -m venv ") and ". .venv/bin/activate" in venv
    assert len(installs) == 2
    for command in installs:
        assert command.startswith("PIP_CONSTRAINT=constraints.txt python3 -m pip install "), command
    assert "kentino-expert recommend examples/" in installs[0] and installs[1].endswith("python3 -m pytest")


def test_ci_runs_exactly_the_readme_commands():
    """.ci/run runs the README's two set-up commands verbatim, in a venv of its own, and removes what it made."""
    script = (ROOT / ".ci" / "run").read_text()
    lines = script.splitlines()
    _, main_job, test_suite = _setup_commands()
    assert lines[-2:] == [main_job, test_suite]
    assert re.search(r'^python3 -m venv "\$WORK/venv" && \. "\$WORK/venv/bin/activate"$', script, re.M)
    assert re.search(r"^trap cleanup EXIT$", script, re.M) and 'rm -rf "$PGDIR"' in script
