"""docs/ad.md's tables of supported and refused constructs are generated from the engine's own
tables (rules, memory model, allowlist); regenerate with ``python -m adoffload.enzyme.docs``."""
from pathlib import Path

from adoffload.enzyme import docs

AD_MD = Path(__file__).parents[2] / "docs" / "ad.md"


def test_docs_ad_md_holds_the_tables_the_code_has():
    assert docs.render() in AD_MD.read_text(), "docs/ad.md is stale: run python -m adoffload.enzyme.docs docs/ad.md"


def test_every_rule_and_allocation_function_is_listed():
    text = docs.render()
    for key in docs.RULES:
        assert f"`{key.removeprefix('call:')}`" in text
    for name in docs.ALLOCATORS:
        assert f"`{name}`" in text
