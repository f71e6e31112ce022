"""Onset detection on a recorded series: a one-sided CUSUM calibrated on the series' warm-up.

`detect_onset` standardises a series by the mean and standard deviation of its first
`warmup` points (the in-control period), `z_t = (x_t - mu) / sigma`, and runs Page's
one-sided CUSUM from the end of the warm-up on:

    S_t = max(0, S_{t-1} + z_t - k)        (an increase; -z_t for a decrease)

It alarms at the first `t` with `S_t > h`. `k` (default 0.5) is the reference value in
warm-up standard deviations: the CUSUM is tuned to detect a shift of `2k` sigmas soonest.
The threshold `h` is set from the **false-alarm rate stated as an in-control average run
length** `arl0` (the mean number of points between false alarms when nothing changes),
through Siegmund's approximation for Gaussian data:

    ARL0(h) = (exp(2 k b) - 2 k b - 1) / (2 k^2),   b = h + 1.166

(solved for `h` with `scipy.optimize.brentq`; `direction="both"` runs the two
one-sided charts, each at `2 * arl0`, so the pair keeps `arl0`). The **onset** is where
the excursion that ends in the alarm began: the point after the last `S_t = 0` before the
alarm (the CUSUM estimate of the change point). With a `gold` series, the result also has the
step at which the gold reward peaks and the **lead time** of the alarm before it
(`gold_peak_step - alarm_step`; positive: the alarm came first).

Limits: the ARL holds for independent Gaussian noise around a flat warm-up. Training curves
are autocorrelated and drift, so the realised false-alarm rate of a raw curve is higher than
`arl0` says: record at spaced steps (`every=k`), compare with a control run (as
`notebooks/09_reward_hacking_in_training.ipynb` does), and read `sigma` (a warm-up that
barely moves gives a tiny `sigma`; `min_sigma` floors it).

Examples:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> values = np.r_[rng.normal(0, 1, 40), rng.normal(3, 1, 20)]
    >>> onset = detect_onset(values, warmup=20, arl0=500)
    >>> onset.fired, onset.onset_step, onset.alarm_step
    (True, 38, 41)
    >>> round(cusum_threshold(0.5, 500), 3)
    4.381
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import PressureError
from ..plotting import GREY, Backend, line, render, side_by_side
from ..results import Result

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "Onset",
    "cusum_threshold",
    "detect_onset",
    "onset_table",
]

Direction = Literal["increase", "decrease", "both"]
DIRECTIONS: tuple[str, ...] = ("increase", "decrease", "both")
SIEGMUND_OFFSET = 1.166


def cusum_arl0(k: float, h: float) -> float:
    """Siegmund's approximation of a one-sided CUSUM's in-control average run length.

    Args:
        k: the reference value, in warm-up standard deviations.
        h: the decision interval (threshold).

    Returns:
        The in-control average run length, in points.
    """
    b = h + SIEGMUND_OFFSET
    return (math.exp(2 * k * b) - 2 * k * b - 1) / (2 * k * k)


def cusum_threshold(k: float, arl0: float) -> float:
    """The decision interval `h` whose in-control ARL (Siegmund) is `arl0`.

    Args:
        k: the reference value, in warm-up standard deviations.
        arl0: the in-control average run length wanted, in points.

    Returns:
        The threshold `h`.

    Raises:
        PressureError: if `k` is not positive, or `arl0` is no longer than what `h = 0`
            already gives.

    Examples:
        >>> from reward_lens_tl.pressure import cusum_threshold
        >>> from reward_lens_tl.pressure.onset import cusum_arl0
        >>> h = cusum_threshold(0.5, 500)
        >>> round(h, 3), round(cusum_arl0(0.5, h), 6)
        (4.381, 500.0)
        >>> round(cusum_threshold(0.5, 5000), 3)  # ten times fewer false alarms: a higher bar
        6.662
    """
    from scipy.optimize import brentq

    if not k > 0:
        raise PressureError(f"k must be > 0 (in warm-up standard deviations), got {k}")
    if not arl0 > cusum_arl0(k, 0.0):
        raise PressureError(
            f"arl0={arl0} is below what h=0 already gives ({cusum_arl0(k, 0.0):.3g}); "
            "ask for a longer average run length"
        )
    hi = 700.0 / (2 * k) - SIEGMUND_OFFSET  # exp() stays finite below it
    return float(brentq(lambda h: cusum_arl0(k, h) - arl0, 0.0, hi))


@dataclass(frozen=True)
class Onset(Result):
    """A change point found (or not) by `detect_onset`.

    `onset_step`/`alarm_step`/`gold_peak_step`/`lead_time` are `None` when absent.

    Attributes:
        name: the series' name.
        steps: the step of each point.
        values: the series' values.
        statistic: the CUSUM of the alarming side (`NaN` during the warm-up).
        side: `"increase"` or `"decrease"` (for `direction="both"`, the side that alarmed
            first).
        direction: the direction asked for: `"increase"`, `"decrease"` or `"both"`.
        warmup: how many leading points calibrated the mean and sigma.
        mean: the warm-up mean.
        sigma: the warm-up standard deviation (floored at `min_sigma`).
        k: the reference value, in warm-up standard deviations.
        threshold: the decision interval `h`.
        arl0: the in-control average run length.
        alarm_step: the step at which the CUSUM crossed the threshold.
        onset_step: the step at which the excursion that ends in the alarm began.
        gold_peak_step: the step at which the gold series peaks.
        lead_time: `gold_peak_step - alarm_step` (positive: the alarm came first).

    Examples:
        >>> from reward_lens_tl.pressure import detect_onset
        >>> onset = detect_onset([0.0, 0.1, -0.1, 0.05, 0.0, 2.0, 2.1, 2.2], warmup=5)
        >>> onset.fired, onset.side, round(onset.mean, 3), round(onset.sigma, 3)
        (True, 'increase', 0.01, 0.074)
        >>> onset_step, alarm_step = onset
        >>> onset_step, alarm_step, round(onset.threshold, 3)
        (5, 5, 4.381)
    """

    label_column = "step"
    value_column = "cusum"

    name: str
    steps: np.ndarray
    values: np.ndarray
    statistic: np.ndarray
    side: str
    direction: str
    warmup: int
    mean: float
    sigma: float
    k: float
    threshold: float
    arl0: float
    alarm_step: int | None
    onset_step: int | None
    gold_peak_step: int | None = None
    lead_time: int | None = None

    def __iter__(self):
        """`onset_step, alarm_step = detect_onset(...)` unpacks the two steps."""
        yield self.onset_step
        yield self.alarm_step

    @property
    def fired(self) -> bool:
        """Whether the CUSUM crossed its threshold after the warm-up."""
        return self.alarm_step is not None

    def to_dataframe(self):
        """One row per point: `step`, `value`, `cusum` (NaN in the warm-up), `alarm`.

        Returns:
            A `pandas.DataFrame`.
        """
        import pandas as pd

        return pd.DataFrame(
            {
                "step": self.steps,
                "value": self.values,
                "cusum": self.statistic,
                "alarm": self.steps == self.alarm_step,
            }
        )

    def summary(self) -> dict:
        """The scalar findings as one dict (a row of `onset_table`).

        Returns:
            The series' name, whether it fired, the side, the steps, lead time and calibration.
        """
        return {
            "series": self.name,
            "fired": self.fired,
            "side": self.side,
            "onset_step": self.onset_step,
            "alarm_step": self.alarm_step,
            "gold_peak_step": self.gold_peak_step,
            "lead_time": self.lead_time,
            "mean": self.mean,
            "sigma": self.sigma,
            "threshold": self.threshold,
            "arl0": self.arl0,
        }

    def plot(self, ax: Axes | None = None, *, backend: Backend | None = None) -> Any:
        """The series and its CUSUM, side by side, with the warm-up and the events marked.

        Left: the series, the warm-up shaded. Right: the CUSUM of the alarming side (in
        warm-up standard deviations) and its threshold `h` (dotted). Both panels mark the
        onset (orange, dashed), the alarm (red) and the gold peak (green, dash-dot) as
        vertical lines, labelled in the left panel. Two panels rather than a twin axis: the
        series keeps its own units, and the CUSUM its threshold.

        Args:
            ax: Matplotlib axes to draw the static form of the left panel on (the series and
                the events; the two panels need `backend="matplotlib"`).
            backend: `"plotly"` or `"matplotlib"` (see `reward_lens_tl.plotting`).

        Returns:
            The figure (not shown).
        """
        steps = [int(s) for s in self.steps]
        values = line(
            {self.name: self.values},
            x=steps,
            xaxis="step",
            yaxis=self.name,
            title=self.name,
            markers=len(steps) <= 60,
            width=560,
        )
        cusum = line(
            {"CUSUM": self.statistic},
            x=steps,
            xaxis="step",
            yaxis="CUSUM (warm-up sd)",
            title=f"CUSUM ({self.side}) · threshold h = {self.threshold:.3g}",
            markers=len(steps) <= 60,
            width=560,
        )
        cusum.add_hline(y=self.threshold, line=dict(color=GREY, width=1, dash="dot"))
        events = [
            (step, label, color, dash)
            for step, label, color, dash in (
                (self.onset_step, "onset", "#ed7d31", "dash"),
                (self.alarm_step, "alarm", "#c00000", "solid"),
                (self.gold_peak_step, "gold peak", "#70ad47", "dashdot"),
            )
            if step is not None
        ]
        for panel in (values, cusum):
            if self.warmup > 0 and steps:
                panel.add_vrect(
                    x0=steps[0], x1=steps[min(self.warmup, len(steps)) - 1],
                    fillcolor="rgba(136,136,136,0.15)", line_width=0, layer="below",
                )  # fmt: skip
            for step, _, color, dash in events:
                panel.add_vline(x=step, line=dict(color=color, width=1.5, dash=dash))
        if ax is not None:
            fig = values.update_layout(title_text=self._title())
        else:
            fig = side_by_side([values, cusum], title=self._title())
        # labels on the side the excursion leaves empty: below a rise, above a fall
        low = self.side == "increase"
        if self.warmup > 0 and steps:
            fig.add_annotation(
                x=steps[0], xref="x", y=1.0 if low else 0.0, yref="y domain", text="warm-up",
                showarrow=False, xanchor="left", yanchor="top" if low else "bottom",
                font=dict(color=GREY, size=11),
            )  # fmt: skip
        for i, (step, label, color, _) in enumerate(events):
            fig.add_annotation(
                x=step, xref="x", y=0.02 + 0.08 * i if low else 0.98 - 0.08 * i,
                yref="y domain", text=f"{label} {step}", showarrow=False, xanchor="left",
                yanchor="bottom" if low else "top", font=dict(color=color, size=11),
            )  # fmt: skip
        return render(fig, backend, ax)

    def _title(self) -> str:
        """The figure's title: the alarm and the lead time, or that nothing fired."""
        if self.alarm_step is None:
            return f"{self.name}: no alarm (ARL0 {self.arl0:.3g})"
        title = f"{self.name}: alarm at step {self.alarm_step}, onset at {self.onset_step}"
        if self.lead_time is not None:
            when = "before" if self.lead_time >= 0 else "after"
            title += f" · {abs(self.lead_time)} steps {when} the gold peak"
        return title


def _as_series(series, steps, name: str | None = None) -> tuple[str, np.ndarray, np.ndarray]:
    """`(name, steps, values)` of a series given in any of the accepted forms.

    The forms: a pandas Series (its index are the steps), a long frame with `step` and `value`
    columns (the monitor's `records.to_dataframe()`; with a `series` column, `name` picks
    one), a `reward_lens_tl.pressure.monitor.MonitorRecords` with `name`, or values with
    `steps` (default `0, 1, ...`).
    """
    if hasattr(series, "series_names") and hasattr(series, "series"):  # MonitorRecords
        if name is None:
            raise PressureError("name the series to read from the records: name=...")
        series = series.series(name)
    elif hasattr(series, "columns") and {"step", "value"} <= set(series.columns):
        frame = series
        if "series" in frame.columns:
            names = list(dict.fromkeys(frame["series"]))
            if name is None and len(names) != 1:
                raise PressureError(
                    f"the frame holds {len(names)} series: pass name= (one of {names[:8]})"
                )
            frame = frame[frame["series"] == (name or names[0])]
            if frame.empty:
                raise PressureError(f"no series {name!r} in the frame")
        series = frame.set_index("step")["value"].rename(name or "value")
    name = str(getattr(series, "name", None) or "series")
    if steps is None and hasattr(series, "index") and hasattr(series, "to_numpy"):
        steps = series.index.to_numpy()
    values = np.asarray(series, dtype=float).reshape(-1)
    steps = np.arange(len(values)) if steps is None else np.asarray(steps).reshape(-1)
    if len(steps) != len(values):
        raise PressureError(f"{len(steps)} steps for {len(values)} values")
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise PressureError(
            f"the series has a non-finite value ({values[bad]}) at step {steps[bad]}: "
            "drop or fill it before detecting an onset"
        )
    if len(steps) > 1 and not (np.diff(steps.astype(float)) > 0).all():
        raise PressureError("steps must be strictly increasing")
    return name, steps.astype(int), values


def _one_sided(z: np.ndarray, warmup: int, k: float) -> np.ndarray:
    stat = np.full(len(z), np.nan)
    s = 0.0
    for t in range(warmup, len(z)):
        s = max(0.0, s + z[t] - k)
        stat[t] = s
    return stat


def _alarm_and_onset(stat: np.ndarray, warmup: int, h: float) -> tuple[int | None, int | None]:
    above = np.flatnonzero(np.nan_to_num(stat, nan=-1.0) > h)
    if len(above) == 0:
        return None, None
    alarm = int(above[0])
    zeros = np.flatnonzero(stat[warmup:alarm] == 0.0)
    onset = warmup + int(zeros[-1]) + 1 if len(zeros) else warmup
    return alarm, onset


def detect_onset(
    series,
    *,
    steps: Sequence[int] | None = None,
    warmup: int = 10,
    arl0: float = 500.0,
    k: float = 0.5,
    direction: Direction = "increase",
    min_sigma: float = 1e-6,
    gold=None,
    name: str | None = None,
) -> Onset:
    """Onset and alarm steps of a change in `series` (module docstring for the method).

    The result unpacks as `onset_step, alarm_step`.

    Args:
        series: a pandas Series indexed by step (e.g. a column of `records.pivot()`),
            `callback.records` or its `to_dataframe()` with `name=` the series, or values with
            `steps`.
        steps: the step of each value (default `0, 1, ...`).
        warmup: how many leading points calibrate the mean and sigma.
        arl0: the in-control average run length (false-alarm rate, in points).
        k: the reference value in sigmas.
        direction: `"increase"`, `"decrease"` or `"both"`.
        min_sigma: floor of the warm-up sigma.
        gold: a gold-reward series (same forms; its own steps) for `gold_peak_step` and
            `lead_time`.
        name: the series to read from records or a long frame; also the result's name.

    Returns:
        The `Onset`.

    Raises:
        PressureError: if `direction` is unknown, the series cannot be read (no `name` for
            records or a frame of several series, steps not strictly increasing, a non-finite
            value), or the series is not longer than a warm-up of at least 2 points.

    Examples:
        >>> detect_onset([0.0, 0.1, -0.1, 0.05, 0.0, 2.0, 2.1, 2.2], warmup=5).alarm_step
        5
    """
    if direction not in DIRECTIONS:
        raise PressureError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    label, step_values, values = _as_series(series, steps, name)
    if warmup < 2 or len(values) < warmup + 1:
        raise PressureError(
            f"warmup={warmup} needs at least 2 points and a series longer than the warm-up; "
            f"the series has {len(values)} points"
        )
    mean = float(values[:warmup].mean())
    sigma = max(float(values[:warmup].std(ddof=1)), min_sigma)
    z = (values - mean) / sigma
    sides = ("increase", "decrease") if direction == "both" else (direction,)
    h = cusum_threshold(k, arl0 * len(sides))
    found = []
    for side in sides:
        stat = _one_sided(z if side == "increase" else -z, warmup, k)
        alarm, onset = _alarm_and_onset(stat, warmup, h)
        found.append((math.inf if alarm is None else alarm, side, stat, alarm, onset))
    _, side, stat, alarm, onset = min(found, key=lambda f: f[0])
    alarm_step = None if alarm is None else int(step_values[alarm])
    peak, lead = _gold_peak(gold, alarm_step)
    return Onset(
        name=name or label,
        steps=step_values,
        values=values,
        statistic=stat,
        side=side,
        direction=direction,
        warmup=warmup,
        mean=mean,
        sigma=sigma,
        k=float(k),
        threshold=h,
        arl0=float(arl0),
        alarm_step=alarm_step,
        onset_step=None if onset is None else int(step_values[onset]),
        gold_peak_step=peak,
        lead_time=lead,
    )


def _gold_peak(gold, alarm_step: int | None) -> tuple[int | None, int | None]:
    if gold is None:
        return None, None
    _, gold_steps, gold_values = _as_series(gold, None)
    peak = int(gold_steps[int(np.argmax(gold_values))])
    return peak, (None if alarm_step is None else peak - alarm_step)


def onset_table(onsets: Sequence[Onset]):
    """One row per `Onset` (`Onset.summary`), in the order given.

    Args:
        onsets: the onsets.

    Returns:
        A `pandas.DataFrame`.

    Examples:
        >>> from reward_lens_tl.pressure import detect_onset, onset_table
        >>> jump = detect_onset([0.0, 0.1, -0.1, 0.05, 0.0, 2.0, 2.1], warmup=5, name="jump")
        >>> flat = detect_onset([0.0, 0.1, -0.1, 0.05, 0.0, 0.02, -0.05], warmup=5, name="flat")
        >>> onset_table([jump, flat])[["series", "fired", "onset_step", "alarm_step"]]
          series  fired  onset_step  alarm_step
        0   jump   True         5.0         5.0
        1   flat  False         NaN         NaN
    """
    import pandas as pd

    return pd.DataFrame([o.summary() for o in onsets])
