"""``snakemake --lint`` on the shipped configs: clean but for the lints a rule file accepts in a comment that names the
lint and says why (``# lint accepted (<title>): <reason>``); every rule is defined whatever the config (no rule inside
an ``if``), so the lint sees them all."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REPO, SNAKEMAKE

#: The default run and the configs that turn on the sections whose rules were once conditional (shifts, OOD, label
#: shift); each lint parses the whole workflow (~3 CPU-s).
CONFIGS = ["config.yaml", "shift.yaml", "label_shift.yaml"]
ACCEPTED = re.compile(r"^# lint accepted \((?P<title>[^)]+)\): \S", re.MULTILINE)


def lints(output: str) -> list[tuple[str, str]]:
    """``(what, title)`` of each lint in ``snakemake --lint``'s text: ``what`` is the rule file's path for a
    snakefile's lint, ``rule NAME`` for a rule's."""
    found, where = [], None
    for line in output.splitlines():
        head = re.match(r"Lints for (snakefile (?P<file>\S+)|rule (?P<rule>\S+).*):$", line)
        if head:
            where = head["file"] or f"rule {head['rule']}"
        elif where and (item := re.match(r"    \* (?P<title>.+?):?$", line)):
            found.append((where, item["title"].rstrip(".:").rstrip(".")))
    return found


@pytest.mark.parametrize("config", CONFIGS)
def test_snakemake_lint_is_clean_but_for_lints_accepted_with_a_reason(config):
    result = subprocess.run([SNAKEMAKE, "--lint", "--configfile", f"config/{config}"], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    found = lints(result.stdout + result.stderr)
    assert result.returncode == 0 or found, result.stderr[-3000:]
    unjustified = []
    for where, title in found:
        if where.startswith("rule "):
            unjustified.append((where, title))
            continue
        accepted = {m["title"].rstrip(".") for m in ACCEPTED.finditer(open(where).read())}
        if title not in accepted:
            unjustified.append((where, title))
    assert not unjustified, unjustified


def test_no_rule_is_defined_inside_a_conditional():
    """Rules are always defined; rule all (Snakefile) chooses the targets from the config."""
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        nested = re.findall(r"^[ \t]+(?:rule|localrules)\b.*:$", path.read_text(), re.MULTILINE)
        assert not nested, (path.name, nested)


def test_lint_text_is_parsed():
    text = ("Lints for snakefile /x/a.smk:\n    * Mixed rules and functions in same snakefile.:\n      body\n"
            "Lints for rule r (line 3, /x/a.smk):\n    * No log directive defined:\n")
    assert lints(text) == [("/x/a.smk", "Mixed rules and functions in same snakefile"),
                           ("rule r", "No log directive defined")]
