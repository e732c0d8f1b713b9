#!/usr/bin/env python3
"""Re-run the command examples of docs/user-guide.md and refresh their printed output.

Every fenced block whose first line starts with `$ ` is an example: each `$ command` line (with
`\\` continuations) is followed by what it printed, possibly shortened by hand:

- `[... N lines trimmed ...]` stands for N lines left out (`…`, `[...]` or `[... words ...]`
  for some, unrecounted);
- a line ending in ` [...]` was cut at that column.

The script runs each `throughput-optimizer` command again (bash, repository root, the release
binary first on PATH, stdout and stderr through one pipe as a terminal shows them), lines the
new output up with the old one by shape (digits masked), and writes the block back with the
same lines kept, the same cuts and recounted trims. Commands that need files the guide only
shows (under /tmp, written by an earlier `cat`), launch files or other tools are left as they
are and listed.

  scripts/refresh_guide.py --check            list the examples whose output changed
  scripts/refresh_guide.py --write [LINE ...] rewrite them (only the blocks starting at LINE)
  scripts/refresh_guide.py --write --insert LINE ...
                                              also show lines the old output did not have

Build first: `cargo build --release`. Read the diff before committing: the alignment is by
shape, and a block whose shape changed (a new table column, a new line) needs a look.
"""
import difflib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = os.path.join(ROOT, "docs", "user-guide.md")
TRIM = re.compile(r"^\[\.\.\..*\]$|^\[\.\.\.\]$|^…$")
COUNTED = re.compile(r"^\[\.\.\. \d+ lines? trimmed \.\.\.\]$")
CUT = " [...]"
# `--insert`: show output lines the example did not have instead of leaving the block.
INSERT = "--insert" in sys.argv
# The run's wall time (stderr): shown only where the example showed it.
TIMING = "All experiments completed in"


def blocks(lines):
    """(start, end) line indices of each example block's body (between the fences)."""
    i = 0
    while i < len(lines):
        if lines[i].startswith("```") and i + 1 < len(lines) and lines[i + 1].startswith("$ "):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            yield i + 1, j
            i = j + 1
        else:
            i += 1


def segments(body):
    """[(command lines, output lines)] of one block."""
    out = []
    i = 0
    while i < len(body):
        if not body[i].startswith("$ "):
            i += 1
            continue
        cmd = [body[i]]
        while cmd[-1].endswith("\\") and i + 1 < len(body):
            i += 1
            cmd.append(body[i])
        i += 1
        start = i
        while i < len(body) and not body[i].startswith("$ "):
            i += 1
        out.append((cmd, body[start:i]))
    return out


def runnable(cmd):
    text = " ".join(cmd)
    return "throughput-optimizer" in text and not any(
        s in text for s in ("/tmp/", "sbatch", "--emit", "…", "cargo run", "requests.csv", "t.json", "head.json", "pd.json", "results/", "shard-", "runs.csv", "burstgpt.csv")
    )


def untracked():
    p = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return set(p.stdout.split())


def run(cmd):
    """The command's output; files it leaves in the repository (an example's `--output-file`)
    are removed."""
    before = untracked()
    script = "\n".join(c[2:] if k == 0 else c for k, c in enumerate(cmd))
    env = dict(os.environ)
    env["PATH"] = os.path.join(ROOT, "target", "release") + os.pathsep + env["PATH"]
    env.pop("COLUMNS", None)
    p = subprocess.run(["bash", "-c", "exec 2>&1\n" + script], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, timeout=600)
    for f in untracked() - before:
        os.remove(os.path.join(ROOT, f))
    return p.stdout.rstrip("\n").split("\n") if p.stdout.strip() else []


def shape(line):
    """A line's shape: digits masked, runs of spaces and dashes folded."""
    return re.sub(r"[ -]+", " ", re.sub(r"\d+", "#", line)).strip()


def refresh(old, new):
    """The old output's kept lines, cuts and trims applied to the new output."""
    kept = [(k, l) for k, l in enumerate(old) if not TRIM.match(l)]
    keys_old = [shape(l[: -len(CUT)]) if l.endswith(CUT) else shape(l) for _, l in kept]
    keys_new = [shape(l) for l in new]
    # A cut line matches a new line by its prefix's shape.
    for k, (_, l) in enumerate(kept):
        if l.endswith(CUT):
            width = len(l) - len(CUT)
            for j, n in enumerate(new):
                if shape(n[:width]) == keys_old[k]:
                    keys_new[j] = keys_old[k]
    match = align([l for _, l in kept], new, keys_old, keys_new)
    out = []
    last_new = -1
    pending_trim = None
    for k, l in enumerate(old):
        if TRIM.match(l):
            pending_trim = l
            continue
        idx = next(i for i, (kk, _) in enumerate(kept) if kk == k)
        j = match.get(idx)
        if j is None:
            return None  # the shape changed: refresh this block by hand
        if pending_trim:
            out.extend(trim_marker(pending_trim, j - last_new - 1))
            pending_trim = None
        elif j != last_new + 1:
            if not INSERT:
                return None  # lines the old output did not have (a new warning, a new row)
            out.extend(new[last_new + 1 : j])
        line = new[j]
        if l.endswith(CUT):
            line = line[: len(l) - len(CUT)] + CUT
        out.append(line)
        last_new = j
    if pending_trim:
        out.extend(trim_marker(pending_trim, len(new) - last_new - 1))
    elif last_new + 1 != len(new):
        if not INSERT:
            return None
        out.extend(new[last_new + 1 :])
    return out


def align(old, new, keys_old, keys_new):
    """Old kept line index -> new line index: unchanged lines first (exact text), then, in
    each gap between them, lines of the same shape."""
    match = {}
    exact = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_matching_blocks()
    anchors = [(-1, -1)]
    for a, b, size in exact:
        for t in range(size):
            match[a + t] = b + t
            anchors.append((a + t, b + t))
    anchors.append((len(old), len(new)))
    for (a0, b0), (a1, b1) in zip(anchors, anchors[1:]):
        if a1 - a0 <= 1 or b1 - b0 <= 1:
            continue
        sub = difflib.SequenceMatcher(a=keys_old[a0 + 1 : a1], b=keys_new[b0 + 1 : b1], autojunk=False)
        for a, b, size in sub.get_matching_blocks():
            for t in range(size):
                match[a0 + 1 + a + t] = b0 + 1 + b + t
    # A gap where as many old lines as new ones are left unmatched (a line that grew a field):
    # paired in order.
    pairs = sorted(match.items())
    bounds = [(-1, -1)] + pairs + [(len(old), len(new))]
    for (a0, b0), (a1, b1) in zip(bounds, bounds[1:]):
        if a1 - a0 == b1 - b0 and a1 - a0 > 1:
            for t in range(1, a1 - a0):
                match[a0 + t] = b0 + t
    return match


def trim_marker(old, count):
    """The old marker (recounted when it counts) for `count` lines left out (none: no marker)."""
    if count == 0:
        return []
    return [f"[... {count} lines trimmed ...]" if COUNTED.match(old) else old]


def main():
    args = sys.argv[1:]
    write = "--write" in args
    only = {int(a) for a in args if a.isdigit()}
    lines = open(GUIDE, encoding="utf-8").read().split("\n")
    changed, manual, skipped = [], [], []
    edits = []
    for start, end in blocks(lines):
        lineno = start + 1
        if only and lineno not in only:
            continue
        body = lines[start:end]
        new_body = []
        pos = 0
        for cmd, old in segments(body):
            first = body.index(cmd[0], pos)
            new_body.extend(body[pos:first])
            new_body.extend(cmd)
            pos = first + len(cmd) + len(old)
            if not runnable(cmd):
                skipped.append(lineno)
                new_body.extend(old)
                continue
            output = run(cmd)
            if not any(l.startswith(TIMING) for l in old):
                output = [l for l in output if not l.startswith(TIMING)]
            fresh = refresh(old, output)
            if fresh is None:
                manual.append(lineno)
                new_body.extend(old)
            else:
                new_body.extend(fresh)
        new_body.extend(body[pos:])
        if new_body != body:
            changed.append(lineno)
            edits.append((start, end, new_body))
    for start, end, new_body in reversed(edits):
        lines[start:end] = new_body
    if write:
        open(GUIDE, "w", encoding="utf-8").write("\n".join(lines))
    print("changed:", changed)
    print("shape changed, refresh by hand:", sorted(set(manual)))
    print("not run (files the guide only shows, other tools):", sorted(set(skipped)))


if __name__ == "__main__":
    main()
