"""Known defects the model test steps around, until each is fixed (ADR 0037).

Each has a strict-xfail regression test in `tests/datalog/test_model_findings.py`.
Set a switch to False once its defect is fixed (its xfail then passes: remove the
mark): the model test holds the database to the documented behaviour again.
"""

from __future__ import annotations

FINDINGS = {
    # Subscribing to a query with a constant (a new multi-tenant parameter) takes an
    # epoch of its own and appends to the log (issue 23, "reads that write").
    "constant_subscription_takes_an_epoch": True,
    # The stored updates of a live query with a constant grow with every commit
    # (issue 23, "unbounded state"): the bound is not checked while one is live.
    "constant_query_state_grows": True,
    # An arrangement nobody reads (a join's side that only the other side's changes
    # would look up: `q(x) :- s(x), !v(x)` with `s` fixed) keeps every update it is
    # given, so a toggled fact grows the state without bound (fixed on the
    # `compaction` branch, ADR 0040): the bound is not checked until it is merged.
    "unread_arrangements_grow": True,
    # A definition that fails after its epoch committed (a subscriber's KeyboardInterrupt,
    # a fault while the epoch is sealed or delivered) skips the paced subscribers: what
    # was due at that epoch comes one commit late (or never, if none follows).
    "failed_define_skips_paced_delivery": True,
    # A definition whose rebuild of live queries fails (an interrupt, a functor) while
    # two multi-tenant dataflows are live raises `KeyError` from the rollback instead
    # of its own error (issue 23, "failures inside failures"); taken as that error.
    "failed_rebuild_with_tenants_raises_keyerror": True,
    # An interrupt while a dataflow is dropped (a one-shot query's, after its answer;
    # an unsubscribed live query's) leaves it in the engine for good: it runs at every
    # commit, and an unsubscribed live query stays listed with no subscriber (issue 23,
    # "a Ctrl-C during subscribe/unsubscribe"). The model injects nothing there.
    "interrupted_drop_leaves_orphan_dataflow": True,
    # An interrupt while `subscribe` stores a new live query's first answer, or reads
    # the snapshot it hands the callback, leaves the started dataflow in the engine
    # (and in the second case a subscriber nobody can remove: issue 23, "a Ctrl-C
    # during subscribe"). The model injects no trace-insert or batch-build fault into
    # a subscription.
    "interrupted_subscribe_leaves_orphan_dataflow": True,
    # A subscriber of a multi-tenant dataflow interrupted (KeyboardInterrupt) while a
    # rule change is delivered, or an interrupt while the members' answers are stored,
    # leaves the other members answering with the old rules, then with neither (issue
    # 23). While a query with a constant is live, the model injects no fault after the
    # epoch of a definition or redefinition.
    "tenant_interrupt_during_redefine_keeps_old_rules": True,
    # `tx.commit()` called inside `with db.transaction() as tx:` commits again when the
    # block exits: a second epoch (a multiset relation gets the rows twice). The
    # model commits explicitly only once this is fixed.
    "explicit_commit_commits_twice": True,
    # `query_columns` and `query_arrow` of a query without variables (`tc(1, 2)`)
    # return no columns and no rows, whether or not the fact holds: the answer is lost.
    "ground_query_columns_lose_the_answer": True,
}
