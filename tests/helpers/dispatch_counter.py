"""Test helpers shared by the loop tests."""
from depthdelusion.train import loop


def count_dispatches(monkeypatch) -> list[int]:
    """Wrap the trainer's two compiled steps so every dispatch is counted; returns the one-element
    counter (``counter[0]`` = train steps dispatched so far)."""
    dispatched = [0]

    def counting(step_fn):
        def dispatch(state, tokens):
            dispatched[0] += 1
            return step_fn(state, tokens)
        return dispatch

    build = loop.build_trainer
    monkeypatch.setattr(loop, "build_trainer", lambda c, mesh: (lambda t: t._replace(
        step=counting(t.step), step_with_layer_stats=counting(t.step_with_layer_stats)))(build(c, mesh)))
    return dispatched
