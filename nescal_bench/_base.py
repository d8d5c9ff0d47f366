"""The lab's errors and warnings, its name rule, and the one reader of pydantic's errors.

Configurations, saved runs and records are read with pydantic types; the first error of
a :class:`pydantic.ValidationError` becomes a message that starts with the path of the
bad key (``datasets[0].local``), then says what was wrong and what was found.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import AfterValidator, TypeAdapter, ValidationError


class ConfigError(ValueError):
    """An invalid benchmark configuration; ``path`` is the bad key (``""`` for the file).

    Examples
    --------
    >>> from nescal_bench import ConfigError
    >>> str(ConfigError("budget.max_epochs", "input should be greater than or equal to 1, got 0"))
    'budget.max_epochs: input should be greater than or equal to 1, got 0'
    """

    def __init__(self, path: str, message: str) -> None:
        self.path, self.message = path, message
        super().__init__(f"{path}: {message}" if path else message)


class RunError(RuntimeError):
    """A run (or a read of a results folder) that cannot go on: an output directory that
    holds records without resume, is in use by another run or cannot be written, a
    symbolic link where the runner writes, an unreadable ``config.json`` (``nescal-bench``
    exits 2)."""


class BenchmarkWarning(UserWarning):
    """Something a benchmark command noticed and worked around (``nescal-bench`` prints
    it as ``nescal-bench: warning: ...``)."""


class ConfigWarning(BenchmarkWarning):
    """A configuration that is valid but probably not what was meant; the message starts
    with the path of the key."""


def show(value: Any) -> str:
    """``value`` as JSON, else its ``repr``."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]*")


def check_name(value: str) -> str:
    """A name that may become part of a file name: letters, digits, ``_ . @ + -``, not
    starting with ``.``, ``-``, ``@`` or ``+`` (so never ``..``, a separator or an
    absolute path).

    Examples
    --------
    >>> check_name("feature_noise@3")
    'feature_noise@3'
    >>> check_name("../escaped")
    Traceback (most recent call last):
    ...
    ValueError: expected a name of letters, digits and '_', '.', '@', '+', '-' that does not start with '.', '@', '+' or '-', got "../escaped"
    """
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(
            "expected a name of letters, digits and '_', '.', '@', '+', '-' that does not "
            f"start with '.', '@', '+' or '-', got {show(value)}"
        )
    return value


#: A dataset, method, calibrator or condition name (see :func:`check_name`).
Name = Annotated[Any, AfterValidator(check_name)]

_PLAIN = {
    "extra_forbidden": "unknown key",
    "unexpected_keyword_argument": "unknown key",
    "missing": "required key missing",
    "missing_argument": "required key missing",
}


def dotted(loc: tuple) -> str:
    """A pydantic location as a config path: ``("datasets", 0, "local")`` ->
    ``datasets[0].local``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def parse(
    kind: Any, value: Any, path: str = "", error: type = ConfigError, context: dict | None = None
) -> Any:
    """``value`` validated as ``kind`` (a pydantic type, its validators given ``context``);
    at the first problem, ``error`` with its path under ``path`` and what was wrong.

    Examples
    --------
    >>> from typing import Annotated
    >>> from pydantic import Field, StrictInt
    >>> parse(list[Annotated[StrictInt, Field(ge=0)]], [1, -1], "confirm_seeds")
    Traceback (most recent call last):
    ...
    nescal_bench._base.ConfigError: confirm_seeds[1]: input should be greater than or equal to 0, got -1
    """
    try:
        return TypeAdapter(kind).validate_python(value, context=context)
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]
        where = dotted((path, *problem["loc"]) if path else problem["loc"])
        message = _PLAIN.get(problem["type"])
        cause = problem.get("ctx", {}).get("error")
        if isinstance(cause, ConfigError):  # a model validator's own key, under the model's
            where, message = ".".join(p for p in (where, cause.path) if p), cause.message
        if message is None:
            text = problem["msg"].removeprefix("Value error, ")
            if problem["type"] != "value_error":  # pydantic's own: say what was found
                text = f"{text[0].lower()}{text[1:]}, got {show(problem['input'])}"
            message = text
        if error is ConfigError:
            raise ConfigError(where, message) from None
        raise error(f"{where}: {message}" if where else message) from None
