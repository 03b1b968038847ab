"""``--prompt-policy P`` and ``--profile PROFILE``: the flags ``infer``, ``eval``, ``ground``,
``sweep`` and ``console`` share (docs/PROMPTING.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from probench.prompting.policy import DEFAULT_POLICY, POLICIES, PromptPolicy, resolve_policy


def add_policy_arguments(parser: argparse._ActionsContainer, *, default: str | None = None,
                         purpose: str | None = None) -> None:
    """``default`` None: no policy unless asked (infer, eval, sweep: no fourth formulation).
    ``purpose``: what the flag does for this command, when it is not a run's formulation
    (``console``: set on the node)."""
    if purpose is None:
        purpose = "" if default else "adds the formulation `policy` (orig through the policy) to the run"
    parser.add_argument(
        "--prompt-policy", default=default, choices=POLICIES, metavar="P",
        help=f"prompt policy, one of {', '.join(POLICIES)} (docs/PROMPTING.md)"
        + (f"; {purpose}" if purpose else ""),
    )
    parser.add_argument(
        "--profile", default=None, metavar="PROFILE",
        help="formulation profile for --prompt-policy best (`probench profile`; default: the paper's "
        "Table II)",
    )


def policy_from_args(args: argparse.Namespace, model: Mapping[str, Any], command: str) -> PromptPolicy | None:
    """The policy the flags ask for, resolved for the run's model record (None: none asked);
    its warning (best without a profile entry) on stderr, once."""
    name = getattr(args, "prompt_policy", None)
    if name is None:
        if getattr(args, "profile", None):
            from probench.errors import UsageError

            raise UsageError("--profile needs --prompt-policy")
        return None
    policy = resolve_policy(name, model=str(model.get("name") or ""),
                            paper_name=str(model.get("paper_name") or ""), profile=args.profile)
    if policy.warning:
        print(f"probench {command}: warning: {policy.warning}", file=sys.stderr)
    return policy


__all__ = ["DEFAULT_POLICY", "add_policy_arguments", "policy_from_args"]
