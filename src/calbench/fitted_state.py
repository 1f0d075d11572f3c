"""Declared fitted state: what each fitted attribute of a calibrator or 1-D map holds (kind, dtype, shape).

A class declares its fitted attributes once, as scikit-learn's ``_parameter_constraints`` declares settings::

    _fitted_state = {"weights_": Array(float, ("C", "C")), "intercept_": Array(float, ("C",)),
                     "penalty_centre_": Scalar(float, none=True)}

The declarations of a class and of its bases are merged (:func:`declared_state`; a subclass overrides a name). A
shape is a tuple of sizes, each a number or an expression of symbols: ``C`` (the number of classes, bound by
``Count("C")`` on ``num_classes_``), ``H`` (the embedding width), an integer setting of the object (a histogram's
``n_bins``) or a free length such as ``n`` (the knots of an isotonic map, the rows of LECE's pool), bound where it
is first met and the same everywhere else in one object. An expression sums symbols and integers, a symbol
possibly times an integer: ``"n-1"``, ``"m+C"``, ``"2*n_pieces+1"``. :func:`check_state` raises
:class:`StateError` naming the attribute (``weights_``, ``binary_maps_[2]['filled']``) with what was expected and
what was found; :mod:`calbench.persist` checks every loaded calibrator and map this way before it predicts, and
``tests/contract/test_fitted_state.py`` checks that every registered class declares exactly what it fits.

A nested calibrator may be required to be exactly the class of one of its owner's settings or class attributes
(``Instance(Calibrator, like="estimator")``: a grid search's fold models), and a class may give symbols of its
own to the sizes (``_declared_symbols()``: a grid search holds ``folds`` models with ``ensemble``, else one).
Settings are declared the same way where a class needs it (``_declared_settings``, :func:`check_declared_settings`):
every setting of a 1-D map (a saved map is rebuilt from them, so none may be missing or of another kind,
``Choice`` for options), and a chain's ``steps`` (at least one fitted calibrator of its classes).

A number or an array may also declare the range of its values, ``within="[0, 1]"`` (probabilities, bin
accuracies, mixture weights), ``"(0, inf)"`` (temperatures), ``"[1, n]"`` (a neighbour count no larger than the
pool), ``"[0, C)"`` (labels): brackets closed, parentheses open, each end a number, ``inf``/``-inf`` or a symbol
of the shapes (a symbol not bound by the object's state leaves that end unchecked). Inside :func:`charging`, each
range check of an array first reports its bytes (the decode budget of :mod:`calbench.persist.budget`: a file can
name one array many times).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import re
from numbers import Integral, Real

import numpy as np

_DTYPE_KINDS = {float: ("f", "float"), int: ("iu", "integer"), bool: ("b", "boolean")}
_FITTED_NAME = re.compile(r"^[a-z][a-z0-9_]*_$")
_TERM = re.compile(r"\s*([+-]?)\s*(?:([0-9]+)\s*\*\s*)?([A-Za-z_][A-Za-z0-9_]*|[0-9]+)\s*")
_RANGE = re.compile(r"^([\[(])\s*([^,\s]+)\s*,\s*([^,\s\])]+)\s*([\])])$")
#: The scope's entry for the object being checked (no symbol can be spelt so).
_OWNER = "$owner"
#: Called with (bytes, field) before each range check of an array, where :func:`charging` set it.
_CHARGE = contextvars.ContextVar("fitted_state_charge", default=None)


@contextlib.contextmanager
def charging(charge):
    """Within the block, every range check of an array first calls ``charge(nbytes, field)`` (which may raise)."""
    token = _CHARGE.set(charge)
    try:
        yield
    finally:
        _CHARGE.reset(token)


class Within:
    """The range ``text`` of a declared number or array (module docstring): ``[low, high]``, ends open with
    parentheses."""

    def __init__(self, text: str):
        match = _RANGE.match(text)
        if match is None:
            raise ValueError(f"range {text!r}: expected [low, high] with brackets or parentheses")
        self.text, self.low, self.high = text, match[2], match[3]
        self.low_open, self.high_open = match[1] == "(", match[4] == ")"

    @staticmethod
    def _end(term: str, scope: dict):
        """An end's value: a number (``inf`` too), a bound symbol's value, or None (unbound: unchecked)."""
        try:
            return float(term)
        except ValueError:
            return scope.get(term)

    def check(self, value, field: str, scope: dict) -> None:
        """Raise :class:`StateError` for the values of number or array ``value`` outside the range."""
        low, high = self._end(self.low, scope), self._end(self.high, scope)
        values = np.asarray(value)
        if values.size == 0 or (low is None and high is None):
            return
        if isinstance(value, np.ndarray) and (charge := _CHARGE.get()) is not None:
            charge(value.nbytes, field)
        smallest, largest = values.min(), values.max()
        below = low is not None and (smallest <= low if self.low_open else smallest < low)
        above = high is not None and (largest >= high if self.high_open else largest > high)
        if not (below or above):
            return
        low, high = (-math.inf if low is None else low), (math.inf if high is None else high)
        outside = ~(((values > low) if self.low_open else (values >= low))
                    & ((values < high) if self.high_open else (values <= high)))
        worst = smallest if below else largest
        ends = f"{'(' if self.low_open else '['}{low:g}, {high:g}{')' if self.high_open else ']'}"
        shown = self.text if ends.replace(" ", "") == self.text.replace(" ", "") else f"{self.text} = {ends}"
        raise StateError(field, f"expected values in {shown}, found {int(outside.sum())} of {values.size} outside "
                                f"(e.g. {worst.item()!r:.40})")


class StateError(ValueError):
    """A fitted attribute that does not fit its declaration; ``field`` names it (``estimators_[0]``)."""

    def __init__(self, field: str, detail: str):
        super().__init__(f"{field}: {detail}")
        self.field, self.detail = field, detail


def _found(value) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    text = repr(value)
    return f"a {type(value).__name__} {text[:40] + '...' if len(text) > 40 else text}"


class _Spec:
    """One declared kind; ``none=True``: the attribute may also be None; ``optional=True``: a fitted object may
    lack it (the embedding width of a calibrator that reads no embeddings)."""

    none = optional = False

    def check(self, value, field: str, scope: dict, deep: bool) -> None:
        if value is None and self.none:
            return
        self._check(value, field, scope, deep)

    def fail(self, value, field: str, expected: str):
        raise StateError(field, f"expected {expected}{' or None' if self.none else ''}, found {_found(value)}")


class Count(_Spec):
    """A positive integer that binds ``symbol`` (``num_classes_``: ``C``; ``embedding_dim_``: ``H``)."""

    def __init__(self, symbol: str, optional: bool = False):
        self.symbol, self.optional = symbol, optional

    def _check(self, value, field, scope, deep):
        if not isinstance(value, Integral) or isinstance(value, (bool, np.bool_)) or value < 1:
            self.fail(value, field, f"a positive integer (the count {self.symbol})")
        _size(self.symbol, int(value), field, scope, f"count {self.symbol}")


class Scalar(_Spec):
    """One number or string of type ``kind``: ``float`` (any real number), ``int``, ``bool`` or ``str``."""

    _TYPES = {float: (Real, "a number"), int: (Integral, "an integer"), bool: ((bool, np.bool_), "a boolean"),
              str: (str, "a string")}

    def __init__(self, kind: type, none: bool = False, optional: bool = False, within: str | None = None):
        self.kind, self.none, self.optional = kind, none, optional
        self.within = None if within is None else Within(within)

    def _check(self, value, field, scope, deep):
        types, what = self._TYPES[self.kind]
        if not isinstance(value, types) or (self.kind in (float, int) and isinstance(value, (bool, np.bool_))):
            self.fail(value, field, what)
        if self.within is not None:
            self.within.check(value, field, scope)


class Choice(_Spec):
    """One of the listed ``values`` (a setting's options: a loss's name, ``True``/``False``); compared by type and
    value, so ``1`` is not ``True`` and ``"3"`` is not ``3``."""

    def __init__(self, *values, none: bool = False):
        self.values, self.none = values, none

    def _check(self, value, field, scope, deep):
        if not any(type(value) is type(option) and value == option for option in self.values):
            self.fail(value, field, f"one of {', '.join(map(repr, self.values))}")


class Array(_Spec):
    """A numpy array of ``dtype`` ``float``, ``int`` or ``bool``, of ``shape`` (sizes: numbers or symbol
    expressions; ``None``: any shape), its values ``within`` a range (module docstring)."""

    def __init__(self, dtype: type, shape: tuple | None, none: bool = False, optional: bool = False,
                 within: str | None = None):
        self.dtype, self.shape, self.none, self.optional = dtype, shape, none, optional
        self.within = None if within is None else Within(within)

    def _check(self, value, field, scope, deep):
        kinds, what = _DTYPE_KINDS[self.dtype]
        sizes = ", ".join(map(str, self.shape or ()))
        shape = "" if self.shape is None else f" of shape ({sizes}{',' * (len(self.shape) == 1)})"
        if not isinstance(value, np.ndarray) or value.dtype.kind not in kinds:
            self.fail(value, field, f"a {what} array{shape}")
        if self.shape is not None:
            if value.ndim != len(self.shape):
                self.fail(value, field, f"a {what} array{shape}")
            for axis, (size, expected) in enumerate(zip(value.shape, self.shape)):
                _size(expected, size, field, scope, f"axis {axis} of a {what} array{shape}")
        if self.within is not None:
            self.within.check(value, field, scope)


class Instance(_Spec):
    """A fitted object of class ``cls`` (a nested calibrator or 1-D map: it holds every attribute its class
    declares but the optional ones; ``fitted=False``: an unfitted one, kept for its settings, may stand here too).
    ``classes``: its ``num_classes_`` equals this symbol; ``fields``: declarations of its plain attributes, sharing
    this object's symbols (LECE's pool). With ``deep``, its own declaration is checked too."""

    def __init__(self, cls: type, none: bool = False, classes: str | None = None, fields: dict | None = None,
                 fitted: bool = True, like: str | None = None):
        self.cls, self.none, self.classes, self.fields, self.fitted = cls, none, classes, fields or {}, fitted
        self.like = like

    def _check(self, value, field, scope, deep):
        if not isinstance(value, self.cls):
            self.fail(value, field, f"a {self.cls.__name__}")
        if self.like is not None:  # exactly the class of the owner's setting (or class attribute) ``like``
            model = getattr(scope[_OWNER], self.like)
            expected = model if isinstance(model, type) else type(model)
            if type(value) is not expected:
                self.fail(value, field, f"a {expected.__name__} (the class of {self.like})")
        attributes = vars(value)
        for name, spec in declared_state(type(value)).items() if self.fitted else ():
            if name not in attributes and not spec.optional:
                raise StateError(f"{field}.{name}", f"missing: a fitted {type(value).__name__} holds it")
        if self.classes is not None:
            _size(self.classes, value.num_classes_, f"{field}.num_classes_", scope, f"count {self.classes}")
        for name, spec in self.fields.items():
            spec.check(getattr(value, name, None), f"{field}.{name}", scope, deep)
        if deep and declared_state(type(value)):
            check_state(value, field + ".", deep=True)


class ListOf(_Spec):
    """A list (or tuple) of items of one declared kind, ``length`` of them (a size or a symbol; None: any)."""

    def __init__(self, item: _Spec, length=None, none: bool = False):
        self.item, self.length, self.none = item, length, none

    def _check(self, value, field, scope, deep):
        if not isinstance(value, (list, tuple)):
            self.fail(value, field, "a list")
        if self.length is not None:
            _size(self.length, len(value), field, scope, "length of list")
        for i, item in enumerate(value):
            self.item.check(item, f"{field}[{i}]", scope, deep)


class Items(_Spec):
    """A tuple (or list) of fixed length whose items have the declared kinds, in order."""

    def __init__(self, *items: _Spec, none: bool = False):
        self.items, self.none = items, none

    def _check(self, value, field, scope, deep):
        if not isinstance(value, (list, tuple)) or len(value) != len(self.items):
            self.fail(value, field, f"a tuple of {len(self.items)} items")
        for i, (item, spec) in enumerate(zip(value, self.items)):
            spec.check(item, f"{field}[{i}]", scope, deep)


class DictOf(_Spec):
    """A dict of keys of type ``key`` (``str`` or ``int``) to values of one declared kind."""

    def __init__(self, key: type, value: _Spec, none: bool = False):
        self.key, self.value, self.none = key, value, none

    def _check(self, value, field, scope, deep):
        if not isinstance(value, dict):
            self.fail(value, field, "a dict")
        for key, item in value.items():
            if not isinstance(key, self.key) or isinstance(key, bool):
                raise StateError(field, f"expected {self.key.__name__} keys, found the key {key!r:.40}")
            self.value.check(item, f"{field}[{key!r}]", scope, deep)


class Record(_Spec):
    """A dict with exactly the keys of ``fields`` (those in ``optional`` may be absent), each of its declared
    kind. Its free lengths are its own (one record per class of a one-vs-rest map: each its own bin count)."""

    def __init__(self, fields: dict, optional: tuple = (), none: bool = False):
        self.fields, self.optional, self.none = fields, frozenset(optional), none

    def _check(self, value, field, scope, deep):
        if not isinstance(value, dict):
            self.fail(value, field, f"a dict with the keys {sorted(self.fields)}")
        keys = set(value)
        if not set(self.fields) - self.optional <= keys <= set(self.fields):
            raise StateError(field, f"expected the keys {sorted(self.fields)}, found {sorted(map(str, keys))[:20]}")
        inner = dict(scope)
        for key in value:
            self.fields[key].check(value[key], f"{field}[{key!r}]", inner, deep)


class OneOf(_Spec):
    """A value of any one of the declared kinds (a grid search's table: arrays and lists per grid point)."""

    def __init__(self, *options: _Spec):
        self.options = options

    def _check(self, value, field, scope, deep):
        errors = []
        for option in self.options:
            trial = dict(scope)
            try:
                option.check(value, field, trial, deep)
            except StateError as err:
                errors.append(err.detail)
                continue
            scope.update(trial)
            return
        raise StateError(field, " or ".join(sorted(set(errors))))


class Setting(_Spec):
    """A value a setting may take: None, a boolean, number or string, or a list, tuple or dict of these (a grid
    search's chosen point, a training history)."""

    def _check(self, value, field, scope, deep):
        if value is None or isinstance(value, (bool, Real, str, np.bool_)):
            return
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                self._check(item, f"{field}[{i}]", scope, deep)
        elif isinstance(value, dict):
            for key, item in value.items():
                self._check(item, f"{field}[{key!r}]", scope, deep)
        else:
            self.fail(value, field, "a setting's value (None, a number, a string, or a list or dict of them)")


def _size(expected, size: int, field: str, scope: dict, what: str) -> None:
    """Check ``size`` against a size or an expression (a sum of integers and symbols, each times an integer factor),
    binding its one unbound symbol (if any, added with factor 1) in ``scope``."""
    if isinstance(expected, int):
        if size != expected:
            raise StateError(field, f"expected {what} to be {expected}, found {size}")
        return
    constant, unbound = 0, []
    for sign, factor, term in _TERM.findall(expected):
        value = int(term) if term.isdigit() else scope.get(term)
        if value is None:
            unbound.append((sign, factor, term))
        else:
            constant += (-1 if sign == "-" else 1) * int(factor or 1) * value
    if not unbound:
        if size != constant:
            symbols = re.findall(r"[A-Za-z_]\w*", expected)
            values = f" = {constant}" if symbols == [expected] else \
                f" = {constant} ({', '.join(f'{s} = {scope[s]}' for s in symbols)})"
            raise StateError(field, f"expected {what} to be {expected}{values}, found {size}")
        return
    if len(unbound) > 1 or unbound[0][:2] != ("", ""):
        raise ValueError(f"the declared size {expected!r} of {field} has more than one unbound symbol, or one with a "
                         "sign or factor: bind it in an earlier size")
    symbol = unbound[0][2]
    if size - constant < 0:
        raise StateError(field, f"expected {what} to be {expected} with {symbol} >= 0, found {size}")
    scope[symbol] = size - constant


@functools.cache
def declared_state(cls: type) -> dict:
    """The fitted attributes ``cls`` declares: the ``_fitted_state`` of the class and of its bases merged, the
    class's own last (counts first, so that they bind their symbols before any shape is read)."""
    merged = {}
    for klass in reversed(cls.__mro__):
        merged.update(vars(klass).get("_fitted_state", {}))
    return dict(sorted(merged.items(), key=lambda item: not isinstance(item[1], Count)))


@functools.cache
def declared_settings(cls: type) -> dict:
    """The settings ``cls`` declares in ``_declared_settings`` (merged with its bases'): a 1-D map's every setting,
    a composition's nested calibrators (a chain's ``steps``)."""
    merged = {}
    for klass in reversed(cls.__mro__):
        merged.update(vars(klass).get("_declared_settings", {}))
    return merged


def check_declared_settings(cls: type, settings: dict, prefix: str = "") -> None:
    """Raise :class:`StateError` for the first of ``settings`` (name → value) that ``cls``'s
    :func:`declared_settings` do not allow."""
    declared = declared_settings(cls)
    scope = {name: value for name, value in settings.items() if type(value) is int}
    for name, value in settings.items():
        if name in declared:
            declared[name].check(value, prefix + name, scope, False)


def check_state(obj, prefix: str = "", deep: bool = False, settings_prefix: str | None = None) -> None:
    """Raise :class:`StateError` for the first fitted attribute of ``obj`` that its class's declaration does not
    allow, or that a fitted ``obj`` (one holding any declared attribute) lacks and is not optional; an unfitted
    object holds none (a one-vs-rest calibrator kept for its settings); then for its declared settings
    (:func:`declared_settings`, named with ``settings_prefix``, by default ``prefix``). ``deep``: nested
    calibrators and maps are checked against their own declarations too (loading checks each as it is built). The
    sizes may use the object's integer settings and the symbols its ``_declared_symbols()`` gives (a grid search's
    number of models)."""
    attributes = vars(obj)
    scope = {name: value for name, value in attributes.items() if not name.endswith("_") and type(value) is int}
    scope[_OWNER] = obj
    if hasattr(obj, "_declared_symbols"):
        scope.update(obj._declared_symbols())
    declared = declared_state(type(obj))
    fitted = not attributes.keys().isdisjoint(declared)
    for name, spec in declared.items():
        if name in attributes:
            spec.check(attributes[name], prefix + name, scope, deep)
        elif fitted and not spec.optional:
            raise StateError(prefix + name, f"missing: a fitted {type(obj).__name__} holds it")
    for name, spec in declared_settings(type(obj)).items():
        if name in attributes:
            spec.check(attributes[name], (prefix if settings_prefix is None else settings_prefix) + name, scope, deep)


@functools.cache
def fitted_names(cls: type) -> frozenset[str]:
    """The names ending in ``_`` that the methods of ``cls`` and of its bases assign to ``self``
    (``self.temperature_ = ...``), read from their source: what its declaration must name
    (``tests/contract/test_fitted_state.py`` checks every registered class)."""
    import ast
    import inspect
    import textwrap

    names = set()
    for klass in cls.__mro__[:-1]:  # all but object
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(klass)))):
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            for target in targets:
                for one in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                    if (isinstance(one, ast.Attribute) and isinstance(one.value, ast.Name) and one.value.id == "self"
                            and _FITTED_NAME.match(one.attr)):
                        names.add(one.attr)
    return frozenset(names)
