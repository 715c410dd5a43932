#!/usr/bin/env python3
"""Fails when README.md's settings table and core/src/config.cpp's table differ.

Both must list the same ACCL_ variables with the same defaults, so the README
stays the one place a user reads about configuration.
"""
import re
import sys

readme_path, config_path = sys.argv[1], sys.argv[2]

config = open(config_path, encoding="utf-8").read()
code = {name: default for name, default in re.findall(r'\{"(ACCL_[A-Z0-9_]+)",\s*"([^"]*)"', config)}

readme = open(readme_path, encoding="utf-8").read()
table = readme.split("<!-- settings-table-begin -->")[1].split("<!-- settings-table-end -->")[0]
documented = {}
for name, default in re.findall(r"^\| `(ACCL_[A-Z0-9_]+)` \| ([^|]*) \|", table, flags=re.M):
    default = default.strip()
    documented[name] = "" if default == "(empty)" else default.strip("`")

errors = []
for name in sorted(code.keys() - documented.keys()):
    errors.append(f"{name} is read by the code but missing from README.md")
for name in sorted(documented.keys() - code.keys()):
    errors.append(f"{name} is documented in README.md but not in core/src/config.cpp")
for name in sorted(code.keys() & documented.keys()):
    if code[name] != documented[name]:
        errors.append(f"{name}: default is '{code[name]}' in code but '{documented[name]}' in README.md")

for e in errors:
    print(e)
print(f"{len(code)} settings checked, {len(errors)} problems")
sys.exit(1 if errors else 0)
