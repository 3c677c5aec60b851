"""Jinja language cases (whitespace control, loops, macros, namespaces,
expressions, tests, filters, Python methods) rendered by Jinja2 with
transformers' settings into tests/jinja/testdata/language.json,
and templates Jinja2 refuses with the error it raises. Run once by hand:
  python3 tools/testdata/chat_template_reference/language_cases.py
"""
import json
import os

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
V = {"xs": [3, 1, 2], "d": {"b": 2, "a": 1}, "s": "  Hello World  ", "msgs": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}], "n": None, "f": 2.5}
cases = [
 # whitespace control
 ("ws", "a\n  {% if true %}\n    b\n  {% endif %}\nc"),
 ("ws", "a  {{- ' b ' -}}  c"),
 ("ws", "a\n  {{ 'x' }}\n{# note #}\nb {#- c -#}  d"),
 ("ws", "x\n    {%+ if true %}y{% endif %}\n{% if true +%}\nz{% endif %}"),
 ("ws", "{% raw %}{{ not }}{% endraw %}\n{%- raw -%}  {% x %}  {%- endraw %}|"),
 ("ws", "line\n"),
 ("ws", "a\r\nb\rc"),
 # loops
 ("loop", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}"),
 ("loop", "{% for x in xs %}{{ loop.previtem|default('-') }}{{ loop.nextitem|default('-') }}{{ loop.cycle('a','b') }} {% endfor %}"),
 ("loop", "{% for x in [] %}no{% else %}empty{% endfor %}{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}"),
 ("loop", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}"),
 ("loop", "{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
 ("loop", "{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}"),
 ("loop", "{% for c in 'héllo' %}{{ c }}.{% endfor %}{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}"),
 # set / namespace / macro / call / filter
 ("set", "{% set ns = namespace(count=0, names=[]) %}{% for m in msgs %}{% set ns.count = ns.count + 1 %}{% set ns.names = ns.names + [m.role] %}{% endfor %}{{ ns.count }} {{ ns.names }}"),
 ("set", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set block %}  inner {{ a }}{% endset %}[{{ block }}]{% set up | upper %}shout{% endset %}{{ up }}"),
 ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Cy') }}"),
 ("macro", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold{% endcall %}{% macro li(x) %}{{ caller(x) }}{% endmacro %}{% call(y) li(5) %}[{{ y * 2 }}]{% endcall %}"),
 ("filter", "{% filter upper %}up {{ 'x' }}{% endfilter %}"),
 # expressions
 ("expr", "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }}"),
 ("expr", "{{ xs[0] }} {{ xs[-1] }} {{ xs[1:] }} {{ xs[::-1] }} {{ 'hello'[1:3] }} {{ 'héllo'[::-1] }} {{ d.a }} {{ d['b'] }} {{ msgs[1].role }}"),
 ("expr", "{{ 1 < 2 < 3 }} {{ 2 in xs }} {{ 5 not in xs }} {{ 'ell' in 'hello' }} {{ 'a' in d }} {{ not true }} {{ true and 'x' }} {{ false or 'y' }} {{ 'yes' if xs else 'no' }} [{{ 'z' if false }}]"),
 ("expr", "{{ 1 == 1.0 }} {{ true == 1 }} {{ none }} {{ [1, 'a', none, true, 2.0] }} {{ {'k': 'v'} }} {{ (1,) }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1/3 }} {{ -0.0 }} {{ 100.0 }}"),
 ("expr", "{{ \"it's\" }} {{ ['it\\'s', \"q\\\"\", 'back\\\\slash', 'tab\\tnl\\n'] }} {{ 'a' 'b' }} {{ '\\u00e9\\x41' }}"),
 ("expr", "{{ -xs[0] }} {{ xs|length is even }} {{ not xs is defined }} {{ 1 + 2 is odd }}"),
 # tests
 ("test", "{{ n is none }} {{ n is defined }} {{ q is undefined }} {{ s is string }} {{ d is mapping }} {{ xs is iterable }} {{ xs is sequence }} {{ 3 is number }} {{ 3 is integer }} {{ f is float }} {{ true is boolean }} {{ 6 is divisibleby 3 }} {{ 2 is in xs }} {{ 'a' is eq 'a' }} {{ 'A' is upper }} {{ 'a' is lower }} {{ true is true }} {{ 0 is false }} {{ 3 is gt 2 }} {{ q is iterable }}"),
 ("test", "{% for m in msgs|selectattr('role', 'equalto', 'user') %}{{ m.content }}{% endfor %}{{ msgs|rejectattr('role', 'eq', 'system')|map(attribute='role')|join(',') }} {{ msgs|selectattr('content')|list|length }} {{ xs|select('odd')|list }} {{ xs|reject('gt', 1)|list }}"),
 # filters
 ("filt", "[{{ s|trim }}] [{{ 'xxhixx'|trim('x') }}] {{ xs|length }} {{ s|count }} {{ xs|first }} {{ xs|last }} {{ xs|join('-') }} {{ xs|sort }} {{ xs|sort(reverse=true) }} {{ xs|list }} {{ 'ab'|list }} {{ xs|sum }} {{ xs|min }} {{ xs|max }}"),
 ("filt", "{{ q|default('dflt') }} {{ n|default('dflt') }} {{ ''|default('e', true) }} {{ q|d('x') }} {{ 'hello world'|upper }} {{ 'HeLLo'|lower }} {{ 'hello wORLD-x (y'|title }} {{ 'hello World'|capitalize }} {{ 'aXbXc'|replace('X', '-') }} {{ 'aXbXc'|replace('X', '-', 1) }}"),
 ("filt", "{{ d|tojson }} {{ msgs[0]|tojson(indent=2) }} {{ [1, 2.5, none, true, 'é\"\\n'] | tojson }} {{ {} | tojson(indent=4) }} {{ d|tojson(sort_keys=true) }} {{ d|tojson(separators=(',', ':')) }}"),
 ("filt", "{{ '3'|int + 1 }} {{ '3.7'|int }} {{ 'x'|int(7) }} {{ '2.5'|float }} {{ 3|float }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.1|round(0, 'ceil') }} {{ 42|string ~ '!' }} {{ d|items|list }} {{ d|dictsort }}"),
 ("filt", "{{ ['b', 'A', 'a', 'B']|unique|list }} {{ ['b', 'A', 'a']|sort }} {{ xs|reverse|list }} {{ 'abc'|reverse }} {{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|safe }} {{ 'one two  three'|wordcount }} {{ [1,2,3,4,5]|batch(2)|list }}"),
 ("filt", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ msgs|map(attribute='content')|join }}|{{ ['a','b']|map('upper')|list }}"),
 # methods
 ("meth", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('x', 'lo')) }} {{ 'hello'.replace('l', 'L') }} {{ 'hello'.upper() }} {{ 'HeLLo'.lower() }} {{ 'hello world'.title() }} {{ 'hello'.capitalize() }}"),
 ("meth", "{{ 'hello'.find('l') }} {{ 'héllo'.find('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ '-'.join(['a', 'b']) }} {{ '{} and {}'.format('x', 1) }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 9) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ '<think>x</think>y'.split('</think>')[-1] }} {{ 'abc'.rstrip('c') }}"),
 ("meth", "{{ 'x'.isdigit() }} {{ '12'.isdigit() }} {{ ' '.isspace() }} {{ 'ab'.isalpha() }} {{ 'ABC'.isupper() }} {{ 'abc'.islower() }} {{ [1,2,1].count(1) }} {{ [1,2].index(2) }}"),
 # dicts & attribute semantics
 ("attr", "{% set m = {'items': 'key', 'role': 'r'} %}{{ m['items'] }} {{ m.role }} {{ m.items()|list|length }} {{ m.missing }}|{{ m['missing'] }}|{{ m.missing is defined }}"),
]
errors = [
 "{{ q.x }}", "{{ 1 + 'a' }}", "{{ 'a' + 1 }}", "{{ xs.append(4) }}", "{{ d.update({}) }}", "{{ 1 // 0 }}", "{{ xs[0](1) }}", "{{ q() }}", "{{ n|length }}", "{% for x in n %}{% endfor %}", "{% set a, b = [1] %}", "{{ 'a' < 1 }}", "{% for m in msgs %}{{ m.content + [] }}{% endfor %}",
]
out = []
for kind, t in cases:
    r = env.from_string(t).render(**V)
    out.append((t, r))
res = []
for t in errors:
    try:
        env.from_string(t).render(**V); res.append((t, "NO ERROR"))
    except Exception as e:
        res.append((t, type(e).__name__ + ": " + str(e)))
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "jinja", "testdata", "language.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump({"jinja2": jinja2.__version__, "vars": V, "cases": out, "errors": res}, f, ensure_ascii=False, indent=1)
    f.write("\n")
for t, r in res: print(t, "=>", r)
