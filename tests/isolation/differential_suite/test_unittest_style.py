"""unittest.TestCase with a setUpClass warm-up, and torch's own Dynamo TestCase (which
resets in setUp and tearDown)."""

import unittest

import torch
from torch._dynamo.test_case import TestCase as DynamoTestCase


def softsign(x):
    return x / (1 + x.abs())


class TestSetUpClassWarmUp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compiled = staticmethod(torch.compile(softsign, backend="eager"))
        cls.compiled(torch.randn(2, 2))
        cls.compiled(torch.randn(2, 2, dtype=torch.float64))  # setUpClass's own recompile

    def test_setupclass_warm_shape(self):
        self.compiled(torch.randn(2, 2))

    def test_setupclass_batch_3(self):
        self.compiled(torch.randn(3, 2))


@torch.compile(backend="eager")
def dynamo_case_fn(x):
    return x.abs() + 1


class TestTorchDynamoTestCase(DynamoTestCase):
    def test_dynamo_test_case_4_then_8(self):
        dynamo_case_fn(torch.randn(4))
        dynamo_case_fn(torch.randn(8))

    def test_dynamo_test_case_one_shape(self):
        dynamo_case_fn(torch.randn(4))
