"""The L2 skill carries the rules page's keyword glossary line for line (issue 27): the
glossary is generated from the engine (mcp_server/resources.py), so a rule or card change that
alters it fails here until the skill is regenerated from ``keyword_glossary()``."""

from __future__ import annotations

import re

from engine import KEYWORDS
from mcp_server.resources import RULES_URI, keyword_glossary, rules_text
from tests.skills.skilldocs import SKILLS

L2 = SKILLS / "extra-rlhf-l2-battle" / "SKILL.md"
_BLOCK = re.compile(r"<!-- glossary: [^\n]*-->\n(.*?)\n<!-- end glossary -->", flags=re.S)


def skill_glossary(text: str) -> list[str]:
    found = _BLOCK.search(text)
    assert found, "the L2 skill has no glossary block"
    return found.group(1).splitlines()


def test_the_l2_skill_glossary_is_the_rules_pages():
    text = L2.read_text(encoding="utf-8")
    assert f"`{RULES_URI}`" in text
    assert skill_glossary(text) == list(keyword_glossary()), \
        "regenerate the glossary block of the L2 skill from mcp_server.resources.keyword_glossary()"
    assert all(line in rules_text() for line in keyword_glossary())
    assert [re.match(r"- \*\*([a-z]+)\*\*", line).group(1) for line in keyword_glossary()] == list(KEYWORDS)


def test_the_glossary_check_catches_an_edited_line():
    text = L2.read_text(encoding="utf-8")
    edited = text.replace("your hero heals 3", "your hero heals 1")
    assert edited != text and skill_glossary(edited) != list(keyword_glossary())
