"""Drawings of a pattern over a few periods: text rows per resource, or a matplotlib Gantt chart."""
from __future__ import annotations

from .chain import Chain
from .pattern import Pattern


def _short_names(chain: Chain) -> list[str]:
    """1-based index among the real layers; ``c`` for a communication layer."""
    out, i = [], 0
    for ly in chain.layers:
        if ly.id.startswith("comm:"):
            out.append("c")
        else:
            i += 1
            out.append(str(i))
    return out


def draw_pattern(pattern: Pattern, width: int = 96, periods: int = 2) -> str:
    """The pattern over ``periods`` periods as text, one row per resource: ``F3`` / ``B3`` mark the
    start of layer 3's forward / backward (1-based; ``Fc``/``Bc`` a communication layer), ``^h`` its shift when there is room, ``=`` the
    rest of a forward, ``-`` the rest of a backward, ``.`` idle; ``|`` separates periods."""
    T = pattern.period
    span = periods * T
    cols = max(8, width)
    rows = []
    name_w = max(len(r) for r in pattern.resources)
    used = sorted({op.resource for op in pattern.ops if op.duration > 0} | set(range(pattern.processors)))
    names = _short_names(pattern.chain)
    for r in used:
        cells = ["."] * cols
        for j in range(periods):
            for op in pattern.ops:
                if op.resource != r or op.duration <= 0:
                    continue
                a = (op.start + j * T) / span * cols
                b = (op.start + op.duration + j * T) / span * cols
                first = int(round(a))
                last = max(first + 1, int(round(b)))
                label = f"{op.kind}{names[op.layer]}"
                if last - first >= len(label) + 2:
                    label += f"^{op.shift}"
                fill = "=" if op.kind == "F" else "-"
                for x in range(first, last):
                    ch = label[x - first] if x - first < len(label) else fill
                    cells[x % cols] = ch
        line = "".join(cells)
        per = cols // periods
        line = "|".join(line[i * per:(i + 1) * per] for i in range(periods)) + line[periods * per:]
        rows.append(f"{pattern.resources[r]:>{name_w}} |{line}|")
    ruler = f"{'':>{name_w}}  " + "".join(f"{'t=' + format(j * T, 'g'):<{cols // periods + 1}}" for j in range(periods))
    return "\n".join([ruler, *rows])


def save_gantt(pattern: Pattern, path: str, periods: int = 2, title: str | None = None) -> None:
    """Draw the pattern over ``periods`` periods with matplotlib (Agg) and write it atomically."""
    import io as _io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dplace.instance.io import write_atomic

    T = pattern.period
    used = sorted({op.resource for op in pattern.ops if op.duration > 0} | set(range(pattern.processors)))
    names = _short_names(pattern.chain)
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(used) + 1.5))
    for y, r in enumerate(used):
        for j in range(periods):
            for op in pattern.ops:
                if op.resource != r or op.duration <= 0:
                    continue
                x0 = op.start + j * T
                ax.broken_barh([(x0, op.duration)], (y - 0.4, 0.8),
                               facecolors="tab:blue" if op.kind == "F" else "tab:orange", edgecolor="black", linewidth=0.3)
                if len(pattern.ops) <= 80:
                    ax.text(x0 + op.duration / 2, y, f"{op.kind}{names[op.layer]}$^{{{op.shift}}}$", ha="center",
                            va="center", fontsize=7)
    for j in range(periods + 1):
        ax.axvline(j * T, color="grey", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(used)))
    ax.set_yticklabels([pattern.resources[r] for r in used])
    ax.set_xlim(0, periods * T * 1.01 + 1e-9)
    ax.set_xlabel("time (µs)")
    ax.set_title(title or f"{pattern.k}-periodic pattern, period {T:g} (normalised {pattern.normalised_period:g})")
    fig.tight_layout()
    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buf.getvalue())
