"""Helpers of the stateful model test (`tests/datalog/test_model.py`, ADR 0037).

`pool` (what is defined, redefined and asked), `state` (the model: program, facts,
epochs, answers by the reference evaluator), `subscribers` (what each subscription
received and should have), `rows` (rows in every input form), `faults` (injected
KeyboardInterrupt and MemoryError) and `measures` (stats and the log's size).
"""
