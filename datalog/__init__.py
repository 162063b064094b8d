"""datalog: the language, the planner and the public API.

Layer: above `joins` and `differential`; may import both, never `server`.
Inside, packages by role point down: `cli -> io -> db -> plan -> eval -> lang` and
`db -> storage -> lang` (docs/architecture.md, docs/adr/0048).

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
    "Database": "datalog.db.database",
    "Transaction": "datalog.db.transaction",
    "Change": "datalog.db.change",
    "Subscription": "datalog.db.live",
    "Pacing": "datalog.db.pacing",
    "ManualClock": "datalog.db.pacing",
    "Clock": "datalog.db.pacing",
    "parse_program": "datalog.lang.parser",
    "parse_query": "datalog.lang.parser",
    "DatalogError": "datalog.lang.errors",
    "DatalogSyntaxError": "datalog.lang.errors",
    "DatalogSemanticError": "datalog.lang.errors",
    "DatalogErrors": "datalog.lang.errors",
    "UnknownNameError": "datalog.lang.errors",
    "ArityError": "datalog.lang.errors",
    "TypeMismatchError": "datalog.lang.errors",
    "RangeRestrictionError": "datalog.lang.errors",
    "StratificationError": "datalog.lang.errors",
    "DuplicateDeclarationError": "datalog.lang.errors",
    "ComponentError": "datalog.lang.errors",
    "RedefinitionError": "datalog.lang.errors",
    "TransactionError": "datalog.lang.errors",
    "UnsupportedError": "datalog.lang.errors",
    "BudgetExceeded": "datalog.lang.errors",
    "RowLimitExceeded": "datalog.lang.errors",
    "FunctorError": "datalog.lang.errors",
    "FactNotFoundError": "datalog.lang.errors",
    "FactHoldsError": "datalog.lang.errors",
    "EpochError": "datalog.lang.errors",
    "HistoryCompactedError": "datalog.lang.errors",
    "Derivation": "datalog.db.provenance",
    "WhyNot": "datalog.db.whynot",
    "WhyChange": "datalog.db.whywatch",
    "WhySubscription": "datalog.db.whywatch",
    "UnboundFunctorError": "datalog.lang.errors",
    "FactFileError": "datalog.io.sources.csv",
    "DurabilityError": "datalog.storage.frames",
    "DatabaseLockedError": "datalog.storage.frames",
    "CorruptLogError": "datalog.storage.frames",
    "vectorized": "datalog.eval.functors",
    "functors_in_file": "datalog.eval.functors",
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
    from datalog.db.change import Change
    from datalog.db.database import Database
    from datalog.db.live import Subscription
    from datalog.db.pacing import Clock, ManualClock, Pacing
    from datalog.db.provenance import Derivation
    from datalog.db.transaction import Transaction
    from datalog.db.whynot import WhyNot
    from datalog.db.whywatch import WhyChange, WhySubscription
    from datalog.eval.functors import functors_in_file, vectorized
    from datalog.io.sources.csv import FactFileError
    from datalog.lang.errors import (
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
    from datalog.lang.parser import parse_program, parse_query
    from datalog.storage.frames import CorruptLogError, DatabaseLockedError, DurabilityError


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'datalog' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
