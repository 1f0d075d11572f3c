"""calbench's Snakemake console (src/snakemake_logger_plugin_calbench): the line of a finished job, its estimate of
the time left, and the cut of overlong lines."""

from __future__ import annotations

from snakemake_logger_plugin_calbench import MAX_LINE, ProgressLine, cut, duration


def test_a_finished_job_gets_one_line_with_the_time_left_at_the_mean_pace():
    now = [100.0]
    line = ProgressLine(clock=lambda: now[0])
    line.job_info(7, "calibrate", {"source": "tiny", "method": "ts", "seed": "0"})
    now[0] += 30
    line.job_finished(7)
    assert line.progress(3, 12) == "[3/12] calibrate tiny/ts/0 done in 30.0 s; 30 s elapsed, ~1 min 30 s left"
    line.job_finished(8)  # a job whose header was never seen
    assert line.progress(12, 12) == "[12/12] job 8 done in 0.0 s; 30 s elapsed"


def test_durations_and_cut_lines():
    assert [duration(s) for s in (42, 185, 3720)] == ["42 s", "3 min 05 s", "1 h 02 min"]
    text = cut("short\n" + "x" * 5000)
    assert text.startswith("short\n") and max(map(len, text.split("\n"))) <= MAX_LINE + 60
    assert "--verbose prints all" in text
