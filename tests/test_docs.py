"""The README and the guides stay true: short README, every guide linked and navigable, links that lead somewhere,
generated tables as the code has them, and the names they mention still there."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kentino_expert.authoring import reference_tables
from kentino_expert.authoring.reference_tables import (
    PASSED_IN,
    TABLES,
    blocks_in,
    refresh_guides,
    refreshed,
    render_all,
)
from kentino_expert.authoring.scenarios import EXPECT_KEYS
from kentino_expert.cli.main import main
from kentino_expert.cli.rules import cli_tables
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.figures import FIGURE_SPECS
from kentino_expert.errors import KentinoError
from kentino_expert.ruleset.compiler import compile_ruleset
from kentino_expert.ruleset.diagnostics import CODES

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *GUIDES, *sorted((ROOT / "docs" / "rules").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a Markdown page outside fenced blocks, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    found, seen = set(), {}
    for _, line in prose_lines(path):
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            found.add(f"{base}-{count}" if count else base)
            seen[base] = count + 1
    return found


def links(path: Path) -> list[tuple[int, str]]:
    return [(number, target) for number, line in prose_lines(path)
            for target in LINK.findall(CODE_SPAN.sub("``", line).replace("``", ""))
            if not re.match(r"[a-z]+:", target)]


@pytest.fixture(scope="module")
def tables():
    knowledge = load_knowledge(ROOT / "knowledge")
    return render_all(compile_ruleset(ROOT / "rules", knowledge), knowledge, cli_tables())


class TestReadme:
    """The README is a short front page that leads to every guide."""

    def test_readme_is_at_most_300_lines(self):
        """The README stays a front page: what it is, set-up, a quick start, the guides."""
        count = len(README.read_text(encoding="utf-8").splitlines())
        assert count <= 300, f"README.md has {count} lines; move the detail into a guide under docs/"

    def test_every_guide_is_linked_from_the_readme(self):
        """Each docs/*.md is reachable from the README in one click."""
        linked = {(README.parent / target.split("#")[0]).resolve() for _, target in links(README)}
        missing = [guide.name for guide in GUIDES if guide.resolve() not in linked]
        assert not missing, f"not linked from README.md: {missing}"


class TestLinks:
    """Every relative link of the README, the guides and the rule pages leads to a file and a heading."""

    @pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
    def test_relative_links_resolve(self, page):
        """A link names a file (or directory) that exists and, after a `#`, a heading of that file."""
        broken = []
        for number, target in links(page):
            file_part, _, anchor = target.partition("#")
            destination = (page.parent / file_part).resolve() if file_part else page
            if not destination.exists():
                broken.append(f"{page.name}:{number}: {target} (no such file)")
            elif anchor and (destination.is_dir() or anchor not in anchors(destination)):
                broken.append(f"{page.name}:{number}: {target} (no such heading)")
        assert not broken, "\n".join(broken)

    def test_slugs_follow_github(self):
        """Headings with code, commas and quotes get the anchors GitHub gives them."""
        assert slug("`then` effects") == "then-effects"
        assert slug('"First yes ends it"') == "first-yes-ends-it"
        expected = "6-regenerate-the-rule-examples-the-rule-pages"
        assert slug("6. Regenerate the rule examples, the rule pages") == expected


class TestNoMergeLeftovers:
    """No file of the project still holds a merge's conflict markers (two guides once published them)."""

    def test_no_conflict_markers(self):
        """No line of a text file of the project starts a conflict: `<<<<<<< ` or `>>>>>>> `."""
        found = []
        for folder in ("docs", "rules", "knowledge", "kentino_expert", "tests", "examples", "benchmarks", ".ci"):
            for path in sorted((ROOT / folder).rglob("*")):
                if path.suffix not in {".md", ".py", ".yaml", ".yml", ".toml", ".txt", ".json", ""} or \
                        not path.is_file():
                    continue
                for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                    if line.startswith(("<<<<<<< ", ">>>>>>> ")):
                        found.append(f"{path.relative_to(ROOT)}:{number}: {line[:40]}")
        for path in (README, ROOT / "pyproject.toml", ROOT / "constraints.txt"):
            found += [f"{path.name}:{n}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                      if line.startswith(("<<<<<<< ", ">>>>>>> "))]
        assert not found, "\n".join(found)


@pytest.mark.parametrize("guide", GUIDES, ids=[g.name for g in GUIDES])
def test_each_guide_has_a_table_of_contents(guide):
    """A guide starts with a contents line that links every one of its `## ` sections."""
    lines = prose_lines(guide)
    sections = [slug(line[3:]) for _, line in lines if line.startswith("## ")]
    first_section = next(number for number, line in lines if line.startswith("## "))
    contents = {target[1:] for number, target in links(guide) if number < first_section and target.startswith("#")}
    missing = [s for s in sections if s not in contents]
    assert sections and not missing, f"{guide.name}: sections missing from its contents: {missing}"


class TestGeneratedBlocks:
    """The lists the code knows are generated into the guides, never copied by hand."""

    @pytest.mark.parametrize("guide", GUIDES, ids=[g.name for g in GUIDES])
    def test_generated_blocks_are_fresh(self, guide, tables):
        """Each generated block holds what the code renders today."""
        text = guide.read_text(encoding="utf-8")
        assert refreshed(text, tables, guide.name) == text, (
            f"{guide.name} has a stale generated block: run `kentino-expert rules docs docs/rules --guides docs`")

    def test_every_table_is_in_some_guide(self):
        """Figures, conclusions, parameters, facts, questions, the catalog, diagnostics and modules each appear."""
        used = {name for guide in GUIDES for name in blocks_in(guide.read_text(encoding="utf-8"))}
        assert used == set(TABLES) | set(PASSED_IN)

    def test_the_rule_language_holds_every_figure(self):
        """Every figure derive.py computes has its row in the rule language's figure table."""
        text = (ROOT / "docs" / "rule-language.md").read_text(encoding="utf-8")
        missing = [name for name in FIGURE_SPECS if f"| `{name}` |" not in text]
        assert not missing and len(FIGURE_SPECS) > 50

    def test_the_trace_format_holds_every_plan_figure(self):
        """Every figure an answer gives of its plan (the plan's own and its time to result) has its row in the
        trace format's plan-figure table."""
        from kentino_expert.domain.deadlines import TIME_FIGURE_SPECS
        from kentino_expert.domain.figures import PLAN_FIGURE_SPECS
        text = (ROOT / "docs" / "trace-format.md").read_text(encoding="utf-8")
        missing = [name for name in {**PLAN_FIGURE_SPECS, **TIME_FIGURE_SPECS} if f"| `{name}` |" not in text]
        assert not missing and "time_to_result_days" in TIME_FIGURE_SPECS

    def test_expect_keys_table_matches_the_code(self):
        """The scenario `expect` keys documented for product managers are exactly scenarios.EXPECT_KEYS."""
        text = (ROOT / "docs" / "product-managers.md").read_text(encoding="utf-8")
        table = text[text.index("Keys of `expect`"):].split("\n\n")[1]
        documented = {key for row in table.splitlines()[2:] for key in re.findall(r"`(\w+)`", row.split("|")[1])}
        assert documented == set(EXPECT_KEYS)


class TestNamesInTheGuides:
    """What the guides name in prose (modules, environment variables) still exists."""

    def test_every_module_named_exists(self):
        """A `name.py` in prose is a module of the package or a file of the repository."""
        files = {p.name for p in (ROOT / "kentino_expert").rglob("*.py")} | {p.name for p in ROOT.glob("tests/*.py")}
        named = {(page.name, name) for page in [README, *GUIDES] for _, line in prose_lines(page)
                 for name in re.findall(r"`([a-z_]+\.py)`", line)}
        assert not [f"{page}: {name}" for page, name in named if name not in files]

    def test_every_dotted_module_named_imports(self):
        """A `kentino_expert.x` module named in prose (python -m, an import) can be found."""
        named = {name for page in [README, *GUIDES] for _, line in prose_lines(page)
                 for name in re.findall(r"\bkentino_expert(?:\.[a-z_]+)+", line)}
        assert not [name for name in named if importlib.util.find_spec(name) is None]

    def test_every_environment_variable_is_documented_for_operators(self):
        """Each KENTINO_* variable the package reads has its row in docs/operations.md."""
        source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "kentino_expert").rglob("*.py"))
        text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
        assert not sorted(set(re.findall(r"KENTINO_[A-Z_]+", source)) - set(re.findall(r"KENTINO_[A-Z_]+", text)))


class TestReferenceTables:
    """Generated blocks are rewritten from data, in place, and a bad marker is a located one-line error."""

    def test_only_the_block_bodies_change(self):
        """Text around the markers stays; a block's body becomes the table, and a second pass changes nothing."""
        text = ("intro `<!-- generated: figures -->` inline\n"
                "<!-- generated: diagnostics -->\nold\n<!-- end generated -->\nafter\n")
        once = refreshed(text, {"diagnostics": "| new |"}, "g.md")
        assert once == ("intro `<!-- generated: figures -->` inline\n<!-- generated: diagnostics -->\n\n| new |\n\n"
                        "<!-- end generated -->\nafter\n")
        assert refreshed(once, {"diagnostics": "| new |"}, "g.md") == once

    def test_an_unknown_block_is_located(self):
        """A misspelt block name is an error naming the file and line, with the known names."""
        with pytest.raises(KentinoError, match=r"^g\.md:2:1: unknown generated block 'figure' \(known: figures,"):
            refreshed("x\n<!-- generated: figure -->\n<!-- end generated -->\n", {}, "g.md")

    def test_an_unclosed_block_is_located(self):
        """An opening marker without its end line is an error, not a swallowed page."""
        with pytest.raises(KentinoError, match=r"^g\.md:1:1: generated block 'figures' has no"):
            refreshed("<!-- generated: figures -->\ntext\n", {"figures": ""}, "g.md")

    def test_tables_follow_the_rule_files(self, tmp_path):
        """A parameter changed in a copy of the rules shows in the parameters table rendered from that copy."""
        import shutil
        shutil.copytree(ROOT / "rules", tmp_path / "rules")
        parameters = tmp_path / "rules" / "parameters.yaml"
        parameters.write_text(parameters.read_text().replace("    value: 100000\n", "    value: 123456\n"))
        knowledge = load_knowledge(ROOT / "knowledge")
        table = render_all(compile_ruleset(tmp_path / "rules", knowledge), knowledge)["parameters"]
        assert "| `hyperscale_qps` | 123456 | requests/s |" in table

    def test_diagnostics_table_lists_every_code(self, tables):
        """Every code of diagnostics.CODES is a row, E codes as errors and W codes as warnings."""
        rows = tables["diagnostics"].splitlines()[2:]
        assert len(rows) == len(CODES)
        assert "| [`E105`](#e105) | error | a rule id, or a warning code, is used twice |" in rows
        warnings = [row for row in rows if row.startswith("| [`W")]
        assert warnings and all("| warning |" in row for row in warnings)

    def test_modules_table_walks_subpackages(self, tmp_path, monkeypatch):
        """Modules in subpackages are listed with their docstring's first paragraph, read without importing them."""
        package = tmp_path / "kentino_expert"
        (package / "engine").mkdir(parents=True)
        (package / "__init__.py").write_text('"""Top."""\n')
        (package / "engine" / "core.py").write_text('"""The core:\nwrapped line.\n\nMore."""\nraise SystemExit\n')
        monkeypatch.setattr(reference_tables, "PACKAGE", package)
        assert reference_tables.modules_table().splitlines()[2:] == [
            "| `kentino_expert/__init__.py` | Top. |", "| `kentino_expert/engine/core.py` | The core: wrapped line. |"]

    def test_a_bad_guide_leaves_every_guide_unwritten(self, tmp_path, tables):
        """Refreshing a directory checks every guide first: one bad marker and none is rewritten."""
        good = "<!-- generated: diagnostics -->\nold\n<!-- end generated -->\n"
        (tmp_path / "a.md").write_text(good)
        (tmp_path / "b.md").write_text("<!-- generated: nope -->\n<!-- end generated -->\n")
        knowledge = load_knowledge(ROOT / "knowledge")
        with pytest.raises(KentinoError, match="unknown generated block 'nope'"):
            refresh_guides(tmp_path, compile_ruleset(ROOT / "rules", knowledge), knowledge)
        assert (tmp_path / "a.md").read_text() == good


class TestRulesDocsGuides:
    """`rules docs OUTDIR --guides DIR` also refreshes the guides' generated tables."""

    def test_refreshes_a_stale_guide(self, tmp_path, tables):
        """A stale block is rewritten and the command says how many guides changed."""
        guide = tmp_path / "guides" / "g.md"
        guide.parent.mkdir()
        guide.write_text("# G\n\n<!-- generated: parameters -->\nstale\n<!-- end generated -->\n")
        result = CliRunner().invoke(main, ["rules", "docs", str(tmp_path / "pages"), "--rules", str(ROOT / "rules"),
                                           "--knowledge", str(ROOT / "knowledge"), "--guides", str(guide.parent)])
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[-1] == f"refreshed the generated tables of 1 guide(s) in {guide.parent}"
        assert tables["parameters"] in guide.read_text() and "stale" not in guide.read_text()

    def test_a_bad_marker_is_a_one_line_error(self, tmp_path):
        """An unknown block name exits 2 with one line naming file:line, and leaves the guide as it was."""
        guide = tmp_path / "g.md"
        guide.write_text("<!-- generated: figurez -->\n<!-- end generated -->\n")
        result = CliRunner().invoke(main, ["rules", "docs", str(tmp_path / "pages"), "--rules", str(ROOT / "rules"),
                                           "--knowledge", str(ROOT / "knowledge"), "--guides", str(tmp_path)])
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            f"error: {guide}:1:1: unknown generated block 'figurez' (known: {', '.join([*TABLES, *PASSED_IN])})"]
        assert guide.read_text() == "<!-- generated: figurez -->\n<!-- end generated -->\n"


# The marker line of a generated page, spelled out: pages already written carry this exact text, so a
# change to it would leave them undeletable.
GENERATED = "<!-- generated by kentino-expert rules docs: do not edit -->"


def rules_docs(outdir, *extra):
    """`kentino-expert rules docs OUTDIR` on the checkout's rules and knowledge."""
    return CliRunner().invoke(main, ["rules", "docs", str(outdir), "--rules", str(ROOT / "rules"),
                                     "--knowledge", str(ROOT / "knowledge"), *map(str, extra)])


def one_line_error(result) -> str:
    """The single `error:` line of a run that exited 2 without a traceback."""
    assert result.exit_code == 2 and not isinstance(result.exception, (OSError, ValueError)), result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


class TestRulesDocsOutdir:
    """`rules docs OUTDIR` replaces only the pages it generated, and writes all of them or none."""

    def test_hand_written_pages_survive(self, tmp_path):
        """A hand-written .md in OUTDIR is kept; a generated page of a rule that is gone is removed."""
        (tmp_path / "guide.md").write_text("# My guide\n")
        (tmp_path / "gone-rule.md").write_text(f"{GENERATED}\n# `gone-rule`\n")
        result = rules_docs(tmp_path)
        assert result.exit_code == 0, result.output
        assert (tmp_path / "guide.md").read_text() == "# My guide\n"
        assert not (tmp_path / "gone-rule.md").exists()
        assert (tmp_path / "index.md").read_text().startswith(GENERATED + "\n")

    def test_a_hand_written_file_with_a_page_name_is_refused(self, tmp_path):
        """A hand-written index.md is neither overwritten nor joined by pages: one line naming it, exit 2."""
        (tmp_path / "index.md").write_text("# Mine\n")
        line = one_line_error(rules_docs(tmp_path))
        assert str(tmp_path / "index.md") in line and "not generated" in line
        assert (tmp_path / "index.md").read_text() == "# Mine\n"
        assert list(tmp_path.iterdir()) == [tmp_path / "index.md"]

    @pytest.mark.parametrize("where", ["a file", "under a file", "in /proc", "page is a directory"])
    def test_an_unwritable_outdir_is_one_line_and_leaves_nothing(self, tmp_path, where):
        """OUTDIR a file, under a file, in /proc or with a page name taken by a directory: one line, no pages."""
        (tmp_path / "afile").write_text("x")
        blocker = tmp_path / "mid" / "index.md"
        blocker.mkdir(parents=True)
        outdir = {"a file": tmp_path / "afile", "under a file": tmp_path / "afile" / "sub",
                  "in /proc": Path("/proc/kentino-docs-test"), "page is a directory": tmp_path / "mid"}[where]
        if where == "in /proc" and not Path("/proc/self").is_dir():
            pytest.skip("no /proc here")
        line = one_line_error(rules_docs(outdir))
        assert line.startswith("error: ") and "cannot write" in line and str(outdir) in line, line
        assert (tmp_path / "afile").read_text() == "x" and list((tmp_path / "mid").iterdir()) == [blocker]

    @pytest.mark.parametrize("earlier", [False, True])
    def test_a_failed_write_leaves_outdir_as_it_was(self, tmp_path, monkeypatch, earlier):
        """A move failing midway (a full disk) leaves earlier pages as they were, or no directory it created."""
        import errno
        import os

        from kentino_expert.authoring import rule_pages
        outdir = tmp_path / "new" / "pages"
        first = next(n for _, n in links(ROOT / "docs" / "rules" / "index.md"))  # the page moved in first
        if earlier:
            outdir.mkdir(parents=True)
            (outdir / "guide.md").write_text("# Mine\n")
            for name in ("index.md", first, "gone-rule.md"):
                (outdir / name).write_text(f"{GENERATED}\nold {name}\n")
        before = {p.name: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
        calls = []

        def replace(source, target):
            calls.append(target)
            if len(calls) == 4:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.rename(source, target)
        monkeypatch.setattr(rule_pages.os, "replace", replace)
        line = one_line_error(rules_docs(outdir))
        assert line == f"error: {outdir}: cannot write the rule pages: No space left on device"
        assert {p.name: p.read_text() for p in tmp_path.rglob("*") if p.is_file()} == before
        assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["new", "pages", *before] if earlier else [])

    def test_a_guide_that_is_not_utf8_stops_before_any_page(self, tmp_path):
        """A non-UTF-8 guide is one line naming it, before OUTDIR is created."""
        guides = tmp_path / "guides"
        guides.mkdir()
        (guides / "x.md").write_bytes(b"\xff\xfe")
        line = one_line_error(rules_docs(tmp_path / "out", "--guides", guides))
        assert f"{guides / 'x.md'}: cannot read: not UTF-8" in line
        assert not (tmp_path / "out").exists()
