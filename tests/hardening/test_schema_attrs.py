"""The schema-driven attribute check (frontend/attr_rules.py) against every schema onnx
knows: no default value breaks a fact, every fact names an attribute some schema declares
with a type the fact can judge, and every word list holds each op's default word."""

from __future__ import annotations

import onnx
import pytest

from graphexec.frontend.attr_rules import FACTS, OP_FACTS, WORDS, attr_problem, schema_facts

SCHEMAS = [s for s in onnx.defs.get_all_schemas_with_history() if not s.deprecated]
A = onnx.AttributeProto


def _defaults(schema: onnx.defs.OpSchema) -> list[onnx.AttributeProto]:
    """Every attribute the schema gives a default, at that default."""
    out = []
    for name, a in schema.attributes.items():
        d = a.default_value
        if d is not None and d.type:
            d.name = name
            out.append(d)
    return out


def test_no_default_value_breaks_a_fact():
    wrong = []
    for s in SCHEMAS:
        facts = schema_facts(s.name, s.domain, s.since_version)
        assert facts is not None
        outputs = ["y"] * max(s.min_output, 1)
        problem = attr_problem(s.name, facts, _defaults(s), outputs)
        if problem and "leaves out" not in problem:
            wrong.append(f"{s.domain or 'ai.onnx'}::{s.name}-{s.since_version}: {problem}")
    assert not wrong, wrong


@pytest.mark.parametrize("table", ["FACTS", "OP_FACTS", "WORDS"])
def test_every_fact_names_an_attribute_a_schema_declares(table):
    declared: dict[tuple[str, str], int] = {}
    for s in SCHEMAS:
        for name, a in s.attributes.items():
            declared[(s.name, name)] = a.type.value
    keys = {"FACTS": [("*", k) for k in FACTS], "OP_FACTS": list(OP_FACTS), "WORDS": list(WORDS)}[table]
    for op, name in keys:
        types = {t for (o, n), t in declared.items() if n == name and op in ("*", o)}
        assert types, (op, name)
        judged = {A.STRING} if table == "WORDS" else {A.INT, A.INTS, A.FLOAT, A.FLOATS}
        assert types & judged, (op, name, types)
