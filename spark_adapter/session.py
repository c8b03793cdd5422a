"""SparkSession factory: local[N], local-cluster[n,c,m] or a standalone master, loopback only.

Every Spark listener binds to 127.0.0.1: ``SPARK_LOCAL_IP`` is set before the JVM starts
(without it the web UI binds to all interfaces), and ``spark.driver.host`` /
``spark.driver.bindAddress`` are set explicitly. Executors run this interpreter
(``PYSPARK_PYTHON``), so they find pandas and pyarrow. ANSI mode stays on.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_adapter.interrupt import asked, reclaim_sigint, sigint_held, stop_if_asked

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "LOOPBACK",
    "MASTERS",
    "SLOWDOWN_KEY",
    "TEST_CONF",
    "MasterRefused",
    "jvm_log_level",
    "jvm_lost",
    "jvm_popen_kwargs",
    "make_session",
    "master_problem",
    "slowdown_conf",
]

LOOPBACK = "127.0.0.1"

TEST_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # fast failover: a reducer fetching from a dead executor retries quickly instead of
    # waiting 3 x 5 s before the stage is resubmitted (measured with kill -9 on local-cluster)
    "spark.shuffle.io.retryWait": "200ms",
    "spark.shuffle.io.maxRetries": "2",
    "spark.locality.wait": "0s",
    # a bounded UI store: a long-running driver (and a test session that ran hundreds of
    # batches) keeps its REST API fast and its memory flat
    "spark.ui.retainedJobs": "200",
    "spark.ui.retainedStages": "200",
    "spark.ui.retainedTasks": "2000",
    "spark.sql.ui.retainedExecutions": "50",
}


SLOWDOWN_KEY = "spark.executorEnv.TRIMTAB_EXECUTOR_SLOWDOWN"


def slowdown_conf(slowdowns: dict[str, float]) -> dict[str, str]:
    """Session settings that make executor ``id`` spend ``factor`` times the operators' CPU
    cost (``spark_adapter.operators.executor_slowdown``); empty for no slowdowns.

    Examples
    --------
    >>> slowdown_conf({"0": 3.0, "1": 1.0})
    {'spark.executorEnv.TRIMTAB_EXECUTOR_SLOWDOWN': '0:3.0,1:1.0'}
    """
    if not slowdowns:
        return {}
    spec = ",".join(f"{k}:{float(v)}" for k, v in sorted(slowdowns.items()))
    return {SLOWDOWN_KEY: spec}


# the driver JVM's logging: Spark's defaults at WARN, without the banner of its fallback on them
LOG4J2 = Path(__file__).with_name("log4j2.properties")
STANDALONE_EXECUTOR_MEMORY = "512m"  # spark.executor.memory on spark:// masters, unless set
MASTERS = "local, local[N], local[*], local-cluster[W,C,MB] or spark://127.0.0.1:PORT"
_LOCAL = re.compile(r"local(\[(\*|[1-9]\d*)\])?")
_CLUSTER = re.compile(r"local-cluster\[([1-9]\d*),\s*([1-9]\d*),\s*([1-9]\d*)\]")
_STANDALONE = re.compile(r"spark://(127\.0\.0\.1|localhost):(\d{1,5})")


def master_problem(master: str) -> str | None:
    """Why ``master`` is not one trimtab runs on (None: it is): the local masters, or a
    standalone master on this machine (trimtab talks to 127.0.0.1 only).

    >>> [master_problem(m) for m in ("local[2]", "local-cluster[2,1,1024]", "spark://127.0.0.1:7077")]
    [None, None, None]
    >>> master_problem("spark://10.0.0.1:7077")
    "'spark://10.0.0.1:7077' is not local, local[N], local[*], local-cluster[W,C,MB] or spark://127.0.0.1:PORT (trimtab talks to 127.0.0.1 only)"
    >>> master_problem("local[0]") is not None, master_problem("spark://localhost:70000") is not None
    (True, True)
    """
    m = _STANDALONE.fullmatch(master)
    if _LOCAL.fullmatch(master) or _CLUSTER.fullmatch(master) or (m and 0 < int(m[2]) < 65536):
        return None
    return f"{master!r} is not {MASTERS} (trimtab talks to 127.0.0.1 only)"


def make_session(
    master: str = "local[2]", app: str = "trimtab", conf: dict[str, str] | None = None
) -> SparkSession:
    """A SparkSession on ``master`` with loopback-only networking and quiet logs; a master
    ``master_problem`` refuses raises ValueError before the JVM starts."""
    if problem := master_problem(master):
        raise ValueError(f"master: {problem}")
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # must precede the JVM start
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    opts = {
        "spark.master": master,
        "spark.app.name": app,
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.showConsoleProgress": "false",
        "spark.executorEnv.PYSPARK_PYTHON": os.environ["PYSPARK_PYTHON"],
        "spark.executorEnv.SPARK_LOCAL_IP": LOOPBACK,
    }
    m = re.match(r"local-cluster\[(\d+),\s*(\d+),\s*(\d+)\]", master)
    if m and "spark.executor.memory" not in (conf or {}):
        # an executor must fit its worker: leave a quarter of the worker's memory spare
        opts["spark.executor.memory"] = f"{int(m.group(3)) * 3 // 4}m"
    standalone = master.startswith("spark://")
    if standalone and "spark.executor.memory" not in (conf or {}):
        # Spark's default (1g) does not fit a worker started with less; trimtab's tasks are
        # small pandas partitions
        opts["spark.executor.memory"] = STANDALONE_EXECUTOR_MEMORY
    opts = _logging_config({**opts, **TEST_CONF, **(conf or {})})
    with sigint_held():  # Ctrl-C while the JVM starts: the session is stopped, one line
        # the context first: PySpark sets its own SIGINT handler as the context comes up
        # (cancel every job from inside the blocked py4j call); it is taken back at once,
        # before the session's slower start (the session then finds this context)
        context = _context(SparkConf().setAll(list(opts.items())))
        reclaim_sigint()
        quiet_accumulator_eof(context)
        _quiet_after_the_jvm()
        try:
            session = SparkSession.builder.config(map=opts).getOrCreate()
            context.setLogLevel("ERROR")
            if standalone:
                _wait_for_executors(session, master)
            stop_if_asked("interrupted while Spark was starting; nothing ran")
        except Exception as e:
            given_up = standalone and context._jsc.sc().isStopped()
            context.stop()
            if given_up:  # the application client gave up on the master: a Py4J error said so
                raise MasterRefused(master) from e
            raise
        except BaseException:
            context.stop()
            raise
    return session


def _logging_config(opts: dict[str, str]) -> dict[str, str]:
    """``opts`` with the driver JVM logging with ``LOG4J2``, unless they name a log4j2
    configuration of their own."""
    java = opts.get("spark.driver.extraJavaOptions", "")
    if "log4j2.configurationFile" in java:
        return opts
    own = f"{java} -Dlog4j2.configurationFile={LOG4J2.as_uri()}".strip()  # spaces escaped
    return opts | {"spark.driver.extraJavaOptions": own}


def _context(conf: Any) -> Any:
    """The SparkContext for ``conf``; the first in this process starts Spark's JVM in a process
    group of its own (``jvm_popen_kwargs``)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is None:  # no JVM yet: PySpark would start it in ours
        return SparkContext(conf=conf, gateway=launch_gateway(conf, jvm_popen_kwargs()))
    return SparkContext.getOrCreate(conf)


def jvm_popen_kwargs() -> dict[str, Any]:
    """How Spark's JVM is started: in a process group of its own, so that a signal to this
    command's group (``timeout``, ``kill -TERM -PGID``, a job runner, a closing terminal's
    SIGHUP) reaches this process alone. It stops the run after the committed batch and stops
    Spark itself; the JVM stopped at once under the running query (a live driver said
    "ConnectionRefusedError", exit 1, its lease held for a lease's time). The JVM still ends
    with this process: it exits when its standard input (a pipe from here) closes. Not when a
    terminal's ``tostop`` is set: a background group writing to the terminal is stopped there,
    and the JVM logs to it.

    >>> jvm_popen_kwargs() in ({"process_group": 0}, {})
    True
    """
    import termios

    for fd in (1, 2):
        try:
            if termios.tcgetattr(fd)[3] & termios.TOSTOP:
                return {}
        except (termios.error, OSError):  # not a terminal
            continue
    return {"process_group": 0}


def _jvm_proc() -> Any:
    """The Popen of Spark's JVM this process started, or None (none was started, or PySpark
    runs inside ``spark-submit``, which started it)."""
    context = sys.modules.get("pyspark.core.context")
    gateway = getattr(getattr(context, "SparkContext", None), "_gateway", None)
    return getattr(gateway, "proc", None)


def _jvm_ended(wait_s: float = 0.0) -> Any:
    """The Popen of Spark's JVM this process started, once it has ended (waiting up to
    ``wait_s`` for that); else None (it runs, or none was started)."""
    proc = _jvm_proc()
    if proc is None:
        return None
    if proc.poll() is None and wait_s > 0:
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None
    return proc if proc.poll() is not None else None


def jvm_lost() -> str | None:
    """Why Spark's JVM this process started has ended, as one line, or None (it runs, or
    none was started). A JVM killed under a run (the kernel's out-of-memory killer, a
    ``kill``) surfaced as whatever py4j call came next: "ConnectionRefusedError", or a
    "Py4JError" of a DataFrame method, after py4j's traces of the lost connection."""
    if (proc := _jvm_ended()) is None:
        return None
    code = proc.returncode
    if code >= 0:
        how = f"exit code {code}"
    else:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else "?"
        oom = "; the kernel's out-of-memory killer sends it: see dmesg" if -code == 9 else ""
        how = f"killed by signal {-code} ({name}{oom})"
    return (
        f"Spark's JVM (pid {proc.pid}) ended under the run, {how}; the batches committed "
        "before it stand"
    )


LOST_WAIT_S = 2.0  # a killed JVM's sockets close as it exits: it is reaped milliseconds later


class _AfterTheJvm(logging.Filter):
    """Drops py4j's records once the JVM is gone: its traces of the lost connection (logged
    to the root logger as well as its own) only say that the JVM ended, which ``jvm_lost``
    says in one line. A record of a lost connection waits up to ``LOST_WAIT_S`` for the JVM
    to be seen ended: a killed JVM resets its connection before it is reaped, and the trace
    of that reset reached the terminal in one CI run of several."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not (record.name.startswith("py4j") or "py4j" in record.pathname):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        lost = isinstance(exc, OSError) or type(exc).__name__ == "Py4JNetworkError"
        return _jvm_ended(LOST_WAIT_S if lost else 0.0) is None


def _quiet_after_the_jvm() -> None:
    """``_AfterTheJvm`` on the loggers py4j writes to (once each)."""
    for name in ("", "py4j.clientserver", "py4j.java_gateway"):
        log = logging.getLogger(name)
        if not any(isinstance(f, _AfterTheJvm) for f in log.filters):
            log.addFilter(_AfterTheJvm())


def quiet_accumulator_eof(context: Any) -> None:
    """PySpark's accumulator server printed a traceback (``EOFError`` in ``read_int``) when
    the JVM closed its connection while a stopping driver or replay shut the context down:
    the end of that connection is not an error. Any other error still prints."""
    server = getattr(context, "_accumulatorServer", None)
    if server is None:
        return
    default = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], EOFError):
            default(request, client_address)

    server.handle_error = handle_error


class MasterRefused(RuntimeError):
    """A standalone master that never took the application: Spark's client retries for about
    a minute, then stops the context, and creating the session fails with "Cannot call
    methods on a stopped SparkContext". ``master_probe`` names anything else before Spark
    starts; what reaches this is a Spark RPC server that said a master runs there but never
    answered the registration (a standby master, one of a highly available pair waiting for
    its leader, ignores it), or one that could not read the probe's question (another Spark
    version's). Exit 3, as for an environment not ready."""

    exit_code = 3

    def __init__(self, master: str) -> None:
        super().__init__(
            f"environment not ready: --master: {master} did not take the application "
            "(Spark's client gave up after about a minute): a Spark RPC server answers there but "
            "never registered it (a standby master waits for its leader, and a Spark of another "
            "version cannot read this one's requests; the server's log says why)"
        )


def _wait_for_executors(session: SparkSession, master: str, timeout_s: float = 60.0) -> None:
    """A standalone application that gets no executor waits forever: fail with the reason."""
    import time

    sc = session.sparkContext
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sc._jsc.sc().getExecutorMemoryStatus().size() > 1:  # the driver counts as one
            return
        if asked():  # a Ctrl-C while waiting: the caller stops the session
            return
        time.sleep(0.5)
    mem = sc.getConf().get("spark.executor.memory", "1g")
    session.stop()
    raise RuntimeError(
        f"{master}: no executor started within {timeout_s:.0f} s; do its workers have "
        f"spark.executor.memory={mem} free (trimtab cluster up --memory)?"
    )


def jvm_log_level(spark: SparkSession, logger: str, level: str) -> str:
    """Set a JVM (log4j) logger's level, e.g. ``OFF`` for a query failure trimtab reports in
    its own words; returns the level it had, to restore."""
    log4j = spark._jvm.org.apache.logging.log4j  # type: ignore[union-attr]
    before = str(log4j.LogManager.getLogger(logger).getLevel().name())
    log4j.core.config.Configurator.setLevel(logger, log4j.Level.getLevel(level))
    return before
