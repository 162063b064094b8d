"""datalog: the language, the planner and the public API.

Layer: above `joins` and `differential`; may import both, never `server`.

The public names below are loaded lazily (PEP 562), so `import datalog` stays
fast and pulls in neither numpy's dataflow machinery nor any optional extra
until one of them is used:

    import datalog
    db = datalog.Database()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "Database": "datalog.database",
    "Transaction": "datalog.transaction",
    "Change": "datalog.change",
    "Subscription": "datalog.live",
    "Pacing": "datalog.pacing",
    "ManualClock": "datalog.pacing",
    "Clock": "datalog.pacing",
    "parse_program": "datalog.parser",
    "parse_query": "datalog.parser",
    "DatalogError": "datalog.errors",
    "DatalogSyntaxError": "datalog.errors",
    "DatalogSemanticError": "datalog.errors",
    "DatalogErrors": "datalog.errors",
    "UnknownNameError": "datalog.errors",
    "ArityError": "datalog.errors",
    "TypeMismatchError": "datalog.errors",
    "RangeRestrictionError": "datalog.errors",
    "StratificationError": "datalog.errors",
    "DuplicateDeclarationError": "datalog.errors",
    "ComponentError": "datalog.errors",
    "RedefinitionError": "datalog.errors",
    "TransactionError": "datalog.errors",
    "UnsupportedError": "datalog.errors",
    "BudgetExceeded": "datalog.errors",
    "RowLimitExceeded": "datalog.errors",
    "FunctorError": "datalog.errors",
    "FactNotFoundError": "datalog.errors",
    "FactHoldsError": "datalog.errors",
    "EpochError": "datalog.errors",
    "HistoryCompactedError": "datalog.errors",
    "Derivation": "datalog.provenance",
    "WhyNot": "datalog.whynot",
    "WhyChange": "datalog.whywatch",
    "WhySubscription": "datalog.whywatch",
    "UnboundFunctorError": "datalog.errors",
    "FactFileError": "datalog.sources.csv",
    "DurabilityError": "datalog.storage.frames",
    "DatabaseLockedError": "datalog.storage.frames",
    "CorruptLogError": "datalog.storage.frames",
    "vectorized": "datalog.functors",
    "functors_in_file": "datalog.functors",
}

__all__ = [
    "__version__",
    "Database",
    "Transaction",
    "Change",
    "Subscription",
    "Pacing",
    "ManualClock",
    "Clock",
    "parse_program",
    "parse_query",
    "DatalogError",
    "DatalogSyntaxError",
    "DatalogSemanticError",
    "DatalogErrors",
    "UnknownNameError",
    "ArityError",
    "TypeMismatchError",
    "RangeRestrictionError",
    "StratificationError",
    "DuplicateDeclarationError",
    "ComponentError",
    "RedefinitionError",
    "TransactionError",
    "UnsupportedError",
    "BudgetExceeded",
    "RowLimitExceeded",
    "FunctorError",
    "FactNotFoundError",
    "FactHoldsError",
    "EpochError",
    "HistoryCompactedError",
    "Derivation",
    "WhyNot",
    "WhyChange",
    "WhySubscription",
    "UnboundFunctorError",
    "FactFileError",
    "DurabilityError",
    "DatabaseLockedError",
    "CorruptLogError",
    "vectorized",
    "functors_in_file",
]

if TYPE_CHECKING:
    from datalog.change import Change
    from datalog.database import Database
    from datalog.errors import (
        ArityError,
        BudgetExceeded,
        ComponentError,
        DatalogError,
        DatalogErrors,
        DatalogSemanticError,
        DatalogSyntaxError,
        DuplicateDeclarationError,
        EpochError,
        FactHoldsError,
        FactNotFoundError,
        FunctorError,
        HistoryCompactedError,
        RangeRestrictionError,
        RedefinitionError,
        RowLimitExceeded,
        StratificationError,
        TransactionError,
        TypeMismatchError,
        UnboundFunctorError,
        UnknownNameError,
        UnsupportedError,
    )
    from datalog.functors import functors_in_file, vectorized
    from datalog.live import Subscription
    from datalog.pacing import Clock, ManualClock, Pacing
    from datalog.parser import parse_program, parse_query
    from datalog.provenance import Derivation
    from datalog.sources.csv import FactFileError
    from datalog.storage.frames import CorruptLogError, DatabaseLockedError, DurabilityError
    from datalog.transaction import Transaction
    from datalog.whynot import WhyNot
    from datalog.whywatch import WhyChange, WhySubscription


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'datalog' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
