#!/usr/bin/env python3
"""Generates the C++ side of the argument table from src/args/server_args.json.

Run by CMake at build time (standard library only):
    gen_arg_table.py <server_args.json> <output dir>
writes, under <output dir>:
    args/arg_names.h        every argument's canonical name and config key, in table order, and
                            the group display order (what ArgKey checks a name against)
    args/arg_keys.h         one ArgKey constant per argument: key::kMaxRunningRequests
    args/arg_table_data.cpp GeneratedArgs(): the ArgSpec entries (arg_spec.h), in file order
Files whose content did not change are left alone, so an edit to one help text rebuilds only the
table.

The data file is {"about": ..., "groups": [{"group": <display name>, "args": [<entry>, ...]}]};
groups and entries appear in the order --help and docs/server_args.md list them. An entry has
(fields other than name, type and help may be left out, and then take the value in brackets):
    name        canonical name, dash-separated ("max-running-requests")
    type        flag | bool | int | float | string | string_list | int_list | float_list | json
    default     the default as a JSON value [null: unset]
    choices     allowed values in their command-line spelling [any]
    help        what the argument does, in our own words
    cpu         yes | partial | no: whether it takes effect on the cpu device [yes]
    cpu_note    for partial and no: which part applies, or why not [""]
    cpu_values  for partial: the command-line values that apply on cpu; any other value set
                explicitly logs one warning [none]
    aliases     [{"name": spelling, "system": ... [sglang], "deprecated": true/false [false]}]
    system      sglang | lightllm | rtpllm | radixserve: where the name comes from [sglang]
    required    true when the argument must be given [false]
    append      for list types: argparse's action="append", one word per occurrence, the
                occurrences collected in order (LightLLM's --grouping_key) [false: nargs="+"]
    read_in     "args": the argument is consumed inside src/args/ only (parser, validation,
                --help), so no reader elsewhere is expected; tests/unit/args/arg_readers_test.cpp
                otherwise fails for a supported argument whose key:: constant src/ never uses
    read_in_why why that is so (required with read_in)
Anything else (an unknown field, type or system, a default of the wrong type, a default outside
its choices, a spelling used by two arguments) stops the build with a message naming the entry.
"""
import json
import pathlib
import re
import sys

TYPES = {"flag": "kFlag", "bool": "kBool", "int": "kInt", "float": "kFloat", "string": "kString",
         "string_list": "kStringList", "int_list": "kIntList", "float_list": "kFloatList",
         "json": "kJson"}
SUPPORT = {"yes": "kYes", "partial": "kPartial", "no": "kNo"}
SYSTEMS = {"sglang": "kSglang", "lightllm": "kLightllm", "rtpllm": "kRtpllm",
           "radixserve": "kRadixserve"}
FIELDS = {"name", "type", "default", "choices", "help", "cpu", "cpu_note", "cpu_values",
          "aliases", "system", "required", "append", "read_in", "read_in_why"}
ALIAS_FIELDS = {"name", "system", "deprecated"}
NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
SPELLING = re.compile(r"[A-Za-z0-9]+([-_][A-Za-z0-9]+)*")


class DataError(Exception):
    pass


def fail(where, message):
    raise DataError(f"{where}: {message}")


def constant_name(name):
    """'max-running-requests' -> 'kMaxRunningRequests' (tests/unit/args/arg_readers_test.cpp
    spells the same rule)."""
    return "k" + "".join(part[:1].upper() + part[1:] for part in name.split("-"))


def default_matches(kind, value):
    if value is None or kind == "json":
        return True
    if kind in ("flag", "bool"):
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    return isinstance(value, list)


def check_string_list(where, field, value):
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        fail(where, f"'{field}' must be a list of non-empty strings")


def check_entry(entry, group):
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        fail(f"group '{group}'", "every entry is an object with a 'name'")
    where = f"argument '{entry['name']}'"
    if not NAME.fullmatch(entry["name"]):
        fail(where, "canonical names are lower-case words joined by '-'")
    if unknown := set(entry) - FIELDS:
        fail(where, f"unknown field(s) {sorted(unknown)}")
    if entry.get("type") not in TYPES:
        fail(where, f"'type' must be one of {sorted(TYPES)}")
    if not isinstance(entry.get("help"), str) or not entry["help"].strip():
        fail(where, "'help' must be a non-empty string")
    for field in ("cpu_note", "read_in_why"):
        if not isinstance(entry.get(field, ""), str):
            fail(where, f"'{field}' must be a string")
    for field in ("choices", "cpu_values"):
        check_string_list(where, field, entry.get(field, []))
    if entry.get("cpu", "yes") not in SUPPORT:
        fail(where, f"'cpu' must be one of {sorted(SUPPORT)}")
    if entry.get("system", "sglang") not in SYSTEMS:
        fail(where, f"'system' must be one of {sorted(SYSTEMS)}")
    if not isinstance(entry.get("required", False), bool):
        fail(where, "'required' must be true or false")
    if not isinstance(entry.get("append", False), bool):
        fail(where, "'append' must be true or false")
    if entry.get("append") and not entry["type"].endswith("_list"):
        fail(where, "'append' only makes sense for a list type")
    cpu = entry.get("cpu", "yes")
    if cpu != "yes" and not entry.get("cpu_note"):
        fail(where, f"cpu '{cpu}' needs a cpu_note saying which part applies or why not")
    if entry.get("cpu_values") and cpu != "partial":
        fail(where, "cpu_values only make sense for cpu 'partial'")
    default = entry.get("default")
    if not default_matches(entry["type"], default):
        fail(where, f"default {json.dumps(default)} is not a {entry['type']}")
    choices = entry.get("choices", [])
    if choices and isinstance(default, str) and default not in choices:
        fail(where, f"default '{default}' is not among its choices")
    if choices and (missing := [v for v in entry.get("cpu_values", []) if v not in choices]):
        fail(where, f"cpu_values {missing} are not among its choices")
    if "read_in" in entry or "read_in_why" in entry:
        if entry.get("read_in") != "args":
            fail(where, "'read_in' can only be \"args\"")
        if not entry.get("read_in_why", "").strip():
            fail(where, "'read_in' needs a 'read_in_why'")
        if cpu == "no":
            fail(where, "'read_in' is for supported arguments; this one says cpu 'no'")
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list):
        fail(where, "'aliases' must be a list")
    for alias in aliases:
        if not isinstance(alias, dict) or not isinstance(alias.get("name"), str):
            fail(where, "every alias is an object with a 'name'")
        if unknown := set(alias) - ALIAS_FIELDS:
            fail(where, f"alias '{alias['name']}': unknown field(s) {sorted(unknown)}")
        if not SPELLING.fullmatch(alias["name"]):
            fail(where, f"alias '{alias['name']}' is not a plain spelling without dashes in front")
        if alias.get("system", "sglang") not in SYSTEMS:
            fail(where, f"alias '{alias['name']}': 'system' must be one of {sorted(SYSTEMS)}")
        if not isinstance(alias.get("deprecated", False), bool):
            fail(where, f"alias '{alias['name']}': 'deprecated' must be true or false")


def load(path):
    data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or set(data) != {"about", "groups"}:
        fail(path, "the top level is an object with exactly 'about' and 'groups'")
    groups, entries = [], []
    for group in data["groups"]:
        if not isinstance(group, dict) or set(group) != {"group", "args"}:
            fail(path, "every group is an object with exactly 'group' and 'args'")
        name = group["group"]
        if not isinstance(name, str) or not name or name in groups:
            fail(path, f"group names must be unique non-empty strings: {name!r}")
        if not group["args"]:
            fail(f"group '{name}'", "has no arguments")
        groups.append(name)
        for entry in group["args"]:
            check_entry(entry, name)
            entries.append((name, entry))
    owner = {}
    constants = {}
    seen = set()
    for _, entry in entries:
        where = f"argument '{entry['name']}'"
        if entry["name"] in seen:
            fail(where, "is listed twice")
        seen.add(entry["name"])
        for spelling in [entry["name"]] + [a["name"] for a in entry.get("aliases", [])]:
            norm = spelling.replace("_", "-")
            if owner.setdefault(norm, entry["name"]) != entry["name"]:
                fail(where, f"spelling '{spelling}' is also used by '{owner[norm]}'")
        const = constant_name(entry["name"])
        if constants.setdefault(const, entry["name"]) != entry["name"]:
            fail(where, f"constant {const} is also the constant of '{constants[const]}'")
    return groups, entries


def cpp_string(text):
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_literal(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def list_of_strings(values):
    return "{" + ", ".join(cpp_string(v) for v in values) + "}"


def spec_initializer(group_index, entry):
    fields = [f".name = {cpp_string(entry['name'])}",
              f".type = ArgType::{TYPES[entry['type']]}",
              f".default_value = {cpp_string(json_literal(entry.get('default')))}"]
    if entry.get("choices"):
        fields.append(f".choices = {list_of_strings(entry['choices'])}")
    fields.append(f".group = kGroupOrder[{group_index}]")
    fields.append(f".help = {cpp_string(entry['help'])}")
    fields.append(f".cpu = Support::{SUPPORT[entry.get('cpu', 'yes')]}")
    if entry.get("cpu_note"):
        fields.append(f".cpu_note = {cpp_string(entry['cpu_note'])}")
    if entry.get("cpu_values"):
        fields.append(f".cpu_values = {list_of_strings(entry['cpu_values'])}")
    if entry.get("aliases"):
        aliases = ", ".join(
            f"{{{cpp_string(a['name'])}, System::{SYSTEMS[a.get('system', 'sglang')]}, "
            f"{'true' if a.get('deprecated') else 'false'}}}" for a in entry["aliases"])
        fields.append(f".aliases = {{{aliases}}}")
    fields.append(f".system = System::{SYSTEMS[entry.get('system', 'sglang')]}")
    if entry.get("required"):
        fields.append(".required = true")
    if entry.get("append"):
        fields.append(".append = true")
    return "  out.push_back(ArgSpec{" + ",\n                          ".join(fields) + "});\n"


HEADER = "// Generated by src/args/gen_arg_table.py from src/args/server_args.json; do not edit.\n"


def render_names(groups, entries):
    names = "".join(f"    {cpp_string(e['name'])},\n" for _, e in entries)
    keys = "".join(f"    {cpp_string(e['name'].replace('-', '_'))},\n" for _, e in entries)
    order = "".join(f"    {cpp_string(g)},\n" for g in groups)
    return (HEADER + "#pragma once\n\n#include <string_view>\n\n"
            "namespace radixserve::args {\n\n"
            "// Canonical names and config keys of every argument, in table order (AllArgs()).\n"
            f"inline constexpr std::string_view kArgNames[] = {{\n{names}}};\n"
            f"inline constexpr std::string_view kConfigKeys[] = {{\n{keys}}};\n\n"
            "// Argument groups in the order --help and docs/server_args.md list them.\n"
            f"inline constexpr std::string_view kGroupOrder[] = {{\n{order}}};\n\n"
            "}  // namespace radixserve::args\n")


def render_keys(entries):
    lines = "".join(f"inline constexpr ArgKey {constant_name(e['name'])} = ArgKey::AtIndex({i});"
                    f"  // --{e['name']}\n" for i, (_, e) in enumerate(entries))
    return (HEADER + "#pragma once\n\n#include \"args/arg_key.h\"\n\n"
            "// One constant per argument, named after its canonical name: --max-running-requests\n"
            "// is key::kMaxRunningRequests.\n"
            f"namespace radixserve::args::key {{\n\n{lines}\n"
            "}  // namespace radixserve::args::key\n")


def render_table(groups, entries):
    parts = [HEADER, '#include "args/arg_names.h"\n#include "args/arg_table.h"\n\n',
             "namespace radixserve::args {\nnamespace {\n\n"]
    # One function per group keeps each function small enough for the compiler.
    for index, group in enumerate(groups):
        parts.append(f"// {group}\nvoid AppendGroup{index}(std::vector<ArgSpec>& out) {{\n")
        parts.extend(spec_initializer(index, e) for g, e in entries if g == group)
        parts.append("}\n\n")
    parts.append("}  // namespace\n\nstd::vector<ArgSpec> GeneratedArgs() {\n"
                 "  std::vector<ArgSpec> out;\n"
                 f"  out.reserve({len(entries)});\n")
    parts.extend(f"  AppendGroup{index}(out);\n" for index in range(len(groups)))
    parts.append("  return out;\n}\n\n}  // namespace radixserve::args\n")
    return "".join(parts)


def write_if_changed(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    path.write_text(text, encoding="utf-8")


def main(argv):
    if len(argv) != 3:
        print("usage: gen_arg_table.py <server_args.json> <output dir>", file=sys.stderr)
        return 2
    try:
        groups, entries = load(argv[1])
    except (DataError, json.JSONDecodeError) as error:
        print(f"{argv[1]}: {error}", file=sys.stderr)
        return 1
    out = pathlib.Path(argv[2])
    write_if_changed(out / "args/arg_names.h", render_names(groups, entries))
    write_if_changed(out / "args/arg_keys.h", render_keys(entries))
    write_if_changed(out / "args/arg_table_data.cpp", render_table(groups, entries))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
