"""MLflow logging in a process of its own, started the moment ``arecall run`` starts.

Importing MLflow and opening its sqlite store (SQLAlchemy's models, alembic's schema check) take
three seconds or more here, longer than the stages of a small run; done in the run's process they
come after the stages and the user waits for both. A thread cannot overlap them (an import holds
the GIL), a second process can: `spawn_tracker` starts ``python -m arecall.tracking.tracker``
before Hydra composes the config, the tracker imports MLflow while the stages run, and the run
only waits for what is left when its reports are ready.

What is logged is defined once, by `arecall.tracking.pipeline`: the tracker rebuilds the same
`TrackedRun` from the definition it is sent and calls the same `finish_pipeline_run` on the same
report files. The guarantees hold as in-process:

- the run is created (tags, params) as soon as the config is known, so a failed run keeps its
  config; its end is sent with the failure: FAILED, or KILLED on SIGTERM / SIGINT;
- the tracker ignores SIGINT and SIGTERM (a terminal's Ctrl-C reaches the whole process group):
  the run's process decides the status and tells it;
- if the run's process dies (kill -9) the tracker reads end-of-file and ends the run KILLED at
  once, instead of leaving it RUNNING until the next writer closes orphans;
- a store that cannot be written is reported by the run's process in the one line it would
  print in-process (`TrackingError`, or the ``warn`` line), naming where the results are.

- the run's process decides how the run ends, never the tracker: the tracker uploads, then waits
  to be told FINISHED (or KILLED, if a signal reached the run's process meanwhile); a kill -9 of
  the run's process during the upload leaves the upload to finish and the run KILLED, and
  after a FINISHED end the tracker stays until the run's process lets it go, so a signal there
  still ends the run KILLED (`arecall.tracking.ends.outcome_scope`).

The protocol is one JSON object per line: the run's process sends ``start`` (the run's
definition), ``finish`` (report paths, the vector table), ``end`` (a status; any number, the
first decides unless a later KILLED follows a FINISHED) and ``close``; the tracker answers
``finish`` with its progress steps then ``uploaded`` (or the store's error), and each ``end``
with ``ended``. End-of-input without ``close`` means the run's process died. Nothing is
unpickled or evaluated.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from arecall.tracking.ends import RunBlock, error_text, exit_promptly, finished, held_signals

__all__ = ["RemoteRun", "TrackerProcess", "spawn_tracker", "take_tracker", "wants_tracker"]

_SPAWNED: list[TrackerProcess] = []

#: Flags after which ``arecall run`` is not one plain run (Hydra's own modes, sweeps).
_NOT_A_SINGLE_RUN = frozenset(
    {"-m", "--multirun", "-h", "--help", "-hc", "--hydra-help", "-c", "--cfg", "-i", "--info",
     "--shell-completion", "-sc", "-p", "--package", "--resolve", "--run", "-r"}
)  # fmt: skip


def wants_tracker(argv: Sequence[str]) -> bool:
    """Whether ``arecall run argv`` is likely one tracked run: worth starting a tracker early.

    A guess from the raw arguments (Hydra has not composed anything yet): a wrong guess costs
    an idle process on the other core, which `take_tracker`'s caller stops. A process that has
    MLflow imported already (``arecall.cli.main`` called from Python, a test) has nothing to
    overlap: it logs in-process.

    Examples
    --------
    >>> import sys
    >>> "mlflow" in sys.modules or wants_tracker(["retriever=bm25"])
    True
    >>> wants_tracker(["tracking.enabled=false"]), wants_tracker(["-m", "retriever=tfidf,bm25"])
    (False, False)
    """
    if "mlflow" in sys.modules:
        return False
    for arg in argv:
        if arg in _NOT_A_SINGLE_RUN or arg.startswith(("--cfg=", "--package=", "hydra.mode=")):
            return False
        key, _, value = arg.replace(" ", "").partition("=")
        if key.lstrip("+") == "tracking.enabled" and value.lower() in ("false", "0", "no", "off"):
            return False
    return True


class TrackerProcess:
    """The run's side of a tracker process: spawn it, send it a run, read its answers."""

    def __init__(self, root: str | Path) -> None:
        self.started = False
        # the tracker's stderr, read only if it dies (its last line goes into the message)
        self._stderr = tempfile.TemporaryFile(prefix="arecall-tracker-")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "arecall.tracking.tracker", str(Path(root).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )

    def send(self, message: Mapping[str, Any]) -> None:
        """Send one message; a dead tracker is found out when an answer is awaited."""
        assert self.proc.stdin is not None
        self.started = True
        try:
            self.proc.stdin.write(json.dumps(message, default=str) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def answer(self) -> dict[str, Any]:
        """The tracker's next answer; ``{"error": ...}`` naming its last words if it died."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line:
            answer: dict[str, Any] = json.loads(line)
            return answer
        status = self.proc.wait()
        self._stderr.seek(0)
        last = (self._stderr.read().decode("utf-8", "replace").strip().splitlines() or [""])[-1]
        return {"error": f"the tracking process exited with status {status}: {last[:300]}"}

    def close(self) -> None:
        """Let the tracker go: at once if it was sent nothing, else once it has answered.

        An unused tracker (the run was untracked, a sweep, or refused) holds nothing: it is
        killed, not waited for while it finishes importing MLflow.
        """
        if not self.started:
            self.proc.kill()
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()


def spawn_tracker(root: str | Path = ".") -> TrackerProcess:
    """Start a tracker for this process's run (kept for `take_tracker`); return it.

    Examples
    --------
    >>> tracker = spawn_tracker()
    >>> take_tracker() is tracker
    True
    >>> tracker.close()
    """
    tracker = TrackerProcess(root)
    _SPAWNED.append(tracker)
    return tracker


def take_tracker() -> TrackerProcess | None:
    """The tracker `spawn_tracker` started for this run, if any (once: the caller owns it)."""
    return _SPAWNED.pop() if _SPAWNED else None


class RemoteRun(RunBlock):
    """A `TrackedRun` driven through a tracker process: same definition, same ends.

    ``run`` is the not-yet-started `TrackedRun` (`pipeline_run` made it here, with this process's
    command line and git state); only its definition travels. The tracker uploads; this process,
    which receives the signals, decides how the run ends and tells it (`end`); a run ended
    FINISHED keeps its tracker until `release`, so a signal that comes later can still end it
    KILLED (`relabel`).
    """

    def __init__(self, tracker: TrackerProcess, run: Any) -> None:
        self.tracker, self.run = tracker, run
        #: the runs the tracker logged nested in this one, by name (the vector experiment's)
        self.nested: dict[str, str | None] = {}
        self._open = False
        self._status: str | None = None

    def start(self) -> None:
        """Send the run's definition; the tracker creates it while the stages run."""
        run = self.run
        definition = {
            "uri": run.uri,
            "experiment": run.experiment,
            "run_name": run.run_name,
            "tags": run.tags,
            "params": run.params,
            "results": list(run.results) if run.results else None,
            "on_error": run.on_error,
            "start_time": run.start_time,
            "experiment_tags": run.experiment_tags,
        }
        self.tracker.send({"op": "start", "run": definition})
        self._open = True

    def _until(self, *keys: str, bar: Any = None) -> dict[str, Any]:
        """The tracker's next answer holding one of ``keys`` (or ``error``: it died), skipping
        its progress (drawn on ``bar``) and answers to messages this process no longer awaits."""
        while True:
            answer = self.tracker.answer()
            if "step" in answer and bar is not None:
                bar.update(1)
            if "error" in answer or any(key in answer for key in keys):
                return answer

    def finish(
        self,
        reports: Mapping[str, Path],
        *,
        vector: Any,
        rank_info: Path | None,
        config: Mapping[str, Any] | None = None,
        corpus: Path | None = None,
        end_time: int | None = None,
        vector_times: tuple[int, int] | None = None,
    ) -> Any:
        """Log the reports and end the run FINISHED; the run id (None: store failed, ``warn``).

        The arguments are `finish_pipeline_run`'s; the ids of the runs the tracker then nests in
        this one (the vector experiment's) are in ``self.nested``. Raises `TrackingError` with
        the tracker's one line when the store could not be written and ``on_error`` is ``fail``.
        """
        from arecall.tracking.run import upload_bar
        from arecall.tracking.store import TrackingError

        table = None
        if vector is not None:
            table = {**vector.to_dict(orient="split"), "attrs": dict(vector.attrs)}
        self.tracker.send(
            {
                "op": "finish",
                "reports": {name: str(path) for name, path in reports.items()},
                "vector": table,
                "rank_info": str(rank_info) if rank_info is not None else None,
                "config": config,
                "corpus": str(corpus) if corpus is not None else None,
                "end_time": end_time,
                "vector_times": list(vector_times) if vector_times else None,
            }
        )
        with upload_bar() as bar:
            answer = self._until("uploaded", "warning", bar=bar)
            if "uploaded" in answer:
                with held_signals():  # the FINISHED end and this process's knowledge of it
                    self.tracker.send({"op": "end", "status": "FINISHED", "error": None})
                    ended = self._until("ended")
                    if ended.get("ended") == "FINISHED":
                        self._status = "FINISHED"
                        finished(self)
                    self.nested = dict(ended.get("nested") or {})
                answer = {**ended, "uploaded": answer["uploaded"]}
                bar.update(1)
        if "warning" not in answer and "error" not in answer:
            return answer.get("uploaded")
        self._close()
        if "error" in answer:
            raise TrackingError(answer["error"])
        print(f"arecall: warning: {answer['warning']}", file=sys.stderr)
        return None

    def end(self, status: str, error: BaseException | str | None = None) -> None:
        """End the run with ``status`` (and the error as its tag); wait for the tracker.

        A run ended FINISHED already is ended KILLED again by a KILLED end (`relabel`).
        """
        if not self._open:
            return
        text = error_text(error) if error is not None else None
        if self._status == "FINISHED":
            if status == "KILLED":
                self.relabel(status, text or "interrupted as it was ended")
            return
        self.tracker.send({"op": "end", "status": status, "error": text})
        self._until("ended")
        self._status = status
        self._close()

    def relabel(self, status: str, error: str) -> None:
        """End KILLED a run this process ended FINISHED (a signal came after); wait for it."""
        if not self._open or self._status != "FINISHED":
            return
        self._status = status
        self.tracker.send({"op": "end", "status": status, "error": error})
        self._until("ended")

    def release(self) -> None:
        """Let the tracker go: the run's status is final."""
        self._close()

    def _close(self) -> None:
        if self._open:
            self._open = False
            self.tracker.send({"op": "close"})
        self.tracker.close()


# -- the tracker's side ----------------------------------------------------------------------------


def _prewarm(uri: str) -> None:
    """Import what writing to ``uri`` needs, without touching the store (it may never be used)."""
    import mlflow

    if uri.startswith("sqlite:"):
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
        from sqlalchemy.orm import configure_mappers

        configure_mappers()
    import arecall.tracking.pipeline  # noqa: F401


def _serve(requests: IO[str], answers: IO[str], root: str) -> int:
    """Read the run's messages and act on them with one `TrackedRun` (the tracker's loop)."""
    from arecall.tracking.store import TrackingError, tracking_uri

    _prewarm(tracking_uri(root))
    from arecall.tracking.pipeline import finish_pipeline_run, log_nested_runs
    from arecall.tracking.run import TrackedRun

    def answer(message: Mapping[str, Any]) -> None:
        """Tell the run's process; if it died, carry on: end-of-input will say so."""
        try:
            answers.write(json.dumps(message) + "\n")
            answers.flush()
        except (BrokenPipeError, OSError):
            pass

    run: TrackedRun | None = None
    ending: dict[str, Any] = {}
    reports: dict[str, Path] = {}
    for line in requests:
        message = json.loads(line)
        op = message.get("op")
        if op == "start":
            d = message["run"]
            run = TrackedRun(  # its tags carry the run's process's pid: the run's owner
                d["uri"],
                d["experiment"],
                run_name=d["run_name"],
                tags=d["tags"],
                params=d["params"],
                results=tuple(d["results"]) if d["results"] else None,
                on_error="fail",  # the run's process reports it: a warning or an error
                start_time=d.get("start_time"),
                experiment_tags=d.get("experiment_tags"),
            )
            run.start()
        elif op == "finish" and run is not None:
            vector = None
            if message["vector"] is not None:
                import pandas as pd

                table = message["vector"]
                vector = pd.DataFrame(table["data"], columns=table["columns"])
                vector.attrs.update(table["attrs"])
            reports = {name: Path(path) for name, path in message["reports"].items()}
            rank_info = Path(message["rank_info"]) if message["rank_info"] else None
            times = message.get("vector_times")
            # what the FINISHED end needs: its time, and the runs to nest in the run then
            ending = {
                "end_time": message.get("end_time"),
                "config": message.get("config"),
                "vector": vector,
                "times": (times[0], times[1]) if times else None,
            }

            def step(name: str) -> None:
                answer({"step": name})

            run_id = finish_pipeline_run(
                run,
                reports,
                config=message.get("config"),
                corpus=Path(message["corpus"]) if message.get("corpus") else None,
                vector=vector,
                rank_info=rank_info,
                end_time=message.get("end_time"),
                progress=step,
                end=False,
            )
            if run_id is not None:  # the run's process decides how it ends, and says so
                answer({"uploaded": run_id})
                continue
            try:
                run.report_failure()  # ended FAILED by the upload, if the store took it
            except TrackingError as exc:
                answer({"warning" if d["on_error"] == "warn" else "error": str(exc)})
            return 0
        elif op == "end":
            reply: dict[str, Any] = {"ended": message["status"]}
            if run is not None:
                finishing = message["status"] == "FINISHED"
                when = ending.get("end_time") if finishing else None
                run.end(message["status"], message["error"], end_time=when)
                try:
                    if finishing:
                        run.report_failure()  # the store refused the end: FAILED, said once
                    if run.status == "FINISHED" and finishing:
                        log_nested_runs(
                            run,
                            reports,
                            config=ending["config"],
                            vector=ending["vector"],
                            times=ending["times"],
                        )
                        reply["nested"] = run.nested
                except TrackingError as exc:
                    reply = {
                        "ended": run.status,
                        "warning" if d["on_error"] == "warn" else "error": str(exc),
                    }
            answer(reply)
        elif op == "close":
            return 0
    if run is not None and run.status == "FINISHED":  # end of input, no close: killed (-9)
        run.relabel("KILLED", "the run's process died after its results were logged")
    elif run is not None:
        run.end("KILLED", "the run's process died before it ended the run")
    return 0


def main(argv: Sequence[str]) -> int:
    """``python -m arecall.tracking.tracker ROOT``: serve one run's logging, then exit."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a library's print can't break the protocol
    status = _serve(sys.stdin, answers, argv[0] if argv else ".")
    with contextlib.suppress(OSError):
        answers.flush()
    exit_promptly(status)  # the work is committed; skip the interpreter's slow teardown


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
