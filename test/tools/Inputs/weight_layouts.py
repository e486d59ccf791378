#!/usr/bin/env python3
"""Prints `<name> <layout>` for every weight of `kiln-dump --weights`."""
import json
import sys

for w in json.load(sys.stdin)["weights"]["tensors"]:
    print(w["name"], w["layout"])
