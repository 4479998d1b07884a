"""JSON Schema, as tools need it: a function's parameters as a schema, the argument
plan (a null means the default, unknown keys are reported), OpenAI's strict form, and
the transforms that rewrite what a model reads of a schema.

Pure functions of their inputs. The layer sits below the tool model, whose records
keep a tool's argument plan and strict form.
"""

from ._argplan import ArgumentPlan, build_plan
from ._docstring import Docstring, parse_docstring
from ._facing import ModelFacingSchema
from ._function import FunctionSchema, function_schema
from ._jsonschema import mend_unambiguous, required_names
from ._strict import strict_parameters
from ._transforms import (
    GRAMMAR_BOUND_LIMIT,
    SchemaContext,
    SchemaTransform,
    apply_transforms,
    grammar_safe_schema,
    portable_schema,
)

__all__ = [
    "GRAMMAR_BOUND_LIMIT",
    "ArgumentPlan",
    "Docstring",
    "FunctionSchema",
    "ModelFacingSchema",
    "SchemaContext",
    "SchemaTransform",
    "apply_transforms",
    "build_plan",
    "function_schema",
    "grammar_safe_schema",
    "mend_unambiguous",
    "parse_docstring",
    "portable_schema",
    "required_names",
    "strict_parameters",
]
