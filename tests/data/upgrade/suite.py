import torch


@torch.compiler.nested_compile_region
def block(x, weight):
    return torch.nn.functional.gelu(x @ weight) + x


class Stack(torch.nn.Module):
    def __init__(self, layers=4, width=16):
        super().__init__()
        self.weights = torch.nn.ParameterList(
            torch.nn.Parameter(torch.randn(width, width)) for _ in range(layers)
        )
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        for weight in self.weights:
            x = block(x, weight)
        return self.norm(x).softmax(-1)


def test_stack():
    torch.manual_seed(0)
    model = torch.compile(Stack())
    with torch.no_grad():
        model(torch.randn(4, 16))


@torch.compile
def step(x, scale):
    y = torch.nn.functional.silu(x) * scale
    if y.sum() > 0:
        return y.cumsum(0)
    return y.flip(0)


def test_step():
    step(torch.ones(8), 2.0)
