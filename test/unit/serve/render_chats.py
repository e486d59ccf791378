#!/usr/bin/python3
"""Renders chats.json with a chat template the way Hugging Face transformers
does (jinja2 sandbox, trim_blocks, lstrip_blocks, its tojson), for the
cross-check in ChatTemplateTest.cpp.

usage: render_chats.py TEMPLATE CHATS_JSON OUT_JSON
Writes {name: rendered text} with the generation prompt added.
"""
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None,
           sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


template_path, chats_path, out_path = sys.argv[1:4]
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
template = env.from_string(open(template_path, encoding="utf-8").read())
out = {}
for chat in json.load(open(chats_path, encoding="utf-8"))["chats"]:
    body = chat["body"]
    messages = []
    for m in body["messages"]:
        m = dict(m)
        # What servers hand the template (vLLM, sglang): None content as
        # "", tool call arguments as a mapping.
        if m.get("content") is None:
            m["content"] = ""
        for tc in m.get("tool_calls") or []:
            f = tc["function"]
            if isinstance(f.get("arguments"), str):
                f["arguments"] = json.loads(f["arguments"] or "{}")
        messages.append(m)
    tools = body.get("tools") if body.get("tool_choice") != "none" else None
    out[chat["name"]] = template.render(messages=messages, tools=tools,
                                        add_generation_prompt=True)
json.dump(out, open(out_path, "w", encoding="utf-8"), ensure_ascii=False,
          indent=1)
