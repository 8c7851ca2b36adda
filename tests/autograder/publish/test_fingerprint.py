"""autograder.publish.fingerprint: what the structure of a student's code keeps and what it drops."""
from __future__ import annotations

import ast
import re

from autograder.publish.fingerprint import normalised

CODE = '''
import torch


def split_heads(x, num_heads):
    """Split the last axis into heads."""
    batch, length, width = x.shape
    out = x.view(batch, length, num_heads, width // num_heads)
    return out.transpose(1, 2)


class Scaler(torch.nn.Module):
    factor = 2

    def forward(self, values, scale=None):
        scores = values * self.factor
        self.calls = 1
        return torch.softmax(scores, dim=-1)
'''


def test_no_op_statements_are_dropped():
    noisy = CODE.replace("    batch, length", "    _v1 = 1\n    17\n    x.shape\n    pass\n    batch, length")
    noisy = noisy.replace("    return out", "    _v2 = _v1 + 1\n    _v3: int = 3\n    return out")
    noisy += "\n_v4 = 'module level'\n"
    assert noisy != CODE
    assert normalised(noisy) == normalised(CODE)


def test_renamed_names_give_the_same_structure():
    renamed = CODE
    for old, new in {"batch": "b", "length": "t", "width": "d", "out": "y", "num_heads": "h", "values": "v",
                     "scores": "logits", "scale": "s", "x": "inp"}.items():
        renamed = re.sub(rf"\b{old}\b", new, renamed)
    assert renamed != CODE
    assert normalised(renamed) == normalised(CODE)


def test_what_does_something_is_kept():
    text = normalised(CODE + "\nunused = torch.manual_seed(0)\nprint('hello')\n")
    assert "torch.manual_seed(0)" in text and "print('hello')" in text  # calls may have effects
    assert "factor = 2" in text  # a class attribute is read as an attribute
    assert "v0.calls = 1" in text  # an attribute assignment changes an object
    assert ".view(" in text and ".transpose(1, 2)" in text and "torch.softmax" in text  # the API stays
    assert "def split_heads(" in text and "class Scaler(" in text
    assert "Split the last axis" not in text  # docstrings go
    assert "num_heads" not in text and "width" not in text  # the code's own names are canonical


def test_a_different_computation_differs():
    other = CODE.replace("out.transpose(1, 2)", "out.permute(0, 2, 1, 3)")
    assert normalised(other) != normalised(CODE)


def test_what_does_not_parse_is_left_out():
    text = normalised("%matplotlib inline\n!pip list\n" + CODE + "\ndef broken(:\n    return 1\n\nafter = 1\nprint(after)\n")
    assert "split_heads" in text and "broken" not in text and "print(v" in text
    ast.parse(text)
    assert normalised("this is not python at all (") == ""
    assert normalised("") == ""


def test_code_nested_too_deeply_gives_nothing_rather_than_an_error():
    """A submission controls its code: 20,000 terms of one sum exhaust the recursion of any tree walk."""
    deep = "x = " + "+".join(["1"] * 20_000) + "\nprint(x)\n"
    assert normalised(deep) == ""
    assert normalised(CODE) != ""  # and the interpreter is still fine afterwards
