"""A config field's description is the docstring under it (dfl_config/field_docs.py), as
pydantic's `use_attribute_docstrings` would give it, and reaches the JSON Schema that
`dfl-launch schema` prints; a model made by `create_model` keeps its bases' descriptions."""

from __future__ import annotations

from pydantic import Field, create_model

from dfl_config.section import Section


def test_the_docstring_under_a_field_is_its_description() -> None:
    class Radio(Section):
        power: float = 1.0
        """Transmit power in watts,
            indented like any docstring."""
        channel: int = 0
        gain: float = Field(default=0.0, description="said in the field")
        """not this: the field says it"""

    fields = Radio.model_fields
    assert fields["power"].description == "Transmit power in watts,\nindented like any docstring."
    assert fields["channel"].description is None
    assert fields["gain"].description == "said in the field"
    schema = Radio.model_json_schema()["properties"]
    assert schema["power"]["description"] == fields["power"].description


def test_a_class_bound_twice_by_one_name_takes_its_own_docstrings() -> None:
    def make(first: bool) -> type[Section]:
        if first:
            class Twice(Section):
                a: int = 0
                """first"""
        else:
            class Twice(Section):  # type: ignore[no-redef]
                b: int = 0
                """second"""
        return Twice

    assert make(True).model_fields["a"].description == "first"
    assert make(False).model_fields["b"].description == "second"


def test_a_created_model_keeps_its_bases_descriptions() -> None:
    class Base(Section):
        rate: float = 0.5
        """The base's words."""

    made = create_model("Base", __base__=Base, extra=(int, 3))
    assert made.model_fields["rate"].description == "The base's words."
    assert made.model_fields["extra"].description is None
    assert made().rate == 0.5
