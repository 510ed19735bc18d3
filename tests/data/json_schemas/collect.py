#!/usr/bin/env python3
"""Selects the JSON schema corpus of this folder from a SchemaStore checkout (run once; the
result is checked in, so tests never need the network).

    python tests/data/json_schemas/collect.py <schemastore git dir> [--count 250]

The git dir is a clone (or the `fetch` tool's mirror) of github.com/SchemaStore/schemastore; the
schemas are read from its HEAD with `git show`, byte for byte. A schema is eligible when it is
under 20 KB, parses, is a valid schema for its own draft (Python `jsonschema`'s check_schema),
and every `$ref` in it is local ("#..."), so the validator of the tests never reaches for the
network. From the eligible ones, a greedy pass first covers every JSON Schema keyword that any of
them uses (the smallest schema for each rare keyword), then the rest is filled evenly across the
size range. Writes the schema files under schemastore/ and manifest.json.
"""
import argparse
import json
import pathlib
import subprocess

import jsonschema

HERE = pathlib.Path(__file__).resolve().parent
SOURCE_REPO = "https://github.com/SchemaStore/schemastore"
SOURCE_DIR = "src/schemas/json"
LICENCE = "Apache-2.0"
MAX_BYTES = 20_000
MIN_BYTES = 200

# Keywords that matter to a grammar engine (annotations are left out).
KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "items", "prefixItems", "additionalItems",
    "contains", "minItems", "maxItems", "uniqueItems", "enum", "const", "anyOf", "oneOf",
    "allOf", "not", "if", "then", "else", "$ref", "$defs", "definitions", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "dependencies", "dependentRequired", "dependentSchemas",
    "unevaluatedProperties", "unevaluatedItems", "default",
}


def git_show(git_dir, path):
    return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"],
                          check=True, capture_output=True).stdout


def walk(node, found, refs):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in KEYWORDS:
                found.add(key)
            if key == "$ref" and isinstance(value, str):
                refs.append(value)
            if key in ("properties", "patternProperties", "$defs", "definitions",
                       "dependentSchemas") and isinstance(value, dict):
                for sub in value.values():
                    walk(sub, found, refs)
            elif key not in ("enum", "const", "default", "examples", "required"):
                walk(value, found, refs)
    elif isinstance(node, list):
        for item in node:
            walk(item, found, refs)


def eligible(git_dir, path, size):
    if not MIN_BYTES <= size < MAX_BYTES:
        return None
    raw = git_show(git_dir, path)
    try:
        schema = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(schema, dict):
        return None
    found, refs = set(), []
    walk(schema, found, refs)
    if any(not ref.startswith("#") for ref in refs):
        return None
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except (jsonschema.SchemaError, jsonschema.exceptions.UnknownType):
        return None
    return raw, sorted(found)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("git_dir")
    parser.add_argument("--count", type=int, default=250)
    args = parser.parse_args()
    commit = subprocess.run(["git", f"--git-dir={args.git_dir}", "rev-parse", "HEAD"],
                            check=True, capture_output=True, text=True).stdout.strip()
    listing = subprocess.run(["git", f"--git-dir={args.git_dir}", "ls-tree", "-l", "HEAD",
                              SOURCE_DIR + "/"], check=True, capture_output=True,
                             text=True).stdout
    candidates = {}
    for line in listing.splitlines():
        meta, path = line.split("\t")
        size = meta.split()[3]
        if not path.endswith(".json") or not size.isdigit():
            continue
        got = eligible(args.git_dir, path, int(size))
        if got:
            candidates[path] = got
    print(f"{len(candidates)} eligible schemas")

    chosen = []
    covered = set()
    by_size = sorted(candidates, key=lambda p: (len(candidates[p][0]), p))
    while True:
        best = max(by_size, key=lambda p: (len(set(candidates[p][1]) - covered),
                                           -len(candidates[p][0])) if p not in chosen else (-1, 0))
        new = set(candidates[best][1]) - covered
        if not new:
            break
        chosen.append(best)
        covered |= new
    rest = [p for p in by_size if p not in chosen]
    need = max(0, args.count - len(chosen))
    if need and rest:
        step = len(rest) / need
        chosen += [rest[int(i * step)] for i in range(min(need, len(rest)))]

    out = HERE / "schemastore"
    out.mkdir(exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    manifest = []
    for path in sorted(chosen):
        raw, features = candidates[path]
        name = pathlib.PurePosixPath(path).name
        (out / name).write_bytes(raw)
        manifest.append({"file": f"schemastore/{name}", "source_repo": SOURCE_REPO,
                         "source_path": path, "source_commit": commit, "licence": LICENCE,
                         "bytes": len(raw), "keywords": features})
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(m["bytes"] for m in manifest)
    print(f"wrote {len(manifest)} schemas, {total / 1e6:.2f} MB, keywords covered: "
          f"{len(covered)}/{len(KEYWORDS)}")


if __name__ == "__main__":
    main()
