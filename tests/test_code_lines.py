"""The lab stays a lab: at most 5,400 code lines (issue 29), the library's own count aside."""

from _code_lines import code_lines, lab


def test_the_counter_skips_docstrings_comments_and_blank_lines():
    source = '"""Module."""\n\n# a comment\ndef f(x):\n    """Doc."""\n    return (x +\n            1)  # two lines\n'
    assert code_lines(source) == 3


def test_the_lab_holds_at_most_5400_code_lines():
    assert lab() <= 5400
