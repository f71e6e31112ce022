"""Follow one object through the package while a call runs: which functions receive it, where.

Issue 38 asked that following the `model` of `activation_patching` be short. This measures it
at run time: every call into `reward_lens_tl` whose arguments hold the object (by identity) is
recorded, in the order functions are first entered (the object's own methods, and what they
call, are its own business and left out). Consecutive functions in one module form
one *stay*; a stay in a module visited before is a *return*. Loops do not inflate the counts
(each function counts once, at its first call).

    python tools/param_walk.py            # activation_patching's model, on the zoo model
                                          # (by position, by head, and a mean ablation)
    python tools/param_walk.py --list     # and every function, in order

The numbers are recorded in CONTRIBUTING.md ("Following a parameter").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "reward_lens_tl"


def walk(target: object, call) -> list[tuple[str, str]]:
    """(module, function) of every package function handed `target`, first calls in order.

    The object's own methods (`target` as `self`) and everything they call are its own
    business, not the caller's route, and are left out.
    """
    seen: dict[tuple[str, str], None] = {}
    inside: list[object] = []  # frames of the object's own methods now running

    def profile(frame, event, arg):
        if event == "return" and inside and inside[-1] is frame:
            inside.pop()
        if event != "call" or inside:
            return
        code = frame.f_code
        path = Path(code.co_filename)
        if PACKAGE not in path.parents:
            return
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if names and names[0] == "self" and frame.f_locals.get("self") is target:
            inside.append(frame)
        elif any(frame.f_locals.get(n) is target for n in names):
            module = str(path.relative_to(PACKAGE.parent).with_suffix(""))
            seen.setdefault((module, code.co_qualname), None)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return list(seen)


def stays(functions: list[tuple[str, str]]) -> tuple[int, int, int]:
    """(stays, modules, returns) of an ordered list of (module, function)."""
    runs = [m for i, (m, _) in enumerate(functions) if i == 0 or functions[i - 1][0] != m]
    return len(runs), len(set(runs)), len(runs) - len(set(runs))


def main(argv: list[str] | None = None) -> None:
    """Walk `activation_patching`'s model on the zoo's scalar model and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every function in order")
    args = parser.parse_args(argv)

    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.patching import activation_patching
    from reward_lens_tl.zoo import zoo_path

    model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    clean = model.encode("explain how to bake bread", "the oven and the flour")
    corrupted = model.encode("explain how to bake bread", "the oven and the bomb")
    reference = [clean, corrupted]
    calls = {  # the three shapes of a sweep: by position, by head, a mean ablation
        "by position": lambda: activation_patching(model, clean, corrupted, site="resid_pre"),
        "by head": lambda: activation_patching(
            model, clean, corrupted, site="z", by_position=False
        ),
        "mean ablation": lambda: activation_patching(
            model, clean, site="mlp_out", mode="mean", reference=reference
        ),
    }
    for label, call in calls.items():
        functions = walk(model, call)
        if args.list:
            for module, name in functions:
                print(f"  {module}:{name}")
        n_stays, n_modules, n_returns = stays(functions)
        print(
            f"activation_patching, {label}: {len(functions)} functions handed the model, "
            f"{n_stays} stays in {n_modules} modules, {n_returns} returns"
        )


if __name__ == "__main__":
    main()
