"""Renders every template in tests/api_server/testdata/chat_templates/ for
every conversation in conversations.json with Jinja2 exactly as
transformers' apply_chat_template does (utils/chat_template_utils.py:
ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols, the
{% generation %} tag), its tojson, raise_exception and strftime_now, and the
continue_final_message cut), into expected.json, after vLLM's message
preparation (text parts joined with newlines for a template that does not
loop over content). A render that raises is
recorded as an expected error. strftime_now reads a fixed clock
(2024-07-26 10:00:00) so that the output is deterministic; the C++ test
uses the same one. Needs Debian's python3-jinja2. Run once by hand:
  python3 tools/testdata/chat_template_reference/render.py
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "..", "tests", "api_server", "testdata", "chat_templates")
CLOCK = datetime.datetime(2024, 7, 26, 10, 0, 0)


class AssistantTracker(Extension):
    # transformers marks assistant text with {% generation %}; rendering is unchanged.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def compile_template(text):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return CLOCK.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(text), loops_over_content(env, text)


def loops_over_content(env, text):
    """vLLM's content-format detection, as the server does it: does a for
    loop iterate over x.content / x['content'] (through filters)?"""
    def accesses(node):
        while isinstance(node, jinja2.nodes.Filter) and node.node is not None:
            node = node.node
        if isinstance(node, jinja2.nodes.Getattr):
            return node.attr == "content"
        return (isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Const)
                and node.arg.value == "content")
    return any(accesses(f.iter) for f in env.parse(text).find_all(jinja2.nodes.For))


def prepare(messages, iterates_content):
    """vLLM's message preparation: a template that takes content as a
    string gets text parts joined with newlines; no content is "" (a list
    template: []); tool-call arguments given as JSON text become objects,
    and none at all {} (chat_utils._postprocess_messages)."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = [] if iterates_content else ""
        if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            calls = []
            for call in m["tool_calls"]:
                call = dict(call, function=dict(call["function"]))
                args = call["function"].get("arguments")
                call["function"]["arguments"] = (json.loads(args) if isinstance(args, str) and args
                                                 else args or {})
                calls.append(call)
            m["tool_calls"] = calls
        if isinstance(m.get("content"), list) and not iterates_content:
            m["content"] = "\n".join(p["text"] for p in m["content"]
                                     if isinstance(p, dict) and p.get("type") == "text"
                                     and isinstance(p.get("text"), str))
        out.append(m)
    return out


def prepare_tools(tools):
    """vLLM hands the template [tool.model_dump() for tool in request.tools]:
    type, then function with name, description and parameters first (None
    where absent), then other keys as sent."""
    if tools is None:
        return None
    out = []
    for tool in tools:
        fn = tool["function"]
        f = {"name": fn["name"], "description": fn.get("description"),
             "parameters": fn.get("parameters")}
        f.update((k, v) for k, v in fn.items() if k not in f)
        t = {"type": "function", "function": f}
        t.update((k, v) for k, v in tool.items() if k not in t)
        out.append(t)
    return out


def render(template, conv, bos, eos, iterates_content):
    messages = prepare(conv["messages"], iterates_content)
    add_generation_prompt = conv.get("add_generation_prompt", True)
    continue_final = conv.get("continue_final_message", False)
    kwargs = {}
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    kwargs.update(conv.get("chat_template_kwargs", {}))
    out = template.render(messages=messages, tools=prepare_tools(conv.get("tools")),
                          documents=conv.get("documents"),
                          add_generation_prompt=add_generation_prompt, **kwargs)
    if continue_final:
        final = messages[-1]["content"]
        if isinstance(final, (list, tuple)):
            final = [p["text"] for p in final if "text" in p][-1]
        if final.strip() not in out:
            raise ValueError("continue_final_message is set but the final message does not "
                             "appear in the chat after applying the chat template!")
        at = out.rindex(final.strip())
        if out[at:at + len(final.lstrip())] == final:
            out = out[:at + len(final.lstrip())]
        else:
            out = out[:at + len(final.strip())]
    return out


def main():
    sources = json.load(open(os.path.join(DATA, "sources.json")))
    convs = json.load(open(os.path.join(HERE, "conversations.json")))
    expected, ok, failed = {}, 0, 0
    for name, src in sorted(sources.items()):
        text = open(os.path.join(DATA, name + ".jinja"), encoding="utf-8").read()
        template, iterates_content = compile_template(text)
        for cname, conv in convs.items():
            key = name + "__" + cname
            try:
                expected[key] = {"output": render(template, conv, src["bos_token"], src["eos_token"],
                                                iterates_content)}
                ok += 1
            except jinja2.exceptions.TemplateError as e:
                expected[key] = {"error": str(e), "kind": "template"}
                failed += 1
            except Exception as e:  # TypeError, UndefinedError, ...: the template cannot render it
                expected[key] = {"error": "%s: %s" % (type(e).__name__, e), "kind": "runtime"}
                failed += 1
    with open(os.path.join(DATA, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "clock": CLOCK.isoformat(),
                   "conversations": convs, "renders": expected}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("%d renders, %d expected errors" % (ok, failed), file=sys.stderr)


if __name__ == "__main__":
    main()
