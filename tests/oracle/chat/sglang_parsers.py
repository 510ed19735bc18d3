"""Runs SGLang's own tool-call and reasoning parsers on cases (the reference of
test_parsers_oracle.py), in a process of its own: it imports SGLang's parsers (the `sglang` wheel installed with
--no-deps) without torch and the rest of the serving stack: `sglang/__init__.py` is bypassed and
the heavy modules the parser files import only for types (torch, triton, PIL, zmq, xgrammar, ...)
are replaced by inert stubs. Nothing stubbed is ever called by the parsers."""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

STUBBED = {"torch", "triton", "PIL", "starlette", "zmq", "IPython", "xgrammar", "psutil",
           "pybase64"}


class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name == "__version__":
            return "2.9.0"
        if name.startswith("__"):
            raise AttributeError(name)
        if name[:1].isupper():  # a class: usable as a base class and as a pydantic field type
            from pydantic_core import core_schema

            return type(name, (), {
                "__get_pydantic_core_schema__":
                    classmethod(lambda cls, source, handler: core_schema.any_schema()),
                "__init__": lambda self, *args, **kwargs: None,
            })
        return _Stub(f"{self.__name__}.{name}")

    def __call__(self, *args, **kwargs):
        return _Stub(self.__name__ + "()")

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __contains__(self, item):
        return False

    def __mro_entries__(self, bases):
        return (object,)

    def __or__(self, other):
        return self

    __ror__ = __or__

    def __getitem__(self, key):
        return self


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Stub(spec.name)

    def exec_module(self, module):
        module.__path__ = []


def load():
    """Returns (FunctionCallParser, ReasoningParser, Tool); raises ImportError if SGLang's
    parsers cannot be imported."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or spec.origin is None:
        raise ImportError("the sglang package is not installed (scripts/setup installs it)")
    if not any(isinstance(f, _StubFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _StubFinder())
    root = os.path.dirname(spec.origin)
    for package, sub in (("sglang", ""), ("sglang.srt", "srt")):
        if package not in sys.modules:
            module = types.ModuleType(package)
            module.__path__ = [os.path.join(root, sub) if sub else root]
            sys.modules[package] = module
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    return FunctionCallParser, ReasoningParser, Tool


def _tool(Tool, spec):
    return Tool(type="function", function=spec["function"])


def run_case(classes, case):
    FunctionCallParser, ReasoningParser, Tool = classes
    text = case["text"]
    if "tool_parser" in case:
        tools = [_tool(Tool, t) for t in case.get("tools", [])]
        parser = FunctionCallParser(tools, case["tool_parser"])
        normal, calls = parser.parse_non_stream(text)
        out = {"normal_text": normal,
               "calls": [{"name": c.name, "arguments": c.parameters} for c in calls]}
        if "chunks" in case:
            parser = FunctionCallParser(tools, case["tool_parser"])
            normal, streamed = "", {}
            pieces = [parser.parse_stream_chunk(chunk) for chunk in case["chunks"]]
            pieces.append(parser.parse_stream_end())
            for piece_normal, piece_calls in pieces:
                normal += piece_normal
                for c in piece_calls:
                    call = streamed.setdefault(c.tool_index, {"name": None, "arguments": ""})
                    if c.name:
                        call["name"] = c.name
                    call["arguments"] += c.parameters or ""
            out["stream"] = {"normal_text": normal,
                             "calls": [streamed[i] for i in sorted(streamed)]}
        return out
    force = case.get("force_reasoning")
    parser = ReasoningParser(case["reasoning_parser"], case.get("stream_reasoning", True), force)
    reasoning, normal = parser.parse_non_stream(text)
    out = {"reasoning_text": reasoning or "", "normal_text": normal or ""}
    if "chunks" in case:
        parser = ReasoningParser(case["reasoning_parser"], case.get("stream_reasoning", True),
                                 force)
        reasoning, normal = "", ""
        pieces = [parser.parse_stream_chunk(chunk) for chunk in case["chunks"]]
        pieces.append(parser.parse_stream_end())
        for r, n in pieces:
            reasoning += r or ""
            normal += n or ""
        out["stream"] = {"reasoning_text": reasoning, "normal_text": normal}
    return out


if __name__ == "__main__":
    import json
    import logging

    logging.disable(logging.CRITICAL)
    cases = json.load(sys.stdin)
    classes = load()
    results = []
    for case in cases:
        try:
            results.append(run_case(classes, case))
        except Exception as e:  # a parser that raises is a result too
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump(results, sys.stdout)
