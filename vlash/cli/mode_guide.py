"""What each execution mode needs from the policy, and what it did in the evaluation: one table, shown by
`vlash run --help` (under "advanced options", which --mode points to) and in docs/METHODS.md ("Execution modes at a
glance"), and the one-line warning `vlash run` prints when the served policy was not trained for the mode it is asked
to run.

The numbers are cells of the shipped evaluation (docs/eval/report/*.json.gz, report seeds, d = 4 control steps at
30 Hz); tests/cli/test_mode_guide.py checks each against its JSON and METHODS.md's table against this one.
"""

from __future__ import annotations

from dataclasses import dataclass

# the evaluations a column comes from: docs/eval/report/<name>.json.gz
HOLD = "learned-velocity-load-observable-hold"  # learned policy, joint velocities, a load to hold against
REACH = "learned-reach"  # learned policy, joint positions
WHACK = "oracle-whack"  # scripted expert, targets that pop up and must be touched in time
# the same tasks' policies trained without any latency augmentation: what a mode gives a policy not trained for it
HOLD_UNTRAINED = "learned-velocity-load-observable-baseline-hold"
REACH_UNTRAINED = "learned-baseline-reach"
COLUMNS = {HOLD: "hold", REACH: "reach", WHACK: "whack"}
COLUMNS_UNTRAINED = {HOLD_UNTRAINED: "hold", REACH_UNTRAINED: "reach"}
DELAY = 4  # control steps: the delay every cell is measured at
TRAINING_NAMES = {  # TRAINED_WITH entry -> what the warning calls it
    "future-state": "future-state offsets",
    "prefix": "committed prefixes",
    "horizon-aware": "horizon-aware times",
}


@dataclass(frozen=True)
class ModeGuide:
    """One mode's row: what the policy needs (`needs`: the training entries it must have been trained with, the
    warning's subject; `needs_text`: the table's words), its success % at d = 4 per evaluation (None: not
    evaluated), when not to use it, and for a mode that needs training (`untrained`): an evaluation of a policy
    trained without it, with the mode's success and naive's there at d = 4."""

    mode: str
    needs_text: str
    success: dict[str, int | None]
    avoid: str
    needs: tuple[str, ...] = ()
    untrained: tuple[str, int, int] | None = None


GUIDES = (
    ModeGuide("sync", "nothing", {HOLD: 68, REACH: 90, WHACK: 2}, "the robot stands still d steps per chunk"),
    ModeGuide("naive", "nothing", {HOLD: 52, REACH: 98, WHACK: 38}, "velocity actions: a stale plan drifts"),
    ModeGuide("vlash", "nothing; helped by training", {HOLD: 80, REACH: 92, WHACK: 32}, "-"),
    ModeGuide(
        "prefix",
        "training with prefixes",
        {HOLD: 26, REACH: 94, WHACK: None},
        "velocity actions (below naive on hold even when trained; use faster)",
        ("prefix",),
        (HOLD_UNTRAINED, 30, 48),
    ),  # fmt: skip
    ModeGuide(
        "rtc",
        "constant schedule",
        {HOLD: 12, REACH: 94, WHACK: None},
        "velocity actions and corrections within a chunk",
    ),  # fmt: skip
    ModeGuide(
        "faster",
        "prefixes + horizon-aware",
        {HOLD: 84, REACH: 94, WHACK: 72},
        "a policy not trained for it",
        ("prefix", "horizon-aware"),
        (REACH_UNTRAINED, 42, 96),
    ),  # fmt: skip
    ModeGuide("ensemble", "nothing", {HOLD: 50, REACH: 90, WHACK: 0}, "events, moving targets, corrections"),
)
SYNC_AT_ZERO = {HOLD: 90, REACH: 98, WHACK: 82}  # sync at d = 0: the reference every row is read against
GUIDE_BY_MODE = {guide.mode: guide for guide in GUIDES}


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def help_table() -> str:
    """The table under `vlash run --mode` (fits an 80-column terminal; the help keeps indented lines as they are)."""
    head = f"  {'mode':<9}{'the policy needs':<28}" + "".join(f"{name:>6}" for name in COLUMNS.values())
    rows = [f"  {g.mode:<9}{g.needs_text:<28}" + "".join(f"{_cell(g.success[c]):>6}" for c in COLUMNS) for g in GUIDES]
    reference = " / ".join(str(SYNC_AT_ZERO[c]) for c in COLUMNS)
    return "\n".join([
        f"success % at d = {DELAY}, report seeds (sync at d = 0: {reference}); hold: a learned policy, velocities "
        "under a load; reach: a learned policy, positions; whack: the scripted expert, targets that pop up",
        "", head, *rows, "",
        "velocity actions: prefix and rtc pull the new chunk toward the previous plan; use vlash or faster.", "",
        "when not to use each: docs/METHODS.md, \"Execution modes at a glance\"",
    ])  # fmt: skip


def markdown_table() -> str:
    """The same table in docs/METHODS.md, with when not to use each mode."""
    names = " | ".join(f"{name} (d = {DELAY})" for name in COLUMNS.values())
    lines = [f"| mode | the policy needs | {names} | do not use it for |", "|---" * (3 + len(COLUMNS)) + "|"]
    for g in GUIDES:
        cells = " | ".join(_cell(g.success[c]) for c in COLUMNS)
        lines.append(f"| `{g.mode}` | {g.needs_text} | {cells} | {g.avoid} |")
    reference = " | ".join(str(SYNC_AT_ZERO[c]) for c in COLUMNS)
    lines.append(f"| `sync` at d = 0 (the reference) | | {reference} | |")
    return "\n".join(lines)


def mode_warning(mode: str, trained_with: list[str] | None, model_id: str) -> str | None:
    """One line when `mode` needs training the policy's metadata says it lacks (`trained_with`: Metadata's; None:
    the checkpoint does not say); None when the mode needs none or the policy has it."""
    guide = GUIDE_BY_MODE.get(mode)
    if guide is None or not guide.needs:
        return None
    missing = [name for name in guide.needs if trained_with is None or name not in trained_with]
    if not missing:
        return None
    what = " and ".join(TRAINING_NAMES[name] for name in missing)
    said = "its checkpoint does not say it was (not trained by vlash train)" if trained_with is None else (
        "its metadata says it was trained without them")  # fmt: skip
    evidence = ""
    if guide.untrained is not None:
        evaluation, success, naive = guide.untrained
        evidence = f" (a {COLUMNS_UNTRAINED[evaluation]} policy without it: {success}% at d = {DELAY}, naive {naive}%)"
    return (f"--mode {mode} needs a policy trained with {what}; {model_id}: {said}. It may do worse than "
            f"--mode naive{evidence}; docs/METHODS.md, \"Execution modes at a glance\"")  # fmt: skip
