"""The Jinja chat template saved with every model: `chat_format.segments`, written in Jinja.

It travels with the tokenizer (and into a GGUF), so a server that renders conversations
itself (transformers' ``apply_chat_template``, llama.cpp) shows a trained model the text
it was trained on: tools, calls, answers and thinking included. The tests render both
ways and compare. ``{% generation %}`` marks what training learns (the assistant's
messages of weight 1), for ``return_assistant_tokens_mask`` and trl's
``assistant_only_loss``.

Two differences a caller must know: a call's ``arguments`` must be an object (the
transformers convention; a JSON string cannot be parsed in Jinja), and the variables
``keep_thinking`` (default true) and ``enable_thinking`` stand for `segments`'
``keep_thinking`` and ``think``. With ``add_generation_prompt`` earlier thinking is left
out, as `chat_format.render_prompt` does. It never raises: llama.cpp renders a template
with probe conversations of its own to learn what it supports, and an exception there
fails every request. What trainkit refuses (thinking on Gemma 3, an answer to no call)
is refused before a run starts; the template leaves the thinking out and names no
function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainkit_core.models.chat_format import ChatFormat

# Gemma 4's value notation (`tool_syntax.gemma4_value`): bare keys, strings between <|"|>,
# schema "type" strings upper-cased in declarations.
_GEMMA4_VALUE = r"""
{%- macro g4(v, up) -%}
{%- if v is mapping -%}
{{- '{' -}}
{%- for k in v -%}
{{- k ~ ':' -}}
{%- if up and k == 'type' and v[k] is string -%}{{- '<|"|>' ~ (v[k] | upper) ~ '<|"|>' -}}
{%- else -%}{{- g4(v[k], up) -}}{%- endif -%}
{{- ',' if not loop.last else '' -}}
{%- endfor -%}
{{- '}' -}}
{%- elif v is string -%}{{- '<|"|>' ~ v ~ '<|"|>' -}}
{%- elif v is boolean -%}{{- 'true' if v else 'false' -}}
{%- elif v is none -%}{{- 'null' -}}
{%- elif v is iterable -%}
{{- '[' -}}{%- for x in v -%}{{- g4(x, up) -}}{{- ',' if not loop.last else '' -}}{%- endfor -%}{{- ']' -}}
{%- else -%}{{- v -}}
{%- endif -%}
{%- endmacro -%}
"""

_TEMPLATE = r"""
{%- set native = NATIVE -%}
{%- set prompting = add_generation_prompt is defined and add_generation_prompt -%}
{%- set keep = (keep_thinking if keep_thinking is defined else true) and not prompting -%}
{%- set tool_list = tools if tools is defined and tools else [] -%}
{%- set ns = namespace(reasoned=false, prefix='', calls=[], in_turn=false, prev='', body='', name='', fns=[]) -%}
{%- for m in messages -%}{%- if keep and m.get('reasoning_content') -%}{%- set ns.reasoned = true -%}{%- endif -%}{%- endfor -%}
{%- if enable_thinking is defined and enable_thinking is not none -%}{%- set thinking = native and enable_thinking -%}
{%- else -%}{%- set thinking = native and ns.reasoned -%}{%- endif -%}
{{- bos_token -}}
{%- if messages and messages[0]['role'] == 'system' -%}
{%- set system = (messages[0]['content'] or '') | trim -%}{%- set loop_messages = messages[1:] -%}
{%- else -%}{%- set system = '' -%}{%- set loop_messages = messages -%}{%- endif -%}
{%- if native and (tool_list or thinking) -%}
{{- 'TS' ~ 'system\n' ~ ('<|think|>' if thinking else '') ~ system -}}
{%- for t in tool_list -%}
{%- set fn = t['function'] if t.get('function') is mapping else t -%}
{{- '<|tool>declaration:' ~ fn['name'] ~ '{' -}}
{%- if fn.get('description') -%}{{- 'description:' ~ g4(fn['description'], true) -}}{{- ',' if fn.get('parameters') else '' -}}{%- endif -%}
{%- if fn.get('parameters') -%}{{- 'parameters:' ~ g4(fn['parameters'], true) -}}{%- endif -%}
{{- '}<tool|>' -}}
{%- endfor -%}
{{- 'EOT\n' -}}
{%- else -%}
{%- if system -%}{%- set ns.prefix = system ~ '\n\n' -%}{%- endif -%}
{%- if tool_list -%}
{%- for t in tool_list -%}{%- set ns.fns = ns.fns + [t['function'] if t.get('function') is mapping else t] -%}{%- endfor -%}
{%- set ns.prefix = ns.prefix ~ 'You can call these functions. To call one, answer with a block\n```tool_call\n{"name": <function name>, "arguments": <object>}\n```\nFunctions: ' ~ (ns.fns | tojson) ~ '\n\n' -%}
{%- endif -%}
{%- endif -%}
{%- for m in loop_messages -%}
{%- set role = m['role'] -%}
{%- set content = (m['content'] or '') | trim -%}
{%- if role == 'user' or role == 'system' -%}
{{- 'TS' ~ role ~ '\n' ~ ns.prefix ~ content ~ 'EOT\n' -}}{%- set ns.prefix = '' -%}
{%- elif role == 'assistant' -%}
{%- if not ns.in_turn -%}{{- 'TSMODEL\n' -}}{%- endif -%}
{%- set calls = m.get('tool_calls') or [] -%}
{%- set ns.body = '' -%}
{%- if thinking and keep and m.get('reasoning_content') -%}
{%- set ns.body = '<|channel>thought\n' ~ (m['reasoning_content'] | trim) ~ '<channel|>' -%}
{%- endif -%}
{%- set ns.body = ns.body ~ content -%}
{%- for c in calls -%}
{%- set call = c['function'] if c.get('function') is mapping else c -%}
{%- set ns.calls = ns.calls + [[c.get('id') | string, call['name']]] -%}
{%- set arguments = call.get('arguments') or {} -%}
{%- if native -%}{%- set ns.body = ns.body ~ '<|tool_call>call:' ~ call['name'] ~ g4(arguments, false) ~ '<tool_call|>' -%}
{%- else -%}{%- set ns.body = ns.body ~ ('\n' if (loop.first and content) or not loop.first else '') ~ '```tool_call\n' ~ ({'name': call['name'], 'arguments': arguments} | tojson) ~ '\n```' -%}
{%- endif -%}
{%- endfor -%}
{%- if calls and native -%}{%- set ns.body = ns.body ~ '<|tool_response>' -%}{%- set ns.in_turn = true -%}
{%- else -%}{%- set ns.body = ns.body ~ 'EOT\n' -%}{%- set ns.in_turn = false -%}{%- endif -%}
{%- if m.get('weight', 1) != 0 -%}{% generation %}{{- ns.body -}}{% endgeneration %}{%- else -%}{{- ns.body -}}{%- endif -%}
{%- elif role == 'tool' -%}
{%- set ns.name = '' -%}
{%- for pair in ns.calls -%}{%- if pair[0] == (m.get('tool_call_id') | string) -%}{%- set ns.name = pair[1] -%}{%- endif -%}{%- endfor -%}
{%- if native -%}
{{- ('' if ns.prev == 'assistant' else '<|tool_response>') ~ 'response:' ~ ns.name -}}
{%- if m['content'] is mapping -%}{{- g4(m['content'], false) -}}{%- else -%}{{- '{value:' ~ g4(content, false) ~ '}' -}}{%- endif -%}
{{- '<tool_response|>' -}}
{%- else -%}
{{- ('TSuser\n' if ns.prev != 'tool' else '\n') ~ '```tool_response\n' ~ ({'name': ns.name, 'content': content} | tojson) ~ '\n```' -}}
{%- if loop.last or loop.nextitem['role'] != 'tool' -%}{{- 'EOT\n' -}}{%- endif -%}
{%- endif -%}
{%- endif -%}
{%- set ns.prev = role -%}
{%- endfor -%}
{%- if prompting and not ns.in_turn -%}{{- 'TSMODEL\n' -}}{%- endif -%}
"""


def text_chat_template(fmt: ChatFormat) -> str:
    """A template of plain conversations only (system, user, assistant; no tools, no thinking).

    A GGUF's default template: llama.cpp reads a template that mentions tools and reasoning
    as one that calls tools, and then parses every answer for calls and thinking (its chat
    endpoint gave a plain answer with the generation prompt in front of it). The file carries
    `chat_template` as well, in llama.cpp's ``tool_use`` slot, which it uses only for requests
    that declare tools (`export.gguf.writer.tool_use_chat_template`).
    """
    ts, eot, model = fmt.turn_start, fmt.end_of_turn, fmt.turn_start + fmt.model_role
    return (
        "{{ bos_token }}"
        "{%- if messages[0]['role'] == 'system' -%}"
        "{%- set first_user_prefix = messages[0]['content'] | trim + '\n\n' -%}"
        "{%- set loop_messages = messages[1:] -%}"
        "{%- else -%}"
        "{%- set first_user_prefix = '' -%}"
        "{%- set loop_messages = messages -%}"
        "{%- endif -%}"
        "{%- for message in loop_messages -%}"
        "{%- if message['role'] == 'assistant' -%}"
        f"{{{{ '{model}\n' + message['content'] | trim + '{eot}\n' }}}}"
        "{%- else -%}"
        f"{{{{ '{ts}' + message['role'] + '\n' + (first_user_prefix if loop.first else '') "
        f"+ message['content'] | trim + '{eot}\n' }}}}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}"
        f"{{{{ '{model}\n' }}}}"
        "{%- endif -%}"
    )


def chat_template(fmt: ChatFormat) -> str:
    """The template of `fmt`, one line per statement (whitespace is controlled by the ``-`` marks)."""
    body = (
        _TEMPLATE.replace("NATIVE", "true" if fmt.native_tools else "false")
        .replace("TSMODEL", fmt.turn_start + fmt.model_role)
        .replace("'TS'", repr(fmt.turn_start))
        .replace("'TS", "'" + fmt.turn_start)
        .replace("EOT", fmt.end_of_turn)
    )
    return (_GEMMA4_VALUE + body).strip()
