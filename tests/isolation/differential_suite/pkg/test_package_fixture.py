import torch


def test_package_fixture_module_same_shape(package_gate):
    package_gate(torch.randn(2, 3))


def test_package_fixture_module_other_batch(package_gate):
    package_gate(torch.randn(5, 3))


def test_package_test_uses_session_fixture_other_shape(session_warm_norm):
    session_warm_norm(torch.randn(4, 7))
