"""``probench prompt TEXT... [--json]``: the three formulations of each operator query
(orig, cat, tmpl), and with ``--policy`` what a prompt policy gives the model. Each TEXT
is one query; ``ORIG => CAT`` gives the categorical form explicitly (docs/PROMPTING.md)."""

from __future__ import annotations

import argparse
import json
import sys

from probench.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from probench.prompting.policy import POLICIES

    parser.add_argument("texts", nargs="+", metavar="TEXT", help="operator queries, one per argument")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per query: orig, cat, tmpl, explicit, fallback (and gives)")
    parser.add_argument("--policy", default=None, choices=POLICIES,
                        help="also show what this prompt policy gives the model")
    parser.add_argument("--model", default="", help="the model, for --policy best (zoo name or Table II row)")
    parser.add_argument("--profile", default=None, metavar="PROFILE",
                        help="formulation profile for --policy best (default: the paper's Table II)")


def run(args: argparse.Namespace) -> int:
    from probench.prompting.derive import derive
    from probench.prompting.messages import check_prompt_specs
    from probench.prompting.policy import resolve_policy

    texts = [t for t in args.texts if t.strip()]
    if not texts:
        raise UsageError("give at least one non-empty query")
    check_prompt_specs(texts)  # the node's rule: valid text, length, explicit forms
    policy = None
    if args.policy is not None:
        policy = resolve_policy(args.policy, model=args.model, profile=args.profile)
        if policy.warning:
            print(f"probench prompt: warning: {policy.warning}", file=sys.stderr)
        elif policy.row:
            print(f"probench prompt: best for {args.model!r}: the {policy.profile} row {policy.row!r} gives "
                  f"{policy.forms[0]}", file=sys.stderr)
    forms = [derive(t) for t in texts]  # every query checked before anything is printed
    for text, f in zip(texts, forms, strict=True):
        out = f.as_dict()
        if policy is not None:
            out["gives"] = policy.plan([text]).given()[f.orig]
        if args.json:
            print(json.dumps(out, ensure_ascii=False))
        else:
            note = " (explicit)" if f.explicit else " (no noun phrase found: as typed)" if f.fallback else ""
            print(f"orig: {f.orig}\ncat:  {f.cat}{note}\ntmpl: {f.tmpl}")
            if policy is not None:
                print(f"{policy.describe()} gives: {out['gives']}")
            print()
    return 0
