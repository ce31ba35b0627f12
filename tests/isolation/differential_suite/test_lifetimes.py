"""Compiled objects that die: a compiled optimizer step, an nn.Module compiled inside a test,
and the tests after them that call other compiled code."""

import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x).relu()


def test_compiled_optimizer_step_lr_changes_once():
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = torch.compile(opt.step, backend="eager")
    for lr in (0.1, 0.05):
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        step()


@torch.compile(backend="eager")
def after_optimizer(x):
    return x.exp()


def test_after_optimizer_function_4_then_8():
    after_optimizer(torch.randn(4))
    after_optimizer(torch.randn(8))


def test_after_optimizer_second_optimizer_one_lr():
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = torch.compile(opt.step, backend="eager")
    model(torch.randn(3, 4)).sum().backward()
    step()


def test_nn_module_compiled_in_test_dies():
    model = torch.compile(Tiny(), backend="eager")
    model(torch.randn(4, 4))
    model(torch.randn(4, 4))


@torch.compile(backend="eager")
def after_dead_module(x):
    return x.tanh()


def test_after_dead_module_function_4_then_8():
    after_dead_module(torch.randn(4))
    after_dead_module(torch.randn(8))


def test_after_dead_module_fresh_instance_one_shape():
    model = torch.compile(Tiny(), backend="eager")
    model(torch.randn(4, 4))


def test_two_instances_of_one_module_class():
    first = torch.compile(Tiny(), backend="eager")
    second = torch.compile(Tiny(), backend="eager")
    first(torch.randn(4, 4))
    second(torch.randn(4, 4))
