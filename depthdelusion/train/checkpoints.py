"""Checkpoints: orbax (async) for the train state, grain's per-process JSON for the data iterator.

DIR/checkpoints/<step>/state   parameters, optimizer state and step, one array per leaf, saved
                               as shards by every process; restored onto any mesh (resharding)
DIR/checkpoints/<step>/data    process_<i>-of-<n>.json: each process's iterator state

The step is stateless apart from these: there is no dropout, so no training RNG to carry; the
init key comes from `train.seed` and the data order from `data.seed` plus the iterator state.

A checkpoint killed mid-save never becomes a step directory (orbax writes to a temporary
directory and renames it when complete); such leftovers are reported, never deleted. A step
that fails to restore (corrupted on disk) is renamed `<step>.unreadable` and the previous one is
tried, with a warning naming the bad step.
"""
from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import signal
import threading
import time
import urllib.request
import warnings
from typing import Any

import grain
import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from jax.sharding import NamedSharding


@contextlib.contextmanager
def _reads_settled_on_error():
    """Orbax runs a restore's reads on a fresh event loop that it closes as soon as the first
    read fails (asyncio_utils._run_sync_via_new_loop: run_until_complete, then close), leaving
    the other reads pending: each then reports "Event loop is closed" from TensorStore's thread
    and "Task exception was never retrieved", dozens of tracebacks for one damaged checkpoint.
    Within this block a failed run cancels the loop's remaining tasks and waits for them before
    the loop closes, as asyncio.run does; the error raised is the same. (Orbax's private
    function, replaced for the block's duration only; an orbax without that module or
    function is left as it is.)"""
    try:
        from orbax.checkpoint._src import asyncio_utils
    except ImportError:  # another orbax layout: restore as it does (the noise may come back)
        asyncio_utils = None
    original = getattr(asyncio_utils, "_run_sync_via_new_loop", None)
    if original is None:
        yield
        return

    def run_settled(coro):
        loop = asyncio.new_event_loop()
        try:
            asyncio.set_event_loop(loop)
            return loop.run_until_complete(coro)
        except BaseException:
            pending = asyncio.all_tasks(loop)  # this thread owns the loop, which has stopped
            for task in pending:
                task.cancel()
            # their errors are the one being raised, or its consequences: gathered, not raised
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            raise
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    asyncio_utils._run_sync_via_new_loop = run_settled
    try:
        yield
    finally:
        asyncio_utils._run_sync_via_new_loop = original


class FrozenIteratorState(grain.DatasetIterator):
    """The data iterator's state at save time: orbax may write it after the loop moved on."""

    def __init__(self, state: dict):
        super().__init__()
        self._state = copy.deepcopy(state)

    def __next__(self):
        raise TypeError("a frozen iterator state cannot be iterated")

    def get_state(self) -> dict:
        return self._state

    def set_state(self, state: dict) -> None:
        raise TypeError("a frozen iterator state cannot be restored into")


def flatten_state(state: Any) -> dict[str, Any]:
    """{"<path>": array} for every leaf: a plain mapping orbax saves without knowing our types."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(state)
    return {jax.tree_util.keystr(path): leaf for path, leaf in leaves}


def abstract_flat_state(abstract_state: Any, state_sharding: Any) -> tuple[dict[str, Any], Any]:
    """ShapeDtypeStructs with this mesh's shardings (the restore target), and the treedef.

    `state_sharding` is a tree prefix of the state: each NamedSharding covers a whole subtree
    (a Variable's value, or a leafless optax MaskedNode)."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(abstract_state)
    per_leaf = jax.tree.map(lambda sharding, subtree: jax.tree.map(lambda _: sharding, subtree),
                            state_sharding, abstract_state)
    shardings = jax.tree.leaves(per_leaf, is_leaf=lambda x: isinstance(x, NamedSharding))
    flat = {
        jax.tree_util.keystr(path): jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)
        for (path, leaf), sharding in zip(leaves, shardings)
    }
    return flat, treedef


def absolute(directory: epath.PathLike) -> epath.Path:
    """The directory orbax is given: a local path made absolute (orbax requires it), a remote
    one (gs://...) as it is -- `.absolute()` on it would prefix the working directory."""
    path = epath.Path(directory)
    return path if "://" in str(directory) else path.absolute()


class CheckpointSaveError(RuntimeError):
    """A checkpoint could not be written (a storage error the client's retries did not clear)."""


class Checkpointer:
    """Saves every `every_steps` steps and/or `every_minutes` minutes, keeps the last `keep`."""

    def __init__(self, directory: epath.PathLike, every_steps: int = 0, every_minutes: float = 0.0,
                 keep: int = 3):
        self.directory = absolute(directory)
        self.every_steps, self.every_minutes, self.keep = every_steps, every_minutes, keep
        self._last_save_time = time.monotonic()
        self._pending: int | None = None  # the step of a save that may still be running
        self.manager = self._open()

    def _open(self) -> ocp.CheckpointManager:
        return ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=self.keep, create=True, enable_async_checkpointing=True,
                cleanup_tmp_directories=False,  # a half-written save is evidence: keep it
            ),
        )

    def due_by_steps(self, step: int) -> bool:
        return self.every_steps > 0 and step % self.every_steps == 0

    def due_by_time(self) -> bool:
        """This host's clock only: with several processes the loop makes them agree first."""
        return self.every_minutes > 0 and time.monotonic() - self._last_save_time >= 60 * self.every_minutes

    def save(self, step: int, state: Any, data_state: dict) -> None:
        """Starts an async save; the arrays are copied before this returns, so training goes on.
        A save that fails (here, or in the background: raised by the next save or `wait`) is a
        CheckpointSaveError naming its step and the checkpoint a re-run resumes from."""
        if step in self.manager.all_steps():
            return
        self.wait()  # the previous save's error, if any, under its own step
        try:
            self.manager.save(step, args=ocp.args.Composite(
                state=ocp.args.StandardSave(flatten_state(state)),
                data=grain.checkpoint.CheckpointSave(FrozenIteratorState(data_state)),
            ), force=True)
        except Exception as err:
            raise self._save_failed(step, err) from err
        self._pending = step
        self._last_save_time = time.monotonic()

    def wait(self) -> None:
        step, self._pending = self._pending, None
        try:
            self.manager.wait_until_finished()
        except Exception as err:
            if step is None:
                raise
            raise self._save_failed(step, err) from err

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.manager.close()

    def _save_failed(self, step: int, err: Exception) -> CheckpointSaveError:
        kept = [s for s in self.manager.all_steps() if s < step]
        resume = (f"the checkpoint at step {max(kept)} is untouched and a re-run of the same command "
                  "resumes from it") if kept else "there is no earlier checkpoint: a re-run starts over"
        return CheckpointSaveError(
            f"saving the checkpoint at step {step} to {self.directory} failed after the storage "
            f"client's retries ({type(err).__name__}: {err}); {resume}")

    def incomplete_saves(self) -> list[str]:
        """Leftovers of saves that were killed before they completed."""
        if not self.directory.exists():
            return []
        return sorted(p.name for p in self.directory.iterdir() if ".orbax-checkpoint-tmp" in p.name)

    def unreadable(self) -> list[str]:
        """Steps set aside by an earlier restore as `<step>.unreadable`."""
        if not self.directory.exists():
            return []
        return sorted(p.name for p in self.directory.iterdir() if p.name.endswith(".unreadable"))

    def restore_latest(self, abstract_state: Any, state_sharding: Any, data_iterator) -> tuple[int, Any] | None:
        """Restore the newest readable checkpoint onto the current mesh: (step, state), with the
        data iterator set to its saved position. None if there is no checkpoint at all; a
        ValueError if there are checkpoints and none is readable (nothing is deleted)."""
        for leftover in self.incomplete_saves():
            warnings.warn(f"{self.directory / leftover}: an incomplete save (the process was killed "
                          "while writing it); ignored and left in place", stacklevel=2)
        steps = sorted(self.manager.all_steps(), reverse=True)
        if not steps:
            set_aside = self.unreadable()
            if set_aside:  # starting over here would mix a new run's losses into the old records
                raise ValueError(
                    f"no usable checkpoint in {self.directory}: {', '.join(set_aside)} were found "
                    "unreadable earlier and set aside. Nothing was deleted; start a new run directory, "
                    "or repair a checkpoint and rename it back to its step number")
            return None
        target, treedef = abstract_flat_state(abstract_state, state_sharding)
        errors = []
        for step in steps:
            try:
                with _reads_settled_on_error():
                    restored = self.manager.restore(step, args=ocp.args.Composite(
                        state=ocp.args.StandardRestore(target),
                        data=grain.checkpoint.CheckpointRestore(data_iterator),
                    ))
            except Exception as err:  # orbax/tensorstore raise many types for damaged files
                errors.append(f"step {step}: {type(err).__name__}: {str(err)[:200]}")
                warnings.warn(f"checkpoint at step {step} in {self.directory} is unreadable "
                              f"({type(err).__name__}); trying the previous one", stacklevel=2)
                self._set_aside(step)
                continue
            state = jax.tree_util.tree_unflatten(treedef, [restored["state"][k] for k in target])
            return step, state
        raise ValueError(
            f"no usable checkpoint in {self.directory}: " + "; ".join(errors)
            + ". Nothing was deleted; start a new run directory or repair the checkpoints"
        )

    def _set_aside(self, step: int) -> None:
        """Rename an unreadable step so new saves never rotate good ones out in its favour."""
        if jax.process_index() == 0:
            path = self.directory / str(step)
            if path.exists():
                path.rename(self.directory / f"{step}.unreadable")
        self.manager.close()
        self.manager = self._open()


def _any_process(*flags: bool) -> tuple[bool, ...]:
    """Each flag is true if it is on any process (a host collective)."""
    from jax.experimental import multihost_utils

    gathered_PxF = multihost_utils.process_allgather(np.asarray(flags, np.int32))
    return tuple(bool(v) for v in np.asarray(gathered_PxF).reshape(-1, len(flags)).any(axis=0))


# Where a GCE/TPU VM's metadata server is; GCE_METADATA_HOST (host[:port]) overrides it, as for
# Google's client libraries.
METADATA_HOST = "metadata.google.internal"


def on_gce() -> bool:
    """A GCE or Cloud TPU VM, from the BIOS product name (no network), or a metadata host given."""
    if os.environ.get("GCE_METADATA_HOST"):
        return True
    try:
        with open("/sys/class/dmi/id/product_name") as fh:
            return "Google" in fh.read()
    except OSError:
        return False


class MetadataWatcher:
    """Polls the metadata server's `instance/preempted` (TRUE once a spot/preemptible VM is being
    reclaimed) and `instance/maintenance-event` (TERMINATE_ON_HOST_MAINTENANCE before a TPU VM is
    stopped for maintenance; TPU VMs do not live-migrate) in a daemon thread. `notice` is the
    first such value seen, else None; `on_notice(notice)` is called once, from the thread, when
    it is first seen. Not started off GCE: nothing is asked of the network."""

    KEYS = ("instance/preempted", "instance/maintenance-event")

    def __init__(self, interval_s: float = 5.0, host: str | None = None, on_notice=None):
        self.host = host or os.environ.get("GCE_METADATA_HOST") or METADATA_HOST
        self.interval_s, self.notice, self.on_notice = interval_s, None, on_notice
        self._stop = threading.Event()
        self._thread = None

    def start(self) -> "MetadataWatcher":
        if on_gce():
            self._thread = threading.Thread(target=self._run, name="gce-preemption-watch", daemon=True)
            self._thread.start()
        return self

    def _get(self, key: str) -> str | None:
        request = urllib.request.Request(f"http://{self.host}/computeMetadata/v1/{key}",
                                         headers={"Metadata-Flavor": "Google"})
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return response.read().decode().strip()
        except OSError:  # unreachable for a moment: asked again at the next poll
            return None

    def check(self) -> str | None:
        for key in self.KEYS:
            value = self._get(key)
            if value is not None and (value.upper() == "TRUE" or value.upper().startswith("TERMINATE")):
                self.notice = f"{key}={value}"
        return self.notice

    def _run(self) -> None:
        while not self._stop.is_set() and self.check() is None:
            self._stop.wait(self.interval_s)
        if self.notice is not None and not self._stop.is_set() and self.on_notice is not None:
            self.on_notice(self.notice)

    def stop(self) -> None:
        self._stop.set()


def jax_preemption_service() -> bool:
    """Whether JAX's preemption service runs here: several processes under jax.distributed with
    jax_enable_preemption_service on (its default). Its notifier then owns SIGTERM: a C handler
    installed by jax.distributed.initialize, which sets a flag that a thread forwards to the
    coordination service, whose sync protocol picks one step for every host."""
    if jax.process_count() < 2:
        return False
    from jax._src import distributed

    return distributed.global_state.preemption_sync_manager is not None


class SavePolicy:
    """When the loop saves: every checkpoint_every steps, every checkpoint_minutes, at the last
    step, and on a preemption notice, after which the run stops. The notices: SIGTERM (how a
    spot TPU VM is stopped) and the metadata server's preemption or maintenance notice (on a GCE
    or TPU VM, seen before the SIGTERM).

    One process: a Python SIGTERM handler sets a flag the loop reads every step, and the
    watcher's notice is read the same way.

    Several processes: the notices reach hosts at different steps; acting on them alone would
    leave one host saving or exiting while the others wait in the step's collectives. So they go
    through JAX's preemption service, as MaxText and orbax's CheckpointManager do: no Python
    handler is installed (one would replace JAX's C handler, measured with jax 0.10.2: the sync
    point then never fires), a metadata notice is handed to JAX by sending this process a
    SIGTERM, and the loop asks `multihost_utils.reached_preemption_sync_point(step)` every step,
    which is True at the same step on every host. The checkpoint clock is agreed at log steps (an
    all-gather that queues behind the step just dispatched: multi-host runs should log every few
    steps, the paper grids every 10). With the preemption service turned off
    (jax_enable_preemption_service=False) the notices are agreed at log steps too."""

    def __init__(self, checkpointer: Checkpointer, last_step: int, metadata_interval_s: float = 5.0):
        self.checkpointer, self.last_step = checkpointer, last_step
        self.sigterm = False
        self._previous_handler = None
        self._installed = False
        self.jax_owns_sigterm = jax_preemption_service()
        self.watcher = MetadataWatcher(metadata_interval_s,
                                       on_notice=self._to_jax if self.jax_owns_sigterm else None)

    def __enter__(self) -> "SavePolicy":
        if not self.jax_owns_sigterm:
            try:
                self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
                self._installed = True
            except ValueError:  # not the main thread: leave signals alone
                pass
        self.watcher.start()
        return self

    def _on_sigterm(self, signum, frame) -> None:
        self.sigterm = True

    @staticmethod
    def _to_jax(notice: str) -> None:
        """A metadata notice into JAX's preemption service, by the one door its notifier has."""
        os.kill(os.getpid(), signal.SIGTERM)

    def __exit__(self, *exc) -> None:
        self.watcher.stop()
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous_handler)

    @property
    def reason(self) -> str:
        """What stopped the run, for its log."""
        if self.sigterm:
            return "SIGTERM"
        if self.watcher.notice is not None:
            return f"preemption notice ({self.watcher.notice})"
        return "preemption notice (JAX's preemption sync point: SIGTERM or a metadata notice on some host)"

    def due(self, step: int, log_step: bool) -> tuple[bool, bool]:
        """(save at `step`, stop after saving) -- the same answer on every process."""
        by_time, preempted = self.checkpointer.due_by_time(), self.sigterm or self.watcher.notice is not None
        if jax.process_count() > 1:
            if self.jax_owns_sigterm:  # every host asks at every step, as the sync protocol needs
                preempted = _reached_preemption_sync_point(step)
                # No clock (checkpoint_minutes = 0): nothing to agree on, no host collective.
                clock = log_step and self.checkpointer.every_minutes > 0
                by_time = _any_process(by_time)[0] if clock else False
            else:
                by_time, preempted = _any_process(by_time, preempted) if log_step else (False, False)
        save = self.checkpointer.due_by_steps(step) or by_time or preempted or step == self.last_step
        return save, preempted


def _reached_preemption_sync_point(step: int) -> bool:
    """JAX's own agreement on a preemption (False without jax.distributed or its preemption
    service)."""
    from jax.experimental import multihost_utils

    try:
        return multihost_utils.reached_preemption_sync_point(step)
    except RuntimeError:  # jax_enable_preemption_service is off
        return False
