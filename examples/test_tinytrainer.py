"""Run with the gate: pytest examples --recompile-budget

test_train_with_python_step_counter fails at its second step, naming the guard
G['global_step'] == 0; the fixed loop passes with one compile for all steps.
"""

from tinytrainer import train


def test_train_with_python_step_counter():
    losses = train(10, fixed=False)
    assert len(losses) == 10


def test_train_with_tensor_step_counter():
    losses = train(10, fixed=True)
    assert losses[-1] < losses[0]
